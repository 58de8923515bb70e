import { expect, hydrated, readyOperator, signedIn, test } from './helpers';

// In the test's own Harbor Labs, Lena is the only operator: the counters
// count her alone.
test('the roster filters in place with counters fixed, shows an operator going ready on push, and one whose browser died going offline (Harbor Labs)', async ({ browser, org }) => {
  test.setTimeout(90_000);
  const adminCtx = await signedIn(browser, org, org.admin);
  const admin = await adminCtx.newPage();
  await admin.goto('/admin/directory');
  await hydrated(admin);
  await admin.getByLabel('Organisation').selectOption({ label: `${org.orgs['org-harbor'].name} · admin` });
  await admin.getByRole('button', { name: 'Switch' }).click();
  await expect(admin.getByTestId('robots').getByRole('link', { name: org.robots['hb-pick-01'].id })).toBeVisible();
  await admin.goto('/ops/roster');
  await hydrated(admin);
  const lenaRow = admin.locator(`[data-testid="roster-row"][data-agent="${org.people.lena.id}"]`);
  await expect(lenaRow).toHaveAttribute('data-state', 'offline');
  await admin.evaluate(() => ((window as any).__noReload = true));
  // Says how it is kept current: pushed (live) once the socket is up.
  await expect(admin.getByTestId('roster-counters')).toContainText('· live');

  // Lena signs in and goes Ready in her own browser: pushed, no reload here.
  const lenaContext = (await readyOperator(browser, org, org.people.lena)).context();
  // Pushed, or at the latest with the 8 s poll.
  await expect(lenaRow).toHaveAttribute('data-state', 'ready', { timeout: 12_000 });
  await expect(lenaRow).toContainText('Lena Fischer');
  await expect(lenaRow).not.toContainText(org.people.lena.email); // email searchable, never shown

  // Filters narrow the rows, never the counters (they keep counting rows
  // the filter hides). The filters live in the URL.
  const counts = async () => {
    const [online, ready] = (await admin.getByTestId('roster-counts').innerText()).match(/\d+/g)!.map(Number);
    return { online, ready };
  };
  expect(await counts()).toEqual({ online: 1, ready: 1 });
  await admin.getByTestId('roster-search').fill('fischer');
  await expect(admin.getByTestId('roster-row')).toHaveCount(1);
  await expect(admin).toHaveURL(/[?&]q=fischer/);
  await admin.getByTestId('roster-state').selectOption('aux');
  await expect(admin.getByTestId('roster-row')).toHaveCount(0);
  expect(await counts(), 'Lena, hidden by the filter').toEqual({ online: 1, ready: 1 });
  await admin.getByTestId('roster-state').selectOption('ready');
  await expect(admin.getByTestId('roster-row')).toHaveCount(1);
  expect(await admin.evaluate(() => (window as any).__noReload)).toBe(true);
  await admin.screenshot({ path: 'test-results/roster.png' });
  // The filtered view survives a reload (it is the URL).
  await expect(admin).toHaveURL(/state=ready/);
  await admin.reload();
  await hydrated(admin);
  await expect(admin.getByTestId('roster-search')).toHaveValue('fischer');
  await expect(admin.getByTestId('roster-state')).toHaveValue('ready');
  await expect(admin.getByTestId('roster-row')).toHaveCount(1);

  // Lena's browser dies: after the presence TTL (20 s) she is offline.
  await lenaContext.close();
  await admin.getByTestId('roster-state').selectOption('');
  await expect(lenaRow).toHaveAttribute('data-state', 'offline', { timeout: 40_000 });
  await expect(lenaRow.getByTestId('roster-age')).toHaveText(/^\d+s$/);
  await adminCtx.close();
});

// Rule R05: the roster is read-only; a row's only evidence of a change is
// its state and how long it has held it.
test('r05 a roster row offers no transition control, only its state and its age', async ({ browser, org }) => {
  const context = await signedIn(browser, org, org.admin);
  const admin = await context.newPage();
  await admin.goto('/ops/roster');
  await hydrated(admin);
  const rows = admin.getByTestId('roster-row');
  await expect(rows.first()).toBeVisible();
  await expect(rows.locator('button, select, input, textarea, form, [role="button"], [contenteditable="true"]')).toHaveCount(0);
  await expect(rows.first().getByTestId('roster-age')).toBeVisible();
  await context.close();
});

// Rule R09: re-fetched every 8 s, on a clock the test moves (no waiting).
// The org's socket is answered by the test and stays silent, so every
// fetch counted is the poll's, not a push's.
test('r09 the roster is fetched again every 8 s', async ({ browser, org }) => {
  const context = await signedIn(browser, org, org.admin);
  const admin = await context.newPage();
  await admin.routeWebSocket(/\/ws/, () => {});
  await admin.clock.install();
  let fetches = 0;
  let landed = 0;
  admin.on('request', (r) => { if (r.url().includes('/api/load_roster')) fetches += 1; });
  admin.on('requestfinished', (r) => { if (r.url().includes('/api/load_roster')) landed += 1; });
  await admin.goto('/ops/roster');
  await hydrated(admin);
  await expect(admin.getByTestId('roster-row').first()).toBeVisible();
  await admin.clock.pauseAt(Date.now() + 1_000);
  const [before, landedBefore] = [fetches, landed];
  // 8 s at a time, each poll's fetch landed before the next: a poke while a
  // fetch is still in flight merges into it (the clock moves instantly, the
  // network does not).
  for (let poll = 1; poll <= 3; poll += 1) {
    await admin.clock.runFor(8_000);
    await expect.poll(() => landed - landedBefore).toBeGreaterThanOrEqual(poll);
  }
  expect(fetches - before, 'every 8 s, not more often').toBeLessThanOrEqual(4);
  await context.close();
});
