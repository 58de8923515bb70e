import { expect, hydrated, signedIn, test } from './helpers';

// Rules A15–A17 in the test's own org: the admin sets an RTT ceiling for
// pick-place on the floors screen, a pick-place call raised from the
// overview queues (nobody is ready), and the overview's queue and the
// wallboard show its ceiling now and when it next rises, ticking.

test('an admin sets an RTT ceiling; a waiting call shows its ceiling and next relaxation on the overview and the wallboard; the ceiling is removed', async ({ browser, org }) => {
  test.setTimeout(120_000);
  const adminCtx = await signedIn(browser, org, org.admin, { viewport: { width: 1920, height: 1080 } });
  const page = await adminCtx.newPage();
  page.on('pageerror', (e) => console.log(`PAGE ERROR: ${e.message.slice(0, 300)}`));

  await page.goto('/admin/floors');
  await hydrated(page);
  const section = page.getByTestId('ceilings-section');
  await expect(section.getByRole('heading', { name: 'RTT ceilings' })).toBeVisible();
  await expect(section).toContainText('Certification never relaxes.');
  await expect(page.getByTestId('ceilings-empty')).toHaveText('No ceilings: every certified operator may be offered every call.');

  const form = page.getByTestId('ceiling-form');
  // The relaxation comes prefilled with the defaults.
  await expect(form.getByLabel('Step (ms)')).toHaveValue('50');
  await expect(form.getByLabel('Step every (s)')).toHaveValue('30');
  await expect(form.getByLabel('Lifted after (s)')).toHaveValue('300');
  await form.getByLabel('Skill').selectOption('pick-place');

  // A value the form lets through and the server refuses (lifted only as
  // a waiting call is cancelled): its sentence, as an alert; nothing listed.
  await form.getByLabel('Ceiling (ms)').fill('100');
  await form.getByLabel('Lifted after (s)').fill('900');
  await form.getByRole('button', { name: 'Save ceiling' }).click();
  await expect(section.getByRole('alert')).toContainText('The ceiling must be lifted before a waiting call is cancelled');
  await expect(page.getByTestId('ceilings-empty')).toBeVisible();

  await form.getByLabel('Lifted after (s)').fill('300');
  await form.getByRole('button', { name: 'Save ceiling' }).click();
  const row = page.getByTestId('ceilings').locator('tr[data-skill="pick-place"]');
  await expect(row.locator('td')).toHaveText(['pick-place', '100', '50', '30', '300', /Change\s+Remove/]);
  await expect(section.getByRole('alert')).toHaveCount(0);
  await expect(form.getByRole('button', { name: 'Save ceiling' })).toBeEnabled();

  // "Change" fills the form with the row and puts the focus on the ceiling.
  await form.getByLabel('Ceiling (ms)').fill('');
  await row.getByRole('button', { name: 'Change the pick-place ceiling' }).click();
  await expect(form.getByLabel('Skill')).toHaveValue('pick-place');
  await expect(form.getByLabel('Ceiling (ms)')).toHaveValue('100');
  await expect(form.getByLabel('Ceiling (ms)')).toBeFocused();
  await section.screenshot({ path: 'test-results/rtt-ceilings.png' });

  // A pick-place call from the overview's control: nobody is ready, so it queues.
  await page.goto('/admin');
  await hydrated(page);
  await page.getByTestId('dispatch-robot').selectOption(org.robots['ue-pick-01'].id);
  await page.getByRole('button', { name: 'Raise call' }).click();
  await expect(page.getByTestId('dispatch-result')).toContainText('202 queued');
  const queued = page.getByTestId('queue').locator('tr[data-skill="pick-place"]');
  const ceiling = queued.getByTestId('queue-ceiling');
  await expect(ceiling.getByTestId('ceiling-current')).toHaveText('100 ms');
  await expect(ceiling.getByTestId('ceiling-next')).toHaveText(/^rises in \d+ s$/);
  // It ticks with the browser's clock, not the snapshot's.
  const first = await ceiling.getByTestId('ceiling-next').textContent();
  await expect(ceiling.getByTestId('ceiling-next')).not.toHaveText(first!, { timeout: 5_000 });
  await expect(page.getByTestId('answered-first-ceiling')).toHaveText('0');
  await expect(page.getByTestId('answered-after-relaxing')).toHaveText('0');
  await page.getByTestId('queue').screenshot({ path: 'test-results/queue-ceiling.png' });

  await page.goto('/ops/wallboard');
  await hydrated(page);
  const waiting = page.getByTestId('wallboard-queue').locator('li[data-skill="pick-place"]');
  await expect(waiting).toContainText('1 waiting');
  await expect(waiting.getByTestId('wallboard-ceiling').getByTestId('ceiling-current')).toHaveText('100 ms');
  await expect(waiting.getByTestId('wallboard-ceiling').getByTestId('ceiling-next')).toHaveText(/^rises in \d+ s$/);
  await page.screenshot({ path: 'test-results/wallboard-waiting.png' });

  // Removed: the list is empty again, and the live screens show no ceiling.
  await page.goto('/admin/floors');
  await hydrated(page);
  await row.getByRole('button', { name: 'Remove the pick-place ceiling' }).click();
  await expect(row).toHaveCount(0);
  await expect(page.getByTestId('ceilings-empty')).toBeVisible();
  await page.goto('/admin');
  await hydrated(page);
  await expect(queued.getByTestId('queue-ceiling')).toHaveText('—');
  await expect(page.getByTestId('answered-first-ceiling')).toHaveCount(0);
  await adminCtx.close();
});

test('the wallboard says when no call is waiting', async ({ browser, org }) => {
  const adminCtx = await signedIn(browser, org, org.admin);
  const page = await adminCtx.newPage();
  await page.goto('/ops/wallboard');
  await hydrated(page);
  await expect(page.getByTestId('wallboard-queue')).toContainText('No calls waiting');
  await adminCtx.close();
});
