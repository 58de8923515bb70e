import { expect, test } from '@playwright/test';
import { hydrated, signIn } from '../helpers';

// Runs after every other browser test (project "after-all"): it makes
// mobile-manipulation operators ready, which would take calls other tests
// expect for their own operators.
const MEERA = 'meera.nair@northstar.example'; // BLR: nearest to uk-london (162 ms floor)
const OWEN = 'owen.davies@northstar.example'; // Manchester (177 ms)
const KOFI = 'kofi.mensah@leeds-logistics.example';

async function readyOperator(browser: import('@playwright/test').Browser, request: import('@playwright/test').APIRequestContext, email: string) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await signIn(page, email);
  await expect(page).toHaveURL(/\/operator$/);
  await hydrated(page);
  await page.getByTestId('go-ready').click();
  // Calls earlier tests left queued for this skill ring at once: their
  // robots withdraw them, so this test starts from a quiet floor.
  const presence = page.getByTestId('presence');
  await expect(presence).toHaveText(/^(ready|ringing)/);
  for (let i = 0; i < 5 && /^ringing/.test((await presence.textContent()) ?? ''); i++) {
    const robot = (await page.getByTestId('offer-robot').textContent())?.trim();
    const session = /ses-[0-9a-f]+/.exec((await presence.textContent()) ?? '')?.[0];
    expect(robot && session).toBeTruthy();
    const withdrawn = await request.delete(`/v1/sessions/${session}`, { headers: { Authorization: `Bearer cct_demo_${robot}` } });
    expect(withdrawn.status()).toBe(200);
    await expect(presence).not.toHaveText(new RegExp(session as string));
  }
  await expect(presence).toHaveText('ready');
  return { context, page };
}

test('L08 L09 L10 L13: a call in the client\'s booking; client and operator chat; a handover moves control; the client rates', async ({ browser, request }) => {
  test.setTimeout(120_000);
  const kofiContext = await browser.newContext();
  const kofi = await kofiContext.newPage();
  const errors: string[] = [];
  for (const page of [kofi]) page.on('pageerror', (e) => errors.push(`page error: ${e.message.slice(0, 300)}`));
  await signIn(kofi, KOFI);
  await expect(kofi).toHaveURL(/\/client$/);
  await hydrated(kofi);
  // Kofi books uk-mm-01 from this minute (UTC) for an hour.
  await kofi.getByTestId('book-robot').selectOption('uk-mm-01');
  await kofi.getByTestId('book-start').fill(new Date().toISOString().slice(0, 16));
  await kofi.getByTestId('book-minutes').fill('60');
  await kofi.getByTestId('book-submit').click();
  await expect(kofi.getByTestId('bookings').locator('tbody tr').filter({ hasText: 'uk-mm-01' })).toHaveCount(1);

  const first = await readyOperator(browser, request, MEERA);
  const second = await readyOperator(browser, request, OWEN);
  const call = await request.post('/v1/sessions', { headers: { Authorization: 'Bearer cct_demo_uk-mm-01' }, data: { robotId: 'uk-mm-01' } });
  expect(call.status()).toBe(201);
  const session = (await call.json()).sessionId as string;
  await expect(first.page.getByTestId('offer-robot')).toHaveText('uk-mm-01');
  await first.page.keyboard.press('Enter');
  await expect(first.page).toHaveURL(new RegExp(`/cockpit/${session}$`));
  await hydrated(first.page);
  await expect(first.page.getByTestId('cockpit')).toContainText('Kofi Mensah');
  // The cockpit follows the robot's telemetry live (no reload).
  const telemetry = await request.post(`/v1/sessions/${session}/telemetry`, {
    headers: { Authorization: 'Bearer cct_demo_uk-mm-01' },
    data: { state: 'ARMED', rttMs: 170, divergenceDeg: 2.5, velocityScale: 0.8 },
  });
  expect(telemetry.status()).toBe(200);
  await expect(first.page.getByTestId('cockpit-safety')).toHaveText('ARMED');
  await expect(first.page.getByTestId('cockpit')).toContainText('80%');

  // The session is Kofi's: the client screen lists it, and Kofi watches it.
  await kofi.goto(`/client?s=${session}`);
  await hydrated(kofi);
  await expect(kofi.getByTestId('client-live')).toContainText(session);
  // L09: chat both ways between the client's and the operator's browsers.
  await kofi.getByTestId('chat-input').fill('Start with the blue totes, please.');
  await kofi.getByTestId('chat-send').click();
  await expect(first.page.getByTestId('chat')).toContainText('Start with the blue totes, please.');
  await first.page.getByTestId('chat-input').fill('On it.');
  await first.page.getByTestId('chat-send').click();
  await expect(kofi.getByTestId('chat')).toContainText('On it.');

  // L08: Meera hands over to Owen by keyboard; he accepts; control moves.
  await first.page.getByTestId('cockpit-lifecycle').click(); // focus off the chat line: H is a shortcut, not a letter
  await first.page.keyboard.press('h');
  await first.page.getByTestId('handover-to-u-owen').click();
  await expect(first.page.getByTestId('handover-status')).toContainText('Offered to Owen Davies');
  await expect(second.page.getByTestId('offer')).toContainText('Handover from Meera Nair');
  await second.page.keyboard.press('Enter');
  await expect(second.page).toHaveURL(new RegExp(`/cockpit/${session}$`));
  await hydrated(second.page);
  await expect(first.page).toHaveURL(/\/operator$/);
  await expect(second.page.locator('li[data-kind="OPERATOR_SWITCH"]')).toContainText('from Meera Nair to Owen Davies');
  await expect(second.page.getByTestId('control-spans')).toContainText('Meera Nair');

  // Owen completes; the client rates the operator.
  await second.page.keyboard.press('c');
  await second.page.keyboard.press('c');
  await expect(second.page.getByTestId('cockpit-lifecycle')).toHaveText('COMPLETED');
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
  for (const c of [kofiContext, first.context, second.context]) await c.close();
});
