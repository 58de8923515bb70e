import { expect, hydrated, signedIn, test } from './helpers';

// The live screens, loaded again and again in parallel tabs while the org's
// events flow: every load must hydrate without an error. (A rare hydration
// failure once left these screens inert: the browser rendered another
// branch of a loaded value than the server had.)
test('the live screens hydrate cleanly under repeated parallel loads with events flowing', async ({ browser, request, org }) => {
  test.setTimeout(180_000);
  const context = await signedIn(browser, org, org.admin);
  const errors: string[] = [];
  const tabs = await Promise.all([0, 1, 2].map(() => context.newPage()));
  for (const [i, tab] of tabs.entries()) {
    tab.on('pageerror', (e) => errors.push(`tab ${i}: ${e.message.slice(0, 400)}`));
    tab.on('console', (m) => { if (m.type() === 'error') errors.push(`tab ${i} console: ${m.text().slice(0, 400)}`); });
  }
  // Events on the org's topic while the pages load: a robot raises a call
  // and withdraws it, again and again (nobody is ready in this org, so each
  // call queues, 202: raised, queued, cancelled).
  const robot = org.robots['uk-insp-01'];
  let flowing = true;
  const events = (async () => {
    const answers: number[] = [];
    while (flowing) {
      const raised = await request.post('/v1/sessions', { headers: org.auth('uk-insp-01'), data: { robotId: robot.id } });
      answers.push(raised.status());
      if (raised.status() !== 202) break;
      const withdrawn = await request.delete(`/v1/sessions/${(await raised.json()).sessionId}`, { headers: org.auth('uk-insp-01') });
      answers.push(withdrawn.status());
      await new Promise((r) => setTimeout(r, 40));
    }
    return answers;
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
  const answers = await events;
  expect(answers.length).toBeGreaterThan(0);
  expect(answers.filter((status) => status !== 202 && status !== 200), 'calls not queued (202) or withdrawn (200)').toEqual([]);
  expect(errors).toEqual([]);
  await context.close();
});

// Pushes reload the overview's picture; the dispatch control's keyboard
// focus must survive them (it once fell to the page's body on every push:
// the sign-in guard's Suspense dropped the whole screen to its fallback).
test('a push never takes the keyboard focus from the overview', async ({ browser, request, org }) => {
  const context = await signedIn(browser, org, org.admin);
  const admin = await context.newPage();
  await admin.goto('/admin');
  await hydrated(admin);
  await expect(admin.getByTestId('live-status')).toContainText('live');
  await admin.getByTestId('dispatch-robot').focus();
  const asOf = async () => admin.getByTestId('live-status').innerText();
  const focused: string[] = [];
  let reloads = 0;
  // Robots of the org come online: one org event each.
  for (const robot of ['uk-pal-01', 'ue-pal-01', 'uw-pal-01', 'uk-mm-01', 'uw-pick-01', 'ue-pick-02']) {
    const before = await asOf();
    const beat = await request.post(`/v1/robots/${org.robots[robot].id}/heartbeat`, { headers: org.auth(robot) });
    expect(beat.status()).toBe(200);
    // Wait for the reload to land (several may merge into one).
    await expect.poll(asOf, { timeout: 5_000 }).not.toBe(before).then(() => (reloads += 1), () => {});
    focused.push(await admin.evaluate(() => document.activeElement?.getAttribute('data-testid') ?? document.activeElement?.tagName ?? ''));
  }
  expect(reloads).toBeGreaterThan(0);
  expect(focused).toEqual(Array(6).fill('dispatch-robot'));
  await context.close();
});
