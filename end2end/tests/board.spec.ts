import { acceptIntoCockpit, expect, hydrated, panicsOf, raise, readyOperator, signedIn, test } from './helpers';

// In the test's own org, Priya (Manchester, inspection) takes uk-insp-01,
// then Carla (Austin, inspection) takes ue-insp-01: nobody else is ready,
// so the ACD's choice is known.

test('W12 W15 W16: the overview raises a call that rings the operator; the wallboard puts a protective stop on top live, flags a silent robot, and shows its relay and link panels with no action that clears a stop', async ({ browser, request, org }) => {
  test.setTimeout(120_000);
  const robot = (id: string) => org.robots[id].id;
  const priya = await readyOperator(browser, org, org.people.priya);

  const adminCtx = await signedIn(browser, org, org.admin, { viewport: { width: 1920, height: 1080 } });
  const admin = await adminCtx.newPage();
  admin.on('pageerror', (e) => console.log(`PAGE ERROR: ${e.message.slice(0, 300)}`));
  admin.on('console', (m) => { if (m.type() === 'error') console.log(`PAGE CONSOLE: ${m.text().slice(0, 300)}`); });
  await admin.goto('/admin');
  await hydrated(admin);
  for (const metric of ['metric-live', 'metric-robots', 'metric-operators', 'metric-estops']) {
    await expect(admin.getByTestId(metric)).toBeVisible();
  }
  // Rule A14: the dispatch control makes the edge agent's POST /v1/sessions, by keyboard.
  await admin.getByTestId('dispatch-robot').selectOption(robot('uk-insp-01'));
  await admin.getByTestId('dispatch-robot').focus();
  await admin.keyboard.press('Tab');
  await admin.keyboard.press('Enter');
  await expect(admin.getByTestId('dispatch-result')).toContainText('201 matched');
  await expect(admin.getByTestId('dispatch-result')).toContainText('Priya Shah');
  await admin.screenshot({ path: 'test-results/overview.png', fullPage: true });
  const first = await acceptIntoCockpit(priya, org, 'uk-insp-01');

  // A second attached session, raised by its edge agent.
  const carla = await readyOperator(browser, org, org.people.carla);
  const second = await acceptIntoCockpit(carla, org, 'ue-insp-01', await raise(request, org, 'ue-insp-01'));
  for (const [session, by] of [[first, 'uk-insp-01'], [second, 'ue-insp-01']]) {
    const res = await request.post(`/v1/sessions/${session}/telemetry`, {
      headers: org.auth(by),
      data: { state: 'ARMED', rttMs: 190, divergenceDeg: 1.0, velocityScale: 1.0 },
    });
    expect(res.status()).toBe(200);
  }

  await admin.goto('/ops/wallboard');
  await hydrated(admin);
  // Says how it is kept current: pushed (live) once the socket is up.
  await expect(admin.getByTestId('live-status')).toContainText('live');
  const card = (id: string) => admin.locator(`[data-testid="card"][data-session="${id}"]`);
  await expect(card(first)).toHaveAttribute('data-state', 'ARMED');
  await expect(card(second)).toHaveAttribute('data-state', 'ARMED');
  await expect(admin.getByTestId('chip-PROTECTIVE_STOP')).toContainText('PROTECTIVE_STOP');
  // The panels below the cards, built once the page is interactive. W15: a
  // relay row for each attached session, neither of which has a relay
  // channel, so neither says flowing. W16: the org's paths with their floor
  // and note.
  for (const id of ['uk-insp-01', 'ue-insp-01']) {
    await expect(admin.getByTestId(`relay-${robot(id)}`).getByTestId('relay-health')).toHaveText(/^(starting|stalled)$/);
  }
  const manchester = admin.getByTestId('link-health').locator('tr', { hasText: 'Manchester → UK (London)' });
  await expect(manchester).toContainText('177 ms');
  await expect(manchester).toContainText('Shortest glass reach');
  await admin.evaluate(() => ((window as any).__noReload = true));

  const stop = await request.post(`/v1/sessions/${second}/telemetry`, {
    headers: org.auth('ue-insp-01'),
    data: { state: 'PROTECTIVE_STOP', rttMs: 190, divergenceDeg: 17.0, velocityScale: 0.0 },
  });
  expect(stop.status()).toBe(200);
  // Pushed: the card is first, in alarm, latched — and the page never reloaded.
  await expect(admin.getByTestId('card').first()).toHaveAttribute('data-session', second, { timeout: 20_000 });
  await expect(card(second)).toHaveClass(/alarm/);
  await expect(card(second)).toContainText('latched, awaiting clear');
  // W12: with a stop latched and the panels in, nothing on the board clears it.
  await expect(admin.getByTestId('link-health')).toBeVisible();
  await expect(admin.getByRole('button', { name: /clear/i })).toHaveCount(0);
  await expect(admin.getByRole('link', { name: /clear/i })).toHaveCount(0);
  await expect(admin.getByTestId('safety-feed')).toContainText('protective stop');
  expect(await admin.evaluate(() => (window as any).__noReload)).toBe(true);
  await admin.screenshot({ path: 'test-results/wallboard.png' });

  // A robot heartbeats (online, no chip), then goes silent: `robot offline`.
  const beat = await request.post(`/v1/robots/${robot('uk-insp-01')}/heartbeat`, { headers: org.auth('uk-insp-01') });
  expect(beat.status()).toBe(200);
  await expect(card(first).getByTestId('registry-chip')).toHaveCount(0, { timeout: 20_000 });
  await expect(card(first).getByTestId('registry-chip')).toHaveText('robot offline', { timeout: 40_000 });
  expect(await admin.evaluate(() => (window as any).__noReload)).toBe(true);
  await adminCtx.close();
  await priya.context().close();
  await carla.context().close();
});

test('a distress call whose control code cannot be fetched is not raised, and the overview says so', async ({ browser, org }) => {
  const context = await signedIn(browser, org, org.admin);
  // The request behind "Raise call" is a chunk of its own (split_raise_call,
  // which may also come in its bundle): the network drops both.
  await context.route(/\/pkg\/(split|bundle)_raise_call[^/]*\.wasm$/, (route) => route.abort());
  let posted = 0;
  await context.route('**/v1/sessions', (route) => {
    posted += 1;
    return route.continue();
  });
  const admin = await context.newPage();
  const errors = panicsOf(admin);
  await admin.goto('/admin');
  await hydrated(admin);
  await admin.getByRole('button', { name: 'Raise call' }).click();
  await expect(admin.getByTestId('dispatch-result')).toContainText('The call was not raised', { timeout: 20_000 });
  await expect(admin.getByRole('button', { name: 'Raise call' })).toBeEnabled();
  expect(posted).toBe(0);
  expect(errors).toEqual([]);
  await context.close();
});

// A live screen's push socket pings as often as a console heartbeats: it
// is still open past the 20 s the server gives a silent socket.
test('the wallboard keeps its push socket open past the presence TTL', async ({ browser, org }) => {
  test.setTimeout(60_000);
  const context = await signedIn(browser, org, org.admin);
  const page = await context.newPage();
  let pings = 0;
  let closed = false;
  page.on('websocket', (ws) => {
    if (!ws.url().includes('watch=')) return;
    ws.on('framesent', (frame) => { if (String(frame.payload).includes('"ping"')) pings += 1; });
    ws.on('close', () => { closed = true; });
  });
  await page.goto('/ops/wallboard');
  await hydrated(page);
  await expect(page.getByTestId('live-status')).toContainText('live');
  // One every 10 s: the third comes 30 s in, past the TTL.
  await expect.poll(() => closed || pings >= 3, { timeout: 45_000, intervals: [1_000] }).toBe(true);
  expect(closed, 'the server closed the wallboard for silence').toBe(false);
  await expect(page.getByTestId('live-status')).toContainText('live');
});
