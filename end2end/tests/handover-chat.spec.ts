import type { WebSocketRoute } from '@playwright/test';
import { acceptIntoCockpit, expect, hydrated, raise, readyOperator, signedIn, test } from './helpers';

// In the test's own org, Meera (BLR: nearest to uk-london, 162 ms floor)
// and Owen (Manchester, 177 ms) are the mobile-manipulation operators ready;
// Kofi is the org's client.
test('L08 L09 L10 L13: a call in the client\'s booking; client and operator chat; a handover moves control; the client rates', async ({ browser, request, org }) => {
  test.setTimeout(120_000);
  const robot = org.robots['uk-mm-01'].id;
  const kofiContext = await signedIn(browser, org, org.client);
  const kofi = await kofiContext.newPage();
  const errors: string[] = [];
  for (const page of [kofi]) page.on('pageerror', (e) => errors.push(`page error: ${e.message.slice(0, 300)}`));
  await kofi.goto('/client');
  await hydrated(kofi);
  // Kofi books uk-mm-01 from this minute (UTC) for an hour.
  await kofi.getByTestId('book-robot').selectOption(robot);
  await kofi.getByTestId('book-start').fill(new Date().toISOString().slice(0, 16));
  await kofi.getByTestId('book-minutes').fill('60');
  await kofi.getByTestId('book-submit').click();
  await expect(kofi.getByTestId('bookings').locator('tbody tr').filter({ hasText: robot })).toHaveCount(1);

  const meera = await readyOperator(browser, org, org.people.meera);
  const owen = await readyOperator(browser, org, org.people.owen);
  const session = await raise(request, org, 'uk-mm-01');
  await acceptIntoCockpit(meera, org, 'uk-mm-01', session);
  await expect(meera.getByTestId('cockpit')).toContainText('Kofi Mensah');
  // The cockpit follows the robot's telemetry live (no reload).
  const telemetry = await request.post(`/v1/sessions/${session}/telemetry`, {
    headers: org.auth('uk-mm-01'),
    data: { state: 'ARMED', rttMs: 170, divergenceDeg: 2.5, velocityScale: 0.8 },
  });
  expect(telemetry.status()).toBe(200);
  await expect(meera.getByTestId('cockpit-safety')).toHaveText('ARMED');
  await expect(meera.getByTestId('cockpit')).toContainText('80%');

  // The session is Kofi's: the client screen lists it, and Kofi watches it.
  await kofi.goto(`/client?s=${session}`);
  await hydrated(kofi);
  await expect(kofi.getByTestId('client-live')).toContainText(session);
  // L09: chat both ways between the client's and the operator's browsers.
  await kofi.getByTestId('chat-input').fill('Start with the blue totes, please.');
  await kofi.getByTestId('chat-send').click();
  await expect(meera.getByTestId('chat')).toContainText('Start with the blue totes, please.');
  await meera.getByTestId('chat-input').fill('On it.');
  await meera.getByTestId('chat-send').click();
  await expect(kofi.getByTestId('chat')).toContainText('On it.');

  // L08: Meera hands over to Owen by keyboard; he accepts; control moves.
  await meera.getByTestId('cockpit-lifecycle').click(); // focus off the chat line: H is a shortcut, not a letter
  await meera.keyboard.press('h');
  await meera.getByTestId(`handover-to-${org.people.owen.id}`).click();
  await expect(meera.getByTestId('handover-status')).toContainText('Offered to Owen Davies');
  await expect(owen.getByTestId('offer')).toContainText('Handover from Meera Nair');
  await owen.keyboard.press('Enter');
  await expect(owen).toHaveURL(new RegExp(`/cockpit/${session}$`));
  await hydrated(owen);
  await expect(meera).toHaveURL(/\/operator$/);
  await expect(owen.locator('li[data-kind="OPERATOR_SWITCH"]')).toContainText('from Meera Nair to Owen Davies');
  await expect(owen.getByTestId('control-spans')).toContainText('Meera Nair');

  // Owen completes; the client rates the operator.
  await owen.keyboard.press('c');
  await owen.keyboard.press('c');
  await expect(owen.getByTestId('cockpit-lifecycle')).toHaveText('COMPLETED');
  await expect(kofi.getByTestId('rate-form')).toBeVisible({ timeout: 15_000 });
  await kofi.getByTestId('rate-stars').selectOption('5');
  await kofi.getByTestId('rate-feedback').fill('Smooth handover.');
  await kofi.getByTestId('rate-submit').click();
  await expect(kofi.getByTestId('rating')).toContainText('5/5');
  // The session detail opens for its client (the admins' dispatch decisions stay theirs).
  await kofi.goto(`/ops/sessions?s=${session}`);
  await hydrated(kofi);
  await expect(kofi.getByTestId('session-client')).toContainText('Kofi Mensah');
  await expect(kofi.getByTestId('control-spans')).toContainText('Owen Davies');
  await expect(kofi.getByRole('heading', { name: 'Dispatch' })).toBeHidden();
  expect(errors).toEqual([]);
  for (const c of [kofiContext, meera.context(), owen.context()]) await c.close();
});

// L08: a cockpit whose console socket drops while its handover rings is told
// where the handover stands when it reconnects: still ringing, it says so
// again; answered in the gap, it no longer claims to be waiting (before,
// "waiting for them to accept" stayed on screen for good) and says how it
// was answered.
test('L08: a reconnected cockpit shows its handover as it stands, not as it was', async ({ browser, request, org }) => {
  test.setTimeout(120_000);
  const meera = await readyOperator(browser, org, org.people.meera);
  const owen = await readyOperator(browser, org, org.people.owen);
  const session = await raise(request, org, 'uk-mm-01');
  await acceptIntoCockpit(meera, org, 'uk-mm-01', session);
  // Meera's console socket, from now on through the test: dropped at will,
  // and let through to the server only once `opening` resolves.
  type Link = { page: WebSocketRoute; server: WebSocketRoute };
  const links: Link[] = [];
  let opening: Promise<void> = Promise.resolve();
  // What each link heard from the server, by message type.
  const heard: string[][] = [];
  const welcomes: number[] = [];
  await meera.routeWebSocket(/\/ws$/, async (page) => {
    await opening;
    const server = page.connectToServer();
    const index = links.push({ page, server }) - 1;
    heard.push([]);
    page.onMessage((m) => server.send(m));
    server.onMessage((m) => {
      page.send(m);
      const type = typeof m === 'string' ? JSON.parse(m).type : 'binary';
      heard[index].push(type);
      if (type === 'welcome') welcomes.push(index);
    });
  });
  await meera.reload();
  await hydrated(meera);
  await expect.poll(() => welcomes.length).toBe(1);
  await meera.getByTestId('cockpit-lifecycle').click();
  await meera.keyboard.press('h');
  await meera.getByTestId(`handover-to-${org.people.owen.id}`).click();
  await expect(meera.getByTestId('handover-status')).toContainText('Offered to Owen Davies');
  await expect(owen.getByTestId('offer')).toContainText('Handover from Meera Nair');

  // Dropped and back while it still rings: told again after the Welcome.
  const drop = async () => {
    const { page, server } = links[links.length - 1];
    await server.close();
    await page.close();
  };
  await drop();
  await expect.poll(() => welcomes.length, { timeout: 15_000 }).toBe(2);
  // The server told the handover again after the Welcome (and the page,
  // which pings once it has taken a Welcome in, has taken this one in).
  await expect.poll(() => heard[1].slice(heard[1].indexOf('welcome'))).toEqual(expect.arrayContaining(['handover', 'pong']));
  await expect(meera.getByTestId('handover-status')).toContainText('Offered to Owen Davies');

  // Dropped, and Owen declines before it is back: no longer "waiting",
  // and told what happened in the gap.
  let open!: () => void;
  opening = new Promise<void>((resolve) => { open = resolve; });
  await drop();
  await expect(owen.getByTestId('offer')).toContainText('Handover from Meera Nair');
  await owen.keyboard.press('Escape');
  await expect(owen.getByTestId('offer')).toBeHidden();
  open();
  await expect.poll(() => welcomes.length, { timeout: 15_000 }).toBe(3);
  await expect(meera.getByTestId('handover-status')).toHaveText('Owen Davies declined the handover: you keep control.');
  // And Meera, still in control, can hand over again.
  await meera.getByTestId('cockpit-lifecycle').click();
  await meera.keyboard.press('h');
  await expect(meera.getByTestId(`handover-to-${org.people.owen.id}`)).toBeVisible();
  for (const c of [meera.context(), owen.context()]) await c.close();
});
