import { Browser, BrowserContext, CDPSession, Locator, Page, Route } from '@playwright/test';
import { expect, hydrated, panicsOf, raise, readyOperator, signedIn, signIn, test, TestOrg } from './helpers';

// In the test's own org, Jamal (Austin, palletize + welding) is the only
// one ready when uw-weld-01 calls; the call is raised with the robot's own
// token, as an edge agent would.
test('A12: two tabs of one operator both ring; accept in one opens the cockpit and stops the other', async ({ browser, request, org }) => {
  // Two tabs sign in and hydrate: under CI's load that alone has taken 20 s.
  test.setTimeout(60_000);
  const context = await browser.newContext();
  const first = await context.newPage();
  await signIn(first, org.people.jamal.email, org.password);
  await expect(first).toHaveURL(/\/operator$/);
  const second = await context.newPage();
  await second.goto('/operator');
  await hydrated(second);

  // Readiness is one per operator: Ready in one tab shows in both.
  await expect(first.getByTestId('go-ready')).toBeEnabled();
  await first.getByTestId('go-ready').click();
  await expect(first.getByTestId('presence')).toHaveText('ready');
  await expect(second.getByTestId('presence')).toHaveText('ready');

  const sessionId = await raise(request, org, 'uw-weld-01');

  for (const tab of [first, second]) {
    await expect(tab.getByTestId('offer')).toBeVisible();
    await expect(tab.getByTestId('offer-robot')).toHaveText(org.robots['uw-weld-01'].id);
    // Austin → us-west: the 118 ms floor bounds whatever the console measured.
    const rtt = Number((await tab.getByTestId('offer-rtt').innerText()).match(/^(\d+) ms/)![1]);
    expect(rtt).toBeGreaterThanOrEqual(118);
    // Counting down from 30 s (loose: other browser tests load the machine).
    await expect(tab.getByTestId('offer-countdown')).toHaveText(/^([12]\d|30) s$/);
    await expect(tab.getByTestId('presence')).toContainText('ringing');
  }
  await first.screenshot({ path: 'test-results/ringing-offer.png' });

  await first.keyboard.press('Enter'); // Enter accepts
  await expect(first).toHaveURL(new RegExp(`/cockpit/${sessionId}$`));
  await expect(first.getByTestId('cockpit-lifecycle')).toHaveText('ACTIVE');
  await expect(second.getByTestId('offer')).toHaveCount(0);
  await expect(second.getByTestId('presence')).toContainText('on_call');
  await context.close();
});

test('Escape declines a ringing call from the keyboard', async ({ browser, request, org }) => {
  const page = await readyOperator(browser, org, org.people.meera); // BLR, mobile-manipulation
  await raise(request, org, 'uw-mm-01');
  await expect(page.getByTestId('offer')).toBeVisible();
  await page.keyboard.press('Escape');
  await expect(page.getByTestId('offer')).toHaveCount(0);
  await expect(page.getByTestId('presence')).toHaveText('ready');
  await page.context().close();
});

test("an operator whose console code cannot be fetched is told calls cannot reach them, and the console comes up once it can be", async ({ browser, org }) => {
  const context = await signedIn(browser, org, org.people.jamal);
  // The console link is a chunk of its own (split_console_link, which may
  // also come in its bundle): the network drops both, then lets them through.
  const consoleChunk = /\/pkg\/(split|bundle)_console_link[^/]*\.wasm$/;
  let dropped = 0;
  await context.route(consoleChunk, (route) => {
    if (route.request().url().includes('/split_')) dropped += 1;
    return route.abort();
  });
  const page = await context.newPage();
  const errors = panicsOf(page);
  await page.goto('/operator');
  await hydrated(page);
  await expect(page.getByTestId('link-line')).toContainText('The console could not be loaded', { timeout: 20_000 });
  await expect(page.getByTestId('link-state')).toHaveText('console not loaded, retrying…');
  await expect(page.getByTestId('go-ready')).toBeDisabled();
  // It keeps trying (after 2 s, then 4 s, …) without breaking the page.
  await expect.poll(() => dropped, { timeout: 15_000 }).toBeGreaterThanOrEqual(2);
  expect(errors).toEqual([]);
  await context.unroute(consoleChunk);
  await expect(page.getByTestId('link-line')).toContainText('Connected', { timeout: 20_000 });
  await expect(page.getByTestId('link-state')).toHaveText('');
  await expect(page.getByTestId('go-ready')).toBeEnabled();
  expect(errors).toEqual([]);
  await context.close();
});

/** The page's own `setInterval` never fires, as a hidden tab's timers are
 * held back (Chrome: once a minute after five minutes hidden). */
async function holdPageTimers(context: BrowserContext): Promise<void> {
  await context.addInitScript(() => { window.setInterval = (() => 0) as unknown as typeof window.setInterval; });
}

/** What the page's ring sockets (`/ws`) do, counted as it happens: sockets
 * opened, heartbeats sent, and whether one closed. */
function consoleSockets(page: Page): { opened: number; heartbeats: number; closed: boolean } {
  const seen = { opened: 0, heartbeats: 0, closed: false };
  page.on('websocket', (ws) => {
    if (!new URL(ws.url()).pathname.endsWith('/ws')) return;
    seen.opened += 1;
    ws.on('framesent', (frame) => { if (String(frame.payload).includes('"heartbeat"')) seen.heartbeats += 1; });
    ws.on('close', () => { seen.closed = true; });
  });
  return seen;
}

// Chrome runs a hidden page's own timers once a minute after five minutes
// hidden; a console waiting for calls in a background tab must still be
// heard. Here the page's own setInterval never fires at all: the console's
// heartbeats come from its worker's clock, the server does not close the
// socket for silence after the presence TTL (20 s), and a call still rings.
test("A12: a console whose page timers are held back, as a hidden tab's are, stays ready past the presence TTL and is rung", async ({ browser, request, org }) => {
  test.setTimeout(100_000);
  const context = await signedIn(browser, org, org.people.jamal);
  await holdPageTimers(context);
  const page = await context.newPage();
  const ring = consoleSockets(page);
  await page.goto('/operator');
  await hydrated(page);
  await page.getByTestId('go-ready').click();
  await expect(page.getByTestId('presence')).toHaveText('ready');
  // One heartbeat on open, then one every 10 s, every third an RTT probe
  // instead: the fourth heartbeat comes 40 s in, past the 20 s the server
  // gives a silent console (unless it closed it).
  await expect.poll(() => ring.closed || ring.heartbeats >= 4, { timeout: 70_000, intervals: [1_000] }).toBe(true);
  expect(ring.closed, 'the server closed the console for silence').toBe(false);
  await expect(page.getByTestId('presence')).toHaveText('ready');
  await raise(request, org, 'uw-weld-01');
  await expect(page.getByTestId('offer')).toBeVisible();
});

/** Waits until the console's socket has sent `heartbeats` heartbeats and
 * stayed open past the server's 20 s TTL (from the call), then checks the
 * server never closed it for silence. */
async function heardPastTtl(ring: { closed: boolean; heartbeats: number }, heartbeats: number): Promise<void> {
  const from = Date.now();
  await expect.poll(() => ring.closed || (ring.heartbeats >= heartbeats && Date.now() - from > 25_000), { timeout: 70_000, intervals: [1_000] }).toBe(true);
  expect(ring.closed, 'the server closed the console for silence').toBe(false);
}

// Where the worker cannot load (here its script is refused), the page's
// own timer keeps the console heard; the worker is tried again when the
// socket next opens.
test("a console whose heartbeat worker cannot load heartbeats from the page", async ({ browser, org }) => {
  test.setTimeout(90_000);
  const context = await signedIn(browser, org, org.people.jamal);
  let refused = 0;
  await context.route('**/pkg/heartbeat_clock.js', (route) => { refused += 1; return route.abort(); });
  const page = await context.newPage();
  const ring = consoleSockets(page);
  await page.goto('/operator');
  await hydrated(page);
  // Heartbeats every 10 s from the page's timer (one more each time the
  // worker is tried again).
  await heardPastTtl(ring, 4);
  expect(refused, 'the worker asked for its script').toBeGreaterThan(0);
});

// One failed load does not leave the console on its page timer for good:
// the worker is tried again when the socket next opens (and 30 s after it
// failed, below).
test("a console whose heartbeat worker failed once tries it again when its socket reopens", async ({ browser, org }) => {
  test.setTimeout(60_000);
  const context = await signedIn(browser, org, org.people.jamal);
  let asked = 0;
  let refuse = true;
  await context.route('**/pkg/heartbeat_clock.js', (route) => { asked += 1; return refuse ? route.abort() : route.continue(); });
  // The page's sockets, kept where the test can close one (as a network
  // drop would).
  await context.addInitScript(() => {
    const Native = window.WebSocket;
    const open: WebSocket[] = [];
    (window as unknown as { openSockets: WebSocket[] }).openSockets = open;
    window.WebSocket = class extends Native {
      constructor(url: string | URL, protocols?: string | string[]) { super(url, protocols); open.push(this); }
    } as typeof WebSocket;
  });
  const page = await context.newPage();
  const ring = consoleSockets(page);
  await page.goto('/operator');
  await hydrated(page);
  await expect.poll(() => asked).toBeGreaterThan(0);
  await expect(page.getByTestId('go-ready')).toBeEnabled();
  await expect.poll(() => page.workers().length).toBe(0);
  // Settled: no refused fetch still on its way (each is counted as it starts).
  await expect.poll(async () => { const seen = asked; await page.waitForTimeout(1_000); return asked === seen; }).toBe(true);
  // The script can be had again, and the socket drops and reconnects.
  refuse = false;
  const [before, reopened] = [asked, ring.opened];
  await page.evaluate(() => (window as unknown as { openSockets: WebSocket[] }).openSockets.forEach((s) => s.close()));
  await expect.poll(() => ring.opened, { timeout: 30_000 }).toBeGreaterThan(reopened);
  await expect.poll(() => asked, { timeout: 10_000 }).toBeGreaterThan(before);
  await expect.poll(() => page.workers().length, { timeout: 10_000 }).toBe(1);
});

test("a console whose heartbeat worker failed tries it again 30 s later without waiting for its socket", async ({ browser, org }) => {
  test.setTimeout(90_000);
  const context = await signedIn(browser, org, org.people.jamal);
  // Refused for the first 10 s: the load, and the retry when the socket
  // first opens should the failure come before it. Only the timer's retry
  // comes later.
  const refuseUntil = Date.now() + 10_000;
  let [refused, served] = [0, 0];
  await context.route('**/pkg/heartbeat_clock.js', (route) => {
    if (Date.now() < refuseUntil) { refused += 1; return route.abort(); }
    served += 1;
    return route.continue();
  });
  const page = await context.newPage();
  const ring = consoleSockets(page);
  await page.goto('/operator');
  await hydrated(page);
  await expect.poll(() => refused).toBeGreaterThan(0);
  await expect.poll(() => served, { timeout: 50_000, intervals: [1_000] }).toBeGreaterThan(0);
  await expect.poll(() => page.workers().length, { timeout: 10_000 }).toBe(1);
  expect(ring.opened, 'the socket never reopened').toBe(1);
});

// A fetch of the worker's script that hangs fires no error: when the
// worker's first tick is overdue the page's own timer stands in and keeps
// the console heard.
test("a console whose heartbeat worker's script never arrives heartbeats from the page", async ({ browser, org }) => {
  test.setTimeout(90_000);
  const context = await signedIn(browser, org, org.people.jamal);
  let held = 0;
  // Neither answered nor refused: the fetch stays pending.
  await context.route('**/pkg/heartbeat_clock.js', () => { held += 1; });
  const page = await context.newPage();
  const ring = consoleSockets(page);
  await page.goto('/operator');
  await hydrated(page);
  // One heartbeat on open, one when the page's timer stands in (15 s),
  // then the page's every 10 s.
  await heardPastTtl(ring, 3);
  expect(held, 'the worker asked for its script').toBeGreaterThan(0);
  await context.close();
});

// A worker whose script was only slow is not ended when the page's timer
// stands in: once it ticks it keeps the console heard. Here the page's own
// setInterval never fires, so after the stand-in's first beat (15 s) only
// the worker's ticks can keep the socket open.
test("a console whose heartbeat worker's script comes late is heard by the worker once it ticks", async ({ browser, org }) => {
  test.setTimeout(120_000);
  const context = await signedIn(browser, org, org.people.jamal);
  await holdPageTimers(context);
  const held: Route[] = [];
  await context.route('**/pkg/heartbeat_clock.js', (route) => { held.push(route); });
  const page = await context.newPage();
  const ring = consoleSockets(page);
  await page.goto('/operator');
  await hydrated(page);
  await expect.poll(() => held.length).toBeGreaterThan(0);
  // Past the stand-in's beat (15 s), then the script arrives.
  await expect.poll(() => ring.closed || ring.heartbeats >= 2, { timeout: 30_000, intervals: [1_000] }).toBe(true);
  const [late, before] = [Date.now(), ring.heartbeats];
  await Promise.all(held.splice(0).map((route) => route.continue()));
  // Ticks every 10 s from the worker, well past the TTL.
  await expect.poll(() => ring.closed || Date.now() - late > 45_000, { timeout: 70_000, intervals: [1_000] }).toBe(true);
  expect(ring.closed, 'the server closed the console for silence').toBe(false);
  // Every third tick is an RTT probe instead.
  expect(ring.heartbeats - before, 'heartbeats after the script came').toBeGreaterThanOrEqual(2);
  await context.close();
});

/** A tone the page scheduled: when it starts and when it is to stop
 * (null: never told), in the audio clock's seconds. */
type Tone = { startAt: number; stopAt: number | null };

/** Records every tone the context's pages schedule (`window.tones`) and the
 * audio context they play on (`window.audio`). */
async function recordTones(context: BrowserContext): Promise<void> {
  await context.addInitScript(() => {
    const seen = window as unknown as { tones: Tone[]; audio?: BaseAudioContext };
    seen.tones = [];
    const { start, stop } = OscillatorNode.prototype;
    const tones = new WeakMap<OscillatorNode, Tone>();
    OscillatorNode.prototype.start = function (this: OscillatorNode, when?: number) {
      seen.audio = this.context;
      const tone = { startAt: Math.max(when ?? 0, this.context.currentTime), stopAt: null };
      tones.set(this, tone);
      seen.tones.push(tone);
      start.call(this, when);
    };
    // The last call to stop() is the one that holds.
    OscillatorNode.prototype.stop = function (this: OscillatorNode, when?: number) {
      const tone = tones.get(this);
      if (tone) tone.stopAt = Math.max(when ?? 0, this.context.currentTime);
      stop.call(this, when);
    };
  });
}

const tonesOf = (page: Page) => page.evaluate(() => (window as unknown as { tones: Tone[] }).tones.map((t) => ({ ...t })));
/** The state of the audio context the page's tones play on. */
const audioState = (page: Page) => page.evaluate(() => (window as unknown as { audio: BaseAudioContext }).audio.state);

/** Jamal's console, ready, in a context that records the tones its pages
 * schedule (and, with `holdTimers`, whose pages' own timers never fire).
 * The Ready click is a gesture: it unlocks the page's audio. */
async function readyRecordingTones(browser: Browser, org: TestOrg, holdTimers = false): Promise<{ context: BrowserContext; page: Page }> {
  const context = await signedIn(browser, org, org.people.jamal);
  if (holdTimers) await holdPageTimers(context);
  await recordTones(context);
  const page = await context.newPage();
  await page.goto('/operator');
  await hydrated(page);
  await page.getByTestId('go-ready').click();
  await expect(page.getByTestId('presence')).toHaveText('ready');
  return { context, page };
}

// A hidden tab's own timers are throttled, so the ring's repeats are
// scheduled on the audio clock when the offer arrives, and silenced when it
// closes. Here the page's setInterval never fires.
test("A12: a ringing console whose page timers are held back rings until the offer closes, then falls silent", async ({ browser, request, org }) => {
  test.setTimeout(60_000);
  const { context, page } = await readyRecordingTones(browser, org, true);
  await raise(request, org, 'uw-weld-01');
  await expect(page.getByTestId('offer')).toBeVisible();
  // Two tones a ring, a ring every 1.5 s for the offer's 30 s.
  await expect.poll(async () => (await tonesOf(page)).length).toBeGreaterThanOrEqual(2 * 15);
  const scheduled = await tonesOf(page);
  const span = Math.max(...scheduled.map((t) => t.startAt)) - Math.min(...scheduled.map((t) => t.startAt));
  expect(span, 'seconds from the first ring to the last').toBeGreaterThan(20);
  // The last ring's second tone starts 0.22 s after it; the clock's skew
  // is a few milliseconds either way.
  expect(span, 'none past the offer\'s expiry').toBeLessThan(30.5);
  await page.keyboard.press('Escape'); // declined: the offer closes
  await expect(page.getByTestId('offer')).toHaveCount(0);
  // Nothing still to sound half a second from now.
  await expect.poll(() => page.evaluate(() => {
    const seen = window as unknown as { tones: Tone[]; audio: BaseAudioContext };
    const soon = seen.audio.currentTime + 0.5;
    return seen.tones.filter((t) => t.stopAt === null || t.stopAt > soon).length;
  })).toBe(0);
  await context.close();
});

// Audio starts only from a person's gesture. A console tab reloaded while
// its operator is ready has no Ready click to give: any click unlocks it.
test("A12: a console reloaded while ready rings aloud once the operator clicks anywhere on the page", async ({ browser, request, org }) => {
  test.setTimeout(60_000);
  const { context, page } = await reloadedReady(browser, org);
  await page.getByRole('heading').first().click();
  await raise(request, org, 'uw-weld-01');
  await expect(page.getByTestId('offer')).toBeVisible();
  await expect.poll(async () => (await tonesOf(page)).length).toBeGreaterThanOrEqual(2);
  await expect.poll(() => audioState(page)).toBe('running');
  await context.close();
});

/** Jamal's console, ready and then reloaded: no gesture has unlocked the
 * page's audio since (an offer shown now is silent until one does); with
 * `gated`, audio is gated as a browser gates it (`gateAudioOnGestures`). */
async function reloadedReady(browser: Browser, org: TestOrg, gated = false): Promise<{ context: BrowserContext; page: Page }> {
  const { context, page } = await readyRecordingTones(browser, org);
  if (gated) await gateAudioOnGestures(context);
  await page.reload();
  await hydrated(page);
  await expect(page.getByTestId('presence')).toHaveText('ready');
  await expect(page.getByTestId('link-state')).toHaveText('');
  return { context, page };
}

// Touches on the page, as a touch screen's (Chromium's DevTools protocol).
async function touchscreen(page: Page) {
  const touch = await page.context().newCDPSession(page);
  await touch.send('Emulation.setTouchEmulationEnabled', { enabled: true, maxTouchPoints: 1 });
  return touch;
}

async function middleOf(element: Locator): Promise<{ x: number; y: number }> {
  const { x, y, width, height } = (await element.boundingBox())!;
  return { x: x + width / 2, y: y + height / 2 };
}

/** Audio as a browser gates it for a page the person has not used yet.
 * The test's Chromium never gates it, and Playwright's own page scripts
 * count as the person's gestures (so `navigator.userActivation` cannot
 * tell), so the gate follows HTML's activation-triggering input events for
 * the event being handled: a key other than Escape, a mouse press, or a
 * finger lifted counts (a touch taken for a scroll ends in a pointercancel
 * and lifts no pointer, which Chromium does not count either); a touch's
 * start does not. An `AudioContext` made in anything else starts
 * suspended, and its `resume()` holds until one that counts. (Stricter
 * than Chromium, which once the page has had a gesture lets audio start
 * anywhere: the console makes and resumes its audio only in its gesture
 * listeners, so the difference never shows.) */
async function gateAudioOnGestures(context: BrowserContext): Promise<void> {
  await context.addInitScript(() => {
    const counts = (): boolean => {
      const e = window.event;
      if (!e?.isTrusted) return false;
      if (e instanceof KeyboardEvent) return e.type === 'keydown' && e.key !== 'Escape';
      if (e instanceof PointerEvent) return e.pointerType === 'mouse' ? e.type === 'pointerdown' : e.type === 'pointerup';
      if (e instanceof MouseEvent) return e.type === 'mousedown';
      return e.type === 'touchend';
    };
    const Real = window.AudioContext;
    window.AudioContext = class extends Real {
      constructor(options?: AudioContextOptions) {
        super(options);
        if (!counts()) void super.suspend();
      }
      resume(): Promise<void> {
        return counts() ? super.resume() : new Promise(() => {});
      }
    };
  });
}

// A touch's start is no gesture the browser counts as the person's: audio
// made on it starts suspended, its ring scheduled but silent, until the
// touch's end, which counts, resumes it. Without the resume the offer
// would ring on a clock that never runs.
test('A12: a reloaded console rung before any gesture rings aloud when the touch whose start made its audio ends', async ({ browser, request, org }) => {
  test.setTimeout(60_000);
  const { context, page } = await reloadedReady(browser, org, true);
  await raise(request, org, 'uw-weld-01');
  await expect(page.getByTestId('offer')).toBeVisible();
  const touch = await touchscreen(page);
  await touch.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: [await middleOf(page.getByTestId('presence'))] });
  await expect.poll(async () => (await tonesOf(page)).length).toBeGreaterThanOrEqual(2);
  expect(await audioState(page), 'made on the touch\'s start, the audio waits').toBe('suspended');
  await touch.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
  await expect.poll(() => audioState(page)).toBe('running');
  await expect(page.getByTestId('offer')).toBeVisible();
  await context.close();
});

// A gesture that answers the offer does not ring for it first: in a tab
// whose audio no gesture has unlocked yet (reloaded), Enter or a click on
// Accept accepts at once, without a ring sounding until the answer lands.
// (A tap may end a few pixels off the button and still click it.)
for (const answer of ['Enter', 'a click on Accept', 'a tap on Accept', 'a tap on Accept ending just off its edge'] as const) {
  test(`A12: a reloaded console rung before any gesture accepts with ${answer} without ringing first`, async ({ browser, request, org }) => {
    test.setTimeout(60_000);
    const { context, page } = await reloadedReady(browser, org);
    const sessionId = await raise(request, org, 'uw-weld-01');
    await expect(page.getByTestId('offer')).toBeVisible();
    expect(await tonesOf(page), 'no gesture yet since the reload').toHaveLength(0);
    // The cockpit opens in the same document (its tones are still counted).
    await page.evaluate(() => { (window as unknown as { sameDocument: boolean }).sameDocument = true; });
    if (answer === 'Enter') await page.keyboard.press('Enter');
    else if (answer === 'a click on Accept') await page.getByRole('button', { name: /^Accept/ }).click();
    else {
      const touch = await touchscreen(page);
      const accept = await middleOf(page.getByRole('button', { name: /^Accept/ }));
      if (answer === 'a tap on Accept') {
        await touch.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: [accept] });
      } else {
        const { x, width } = (await page.getByRole('button', { name: /^Accept/ }).boundingBox())!;
        await touch.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: [{ x: x + width - 2, y: accept.y }] });
        await touch.send('Input.dispatchTouchEvent', { type: 'touchMove', touchPoints: [{ x: x + width + 4, y: accept.y }] });
      }
      await touch.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
    }
    await expect(page).toHaveURL(new RegExp(`/cockpit/${sessionId}$`));
    await expect(page.getByTestId('cockpit-lifecycle')).toHaveText('ACTIVE');
    expect(await page.evaluate(() => (window as unknown as { sameDocument?: boolean }).sameDocument), 'the same document').toBe(true);
    expect(await tonesOf(page), 'tones scheduled by the answering gesture').toHaveLength(0);
    await context.close();
  });
}

// Any other gesture rings for the offer shown, and so does one that
// looked like an answer and was not (a press or a touch on Accept dragged
// off it before the release: no click), rather than leave the offer silent.
// A touch's pointer events stay on the element it began on, wherever it
// goes, or end in a pointercancel when the browser takes it for a scroll.
// Audio gated as a browser gates it: a touch taken for a scroll is no
// gesture the browser counts, so its ring is scheduled on audio that
// waits, and sounds at the next gesture that counts (a tap).
const gestures = [
  'a click elsewhere on the page',
  'a press on Accept dragged off it',
  'a touch on Accept dragged off it',
  'a touch on Accept dragged off it where the page does not scroll',
] as const;
for (const gesture of gestures) {
  test(`A12: a reloaded console rung before any gesture rings after ${gesture}`, async ({ browser, request, org }) => {
    test.setTimeout(60_000);
    const { context, page } = await reloadedReady(browser, org, true);
    await raise(request, org, 'uw-weld-01');
    await expect(page.getByTestId('offer')).toBeVisible();
    expect(await tonesOf(page), 'no gesture yet since the reload').toHaveLength(0);
    let touch: CDPSession | undefined;
    if (gesture === 'a click elsewhere on the page') {
      await page.getByTestId('presence').click();
    } else if (gesture === 'a press on Accept dragged off it') {
      await page.getByRole('button', { name: /^Accept/ }).hover();
      await page.mouse.down();
      await page.getByTestId('presence').hover();
      await page.mouse.up();
    } else {
      // Not scrolling, the browser ends the touch with a pointerup on Accept.
      if (gesture.endsWith('does not scroll')) await page.addStyleTag({ content: '* { touch-action: none; }' });
      touch = await touchscreen(page);
      const [accept, presence] = [await middleOf(page.getByRole('button', { name: /^Accept/ })), await middleOf(page.getByTestId('presence'))];
      await touch.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: [accept] });
      await touch.send('Input.dispatchTouchEvent', { type: 'touchMove', touchPoints: [presence] });
      await touch.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
    }
    await expect.poll(async () => (await tonesOf(page)).length).toBeGreaterThanOrEqual(2);
    if (gesture === 'a touch on Accept dragged off it') {
      expect(await audioState(page), 'a scroll is no gesture the browser counts').toBe('suspended');
      await touch!.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: [await middleOf(page.getByTestId('presence'))] });
      await touch!.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
    }
    await expect.poll(() => audioState(page)).toBe('running');
    await expect(page.getByTestId('offer')).toBeVisible();
    await context.close();
  });
}
