import { expect, test } from '@playwright/test';
import { adminContext, hydrated } from './helpers';

// The live screens, loaded again and again in parallel tabs while the org's
// events flow: every load must hydrate without an error. (A rare hydration
// failure once left these screens inert: the browser rendered another
// branch of a loaded value than the server had.)
test('the live screens hydrate cleanly under repeated parallel loads with events flowing', async ({ browser, request }) => {
  test.setTimeout(180_000);
  const context = await adminContext(browser);
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
      await hydrated(tab).catch((e) => { throw new Error(`${e}\nerrors so far: ${errors.join('\n')}`); });
      await expect(tab.locator('.error[role="alert"]')).toHaveCount(0);
    }));
  }
  flowing = false;
  expect(await events).toBeGreaterThan(0);
  expect(errors).toEqual([]);
  await context.close();
});

// Pushes reload the overview's picture; the dispatch control's keyboard
// focus must survive them (it once fell to the page's body on every push:
// the sign-in guard's Suspense dropped the whole screen to its fallback).
test('a push never takes the keyboard focus from the overview', async ({ browser, request }) => {
  const context = await adminContext(browser);
  const admin = await context.newPage();
  await admin.goto('/admin');
  await hydrated(admin);
  await expect(admin.getByTestId('live-status')).toContainText('live');
  await admin.getByTestId('dispatch-robot').focus();
  const asOf = async () => admin.getByTestId('live-status').innerText();
  const focused: string[] = [];
  let reloads = 0;
  // Robots nobody else's test watches come online: one org event each.
  for (const robot of ['uk-pal-01', 'ue-pal-01', 'uw-pal-01', 'uk-mm-01', 'uw-pick-01', 'ue-pick-02']) {
    const before = await asOf();
    const beat = await request.post(`/v1/robots/${robot}/heartbeat`, { headers: { Authorization: `Bearer cct_demo_${robot}` } });
    expect(beat.status()).toBe(200);
    // Wait for the reload to land (several may merge into one).
    await expect.poll(asOf, { timeout: 5_000 }).not.toBe(before).then(() => (reloads += 1), () => {});
    focused.push(await admin.evaluate(() => document.activeElement?.getAttribute('data-testid') ?? document.activeElement?.tagName ?? ''));
  }
  expect(reloads).toBeGreaterThan(0);
  expect(focused).toEqual(Array(6).fill('dispatch-robot'));
  await context.close();
});
