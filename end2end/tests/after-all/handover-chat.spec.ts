import { expect, test } from '@playwright/test';
import { hydrated, signIn } from '../helpers';

// Runs after every other browser test (project "after-all"): it makes
// mobile-manipulation operators ready, which would take calls other tests
// expect for their own operators.
const OWEN = 'owen.davies@northstar.example'; // Manchester: nearest to uk-london
const MEERA = 'meera.nair@northstar.example'; // BLR
const KOFI = 'kofi.mensah@leeds-logistics.example';

async function readyOperator(browser: import('@playwright/test').Browser, email: string) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await signIn(page, email);
  await expect(page).toHaveURL(/\/operator$/);
  await hydrated(page);
  await page.getByTestId('go-ready').click();
  await expect(page.getByTestId('presence')).toHaveText('ready');
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

  const owen = await readyOperator(browser, OWEN);
  const meera = await readyOperator(browser, MEERA);
  const call = await request.post('/v1/sessions', { headers: { Authorization: 'Bearer cct_demo_uk-mm-01' }, data: { robotId: 'uk-mm-01' } });
  expect(call.status()).toBe(201);
  const session = (await call.json()).sessionId as string;
  await expect(owen.page.getByTestId('offer-robot')).toHaveText('uk-mm-01');
  await owen.page.keyboard.press('Enter');
  await expect(owen.page).toHaveURL(new RegExp(`/cockpit/${session}$`));
  await hydrated(owen.page);
  await expect(owen.page.getByTestId('cockpit')).toContainText('Kofi Mensah');

  // The session is Kofi's: the client screen lists it, and Kofi watches it.
  await kofi.goto(`/client?s=${session}`);
  await hydrated(kofi);
  await expect(kofi.getByTestId('client-live')).toContainText(session);
  // L09: chat both ways between the client's and the operator's browsers.
  await kofi.getByTestId('chat-input').fill('Start with the blue totes, please.');
  await kofi.getByTestId('chat-send').click();
  await expect(owen.page.getByTestId('chat')).toContainText('Start with the blue totes, please.');
  await owen.page.getByTestId('chat-input').fill('On it.');
  await owen.page.getByTestId('chat-send').click();
  await expect(kofi.getByTestId('chat')).toContainText('On it.');

  // L08: Owen hands over to Meera by keyboard; she accepts; control moves.
  await owen.page.getByTestId('cockpit-lifecycle').click(); // focus off the chat line: H is a shortcut, not a letter
  await owen.page.keyboard.press('h');
  await owen.page.getByTestId('handover-to-u-meera').click();
  await expect(owen.page.getByTestId('handover-status')).toContainText('Offered to Meera Nair');
  await expect(meera.page.getByTestId('offer')).toContainText('Handover from Owen Davies');
  await meera.page.keyboard.press('Enter');
  await expect(meera.page).toHaveURL(new RegExp(`/cockpit/${session}$`));
  await hydrated(meera.page);
  await expect(owen.page).toHaveURL(/\/operator$/);
  await expect(meera.page.locator('li[data-kind="OPERATOR_SWITCH"]')).toContainText('from Owen Davies to Meera Nair');
  await expect(meera.page.getByTestId('control-spans')).toContainText('Owen Davies');

  // Meera completes; the client rates the operator.
  await meera.page.keyboard.press('c');
  await meera.page.keyboard.press('c');
  await expect(meera.page.getByTestId('cockpit-lifecycle')).toHaveText('COMPLETED');
  await expect(kofi.getByTestId('rate-form')).toBeVisible({ timeout: 15_000 });
  await kofi.getByTestId('rate-stars').selectOption('5');
  await kofi.getByTestId('rate-feedback').fill('Smooth handover.');
  await kofi.getByTestId('rate-submit').click();
  await expect(kofi.getByTestId('rating')).toContainText('5/5');
  // The session detail opens for its client (the admins' dispatch decisions stay theirs).
  await kofi.goto(`/ops/sessions?s=${session}`);
  await hydrated(kofi);
  await expect(kofi.getByTestId('session-client')).toContainText('Kofi Mensah');
  await expect(kofi.getByTestId('control-spans')).toContainText('Meera Nair');
  await expect(kofi.getByRole('heading', { name: 'Dispatch' })).toBeHidden();
  expect(errors).toEqual([]);
  for (const c of [kofiContext, owen.context, meera.context]) await c.close();
});
