import { acceptIntoCockpit, expect, hydrated, raise, readyOperator, signedIn, test } from './helpers';

// In the test's own org, Tom (Manchester, pick-place) is the only one ready
// when uk-pick-01 (London) calls.

test('L01 L03 L05: the operator pauses, resumes and completes the session from the cockpit by keyboard, and the log tells it', async ({ browser, request, org }) => {
  test.setTimeout(90_000);
  const context = await signedIn(browser, org, org.people.tom);
  const tom = await context.newPage();
  const errors: string[] = [];
  tom.on('pageerror', (e) => errors.push(`page error: ${e.message.slice(0, 300)}`));
  tom.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text().slice(0, 600)}`); });
  await tom.goto('/operator');
  await hydrated(tom);
  await tom.getByTestId('go-ready').click();
  await expect(tom.getByTestId('presence')).toHaveText('ready');

  const session = await raise(request, org, 'uk-pick-01');
  await acceptIntoCockpit(tom, org, 'uk-pick-01', session);
  const lifecycle = tom.getByTestId('cockpit-lifecycle');
  await expect(lifecycle).toHaveText('ACTIVE');

  await expect(tom.getByTestId('control-area')).toHaveAttribute('aria-disabled', 'false');
  await tom.getByTestId('control-area').click(); // operator input (resets the inactivity chain)
  await tom.keyboard.press('p');
  await expect(lifecycle).toHaveText('PAUSED');
  // Rule L03: paused, the control area takes no input.
  await expect(tom.getByTestId('control-area')).toHaveAttribute('aria-disabled', 'true');
  await expect(tom.getByTestId('steer-active')).toBeVisible(); // Resume
  await tom.getByTestId('steer-active').click();
  await expect(lifecycle).toHaveText('ACTIVE');
  // Complete asks once more before it ends the session.
  await tom.keyboard.press('c');
  await expect(tom.getByTestId('steer-completed')).toHaveText(/Confirm complete/);
  await expect(lifecycle).toHaveText('ACTIVE');
  await tom.keyboard.press('c');
  await expect(lifecycle).toHaveText('COMPLETED');
  await expect(tom.getByText('This session has ended.')).toBeVisible();

  await expect(tom.getByTestId('billable')).toContainText('paused time excluded');
  const kinds = tom.getByTestId('activity').locator('li');
  await expect(kinds).toHaveCount(4);
  expect(await kinds.evaluateAll((items) => items.map((li) => li.getAttribute('data-kind')))).toEqual([
    'SESSION_START', 'PAUSE', 'RESUME', 'SESSION_END',
  ]);
  // The session ended, so Tom is no longer on a call.
  await tom.goto('/operator');
  await hydrated(tom);
  await expect(tom.getByTestId('presence')).not.toHaveText('on_call');
  expect(errors).toEqual([]);
  await context.close();
});

test('W11 W13 L09 L10: an E-stop from the cockpit latches the card on the wallboard and reaches its safety feed; the detail view clears it with a reason', async ({ browser, request, org }) => {
  test.setTimeout(90_000);
  const tom = await readyOperator(browser, org, org.people.tom);
  const session = await raise(request, org, 'uk-pick-01');
  await acceptIntoCockpit(tom, org, 'uk-pick-01', session);

  const adminCtx = await signedIn(browser, org, org.admin, { viewport: { width: 1920, height: 1080 } });
  const admin = await adminCtx.newPage();
  await admin.goto('/ops/wallboard');
  await hydrated(admin);
  await expect(admin.getByTestId('live-status')).toContainText('live');
  const card = admin.locator(`[data-testid="card"][data-session="${session}"]`);
  await expect(card).toBeVisible();

  // One key stops it.
  await tom.keyboard.press('e');
  await expect(tom.getByTestId('cockpit-safety')).toHaveText('PROTECTIVE_STOP');
  await expect(tom.getByTestId('estop')).toBeDisabled();
  await tom.screenshot({ path: 'test-results/cockpit.png', fullPage: true });
  // Pushed to the wallboard: the card latches and tops the grid; the feed says who stopped it.
  await expect(card).toHaveAttribute('data-state', 'PROTECTIVE_STOP');
  await expect(admin.getByTestId('card').first()).toHaveAttribute('data-state', 'PROTECTIVE_STOP');
  await expect(admin.getByTestId('safety-feed')).toContainText('operator estop');

  // Cleared only from the detail view, with a reason.
  await card.locator('a').first().click();
  await expect(admin).toHaveURL(new RegExp(`/ops/sessions\\?s=${session}$`));
  await hydrated(admin);
  // Who the ACD considered for this call, with the verdict.
  await expect(admin.getByTestId('dispatch-history')).toContainText('Tom Whitfield');
  await expect(admin.getByTestId('dispatch-history')).toContainText('chosen');
  await admin.getByTestId('clear-reason').fill('Cell inspected on camera; guard closed.');
  await admin.getByTestId('clear-submit').click();
  await expect(admin.getByTestId('clear-stop')).toHaveCount(0);
  await expect(admin.getByTestId('session-record')).toContainText('SAFE');
  // The operator's cockpit learns it on its next load.
  await tom.reload();
  await hydrated(tom);
  await expect(tom.getByTestId('cockpit-safety')).toHaveText('SAFE');
  // L09: chat between the detail view and the cockpit, live both ways, as text.
  await admin.getByTestId('chat-input').fill('<b>Stop cleared</b>, carry on when ready.');
  await admin.getByTestId('chat-input').press('Enter');
  await expect(tom.getByTestId('chat')).toContainText('<b>Stop cleared</b>, carry on when ready.');
  await tom.getByTestId('chat-input').fill('Resuming the pick now.');
  await tom.getByTestId('chat-send').click();
  await expect(admin.getByTestId('chat')).toContainText('Tom Whitfield: Resuming the pick now.');
  // Complete the session, so that it can be rated.
  await tom.keyboard.press('c');
  await tom.keyboard.press('c');
  await expect(tom.getByTestId('cockpit-lifecycle')).toHaveText('COMPLETED');
  // L10: once COMPLETED, the session is rated once (the admin acts for the client).
  await admin.getByTestId('rate-stars').selectOption('4');
  await admin.getByTestId('rate-feedback').fill('Calm under a stop.');
  await admin.getByTestId('rate-submit').click();
  await expect(admin.getByTestId('rating')).toContainText('4/5');
  await expect(admin.getByTestId('rate-form')).toHaveCount(0);
  await admin.screenshot({ path: 'test-results/session-detail.png', fullPage: true });
  await tom.context().close();
  await adminCtx.close();
});

// The cockpit loads the session, then its watch socket subscribes: what
// changed in between (telemetry, here) must still reach the screen, by the
// reload the server's first `resync` asks for, not by the 15 s poll.
test('a cockpit shows telemetry posted while its watch socket was still connecting', async ({ browser, request, org }) => {
  test.setTimeout(60_000);
  const tom = await readyOperator(browser, org, org.people.tom);
  let posted!: () => void;
  const telemetryPosted = new Promise<void>((resolve) => { posted = resolve; });
  // The socket reaches the server only after the telemetry is in.
  await tom.routeWebSocket(/\/ws\?watch=mine/, async (ws) => {
    await telemetryPosted;
    ws.connectToServer();
  });
  const session = await raise(request, org, 'uk-pick-01');
  await acceptIntoCockpit(tom, org, 'uk-pick-01', session);
  await expect(tom.getByTestId('cockpit-safety')).toHaveText('BOOT');
  const telemetry = await request.post(`/v1/sessions/${session}/telemetry`, {
    headers: org.auth('uk-pick-01'),
    data: { state: 'ARMED', rttMs: 120, divergenceDeg: 1.0, velocityScale: 0.8 },
  });
  expect(telemetry.status()).toBe(200);
  posted();
  // Well inside the 15 s poll: the reload comes from the socket.
  await expect(tom.getByTestId('cockpit-safety')).toHaveText('ARMED', { timeout: 5_000 });
  await tom.context().close();
});

// The cockpit's chat is loaded, then its console socket subscribes: a
// message posted in between must still show, by the reload its `Welcome`
// brings (the chat is pushed on that socket, and not polled).
test('a reloaded cockpit shows a chat message posted while its sockets were still connecting', async ({ browser, request, org }) => {
  test.setTimeout(60_000);
  const tom = await readyOperator(browser, org, org.people.tom);
  const session = await raise(request, org, 'uk-pick-01');
  await acceptIntoCockpit(tom, org, 'uk-pick-01', session);
  let posted!: () => void;
  const chatPosted = new Promise<void>((resolve) => { posted = resolve; });
  // After the reload, the console's and the watch's sockets reach the
  // server only once the message is in.
  for (const socket of [/\/ws$/, /\/ws\?watch=mine/]) {
    await tom.routeWebSocket(socket, async (ws) => {
      await chatPosted;
      ws.connectToServer();
    });
  }
  await tom.reload();
  await hydrated(tom);
  await expect(tom.getByText('No messages yet.')).toBeVisible();
  const admin = await signedIn(browser, org, org.admin);
  const origin = test.info().project.use.baseURL!;
  const chat = await admin.request.post('/api/post_chat', { headers: { origin }, form: { session_id: session, body: 'Guard closed, go ahead.' } });
  expect(chat.status(), await chat.text()).toBe(200);
  posted();
  await expect(tom.getByTestId('chat')).toContainText('Guard closed, go ahead.', { timeout: 5_000 });
  await admin.close();
  await tom.context().close();
});
