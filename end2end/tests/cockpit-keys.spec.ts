import { acceptIntoCockpit, expect, raise, readyOperator, test } from './helpers';

// The cockpit's keys work while its record reloads. A robot's telemetry
// pushes a reload of the record several times a second, and under load each
// reload takes longer than the gap to the next; the controls re-render on
// every reload, and a key listener that belonged to them was gone while a
// reload was pending: C, C never completed the session (seen on CI). In the
// test's own org, Tom (Manchester, pick-place) is the only one ready when
// uk-pick-01 calls.
test('L01 the cockpit keys act while a push storm keeps its record reloading', async ({ browser, request, org }) => {
  test.setTimeout(90_000);
  const page = await readyOperator(browser, org, org.people.tom);
  const context = page.context();
  const auth = org.auth('uk-pick-01');
  const session = await raise(request, org, 'uk-pick-01');
  await acceptIntoCockpit(page, org, 'uk-pick-01', session);
  // The deferred panels are built once the page is interactive.
  await expect(page.getByTestId('chat-input')).toBeVisible({ timeout: 30_000 });

  // Every reload of the record is slow, and telemetry pushes a new one
  // before the last has landed.
  await page.route('**/api/load_session', async (route) => {
    await new Promise((r) => setTimeout(r, 600));
    await route.continue();
  });
  let storming = true;
  const storm = (async () => {
    for (let i = 0; storming; i += 1) {
      await request.post(`/v1/sessions/${session}/telemetry`, {
        headers: auth,
        data: { state: 'ARMED', rttMs: 180 + (i % 20), divergenceDeg: 1.0, velocityScale: 1.0 },
      });
      await new Promise((r) => setTimeout(r, 150));
    }
  })();
  await page.waitForTimeout(1_000);
  await page.keyboard.press('c');
  await expect(page.getByTestId('steer-completed')).toHaveText('Confirm complete (C)');
  await page.waitForTimeout(700);
  await page.keyboard.press('c');
  storming = false;
  await storm;
  await expect(page.getByTestId('cockpit-lifecycle')).toHaveText('COMPLETED');
  await context.close();
});
