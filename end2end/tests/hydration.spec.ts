import { expect, test } from '@playwright/test';
import { ADMIN, hydrated, signIn } from './helpers';

// The live screens, loaded again and again in parallel tabs while the org's
// events flow: every load must hydrate without an error. (A rare hydration
// failure once left these screens inert: the browser rendered another
// branch of a loaded value than the server had.)
test('the live screens hydrate cleanly under repeated parallel loads with events flowing', async ({ browser, request }) => {
  test.setTimeout(180_000);
  const context = await browser.newContext();
  const first = await context.newPage();
  await signIn(first, ADMIN);
  await expect(first).toHaveURL(/\/admin\/directory$/);
  const errors: string[] = [];
  const tabs = await Promise.all([0, 1, 2].map(() => context.newPage()));
  for (const [i, tab] of tabs.entries()) {
    tab.on('pageerror', (e) => errors.push(`tab ${i}: ${e.message.slice(0, 400)}`));
    tab.on('console', (m) => { if (m.type() === 'error') errors.push(`tab ${i} console: ${m.text().slice(0, 400)}`); });
  }
  // Events on the org's topic while the pages load: robot heartbeats and
  // safety telemetry (no calls, so no other test's operator rings).
  let flowing = true;
  const events = (async () => {
    let n = 0;
    while (flowing) {
      await request.post('/v1/robots/uk-insp-02/heartbeat', { headers: { Authorization: 'Bearer cct_demo_uk-insp-02' }, data: {} });
      n += 1;
      await new Promise((r) => setTimeout(r, 40));
    }
    return n;
  })();
  const screens = ['/admin', '/ops/wallboard', '/ops/roster'];
  for (let round = 0; round < 8; round += 1) {
    await Promise.all(tabs.map(async (tab, i) => {
      await tab.goto(screens[(round + i) % screens.length]);
      await hydrated(tab);
      await expect(tab.locator('.error[role="alert"]')).toHaveCount(0);
    }));
  }
  flowing = false;
  expect(await events).toBeGreaterThan(0);
  expect(errors).toEqual([]);
  await context.close();
});
