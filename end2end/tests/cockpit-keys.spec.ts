import { expect, test } from '@playwright/test';
import { hydrated, ownRobotAndOperator, signIn } from './helpers';

// The cockpit's keys work while its record reloads. A robot's telemetry
// pushes a reload of the record several times a second, and under load each
// reload takes longer than the gap to the next; the controls re-render on
// every reload, and a key listener that belonged to them was gone while a
// reload was pending: C, C never completed the session (seen on CI). The
// robot and operator are this test's own, so no other test rings them.
const CERT = 'keys-demo · tier-1';
const EMAIL = 'kit.keys@northstar.example';
const PASSWORD = 'kit-has-a-long-password';

test('L01 the cockpit keys act while a push storm keeps its record reloading', async ({ browser, baseURL }) => {
  test.setTimeout(90_000);
  const token = await ownRobotAndOperator(
    browser,
    baseURL!,
    { id: 'uk-keys-01', model: 'UR5e', site: 'Keys Bay', pop: 'uk-london' },
    { email: EMAIL, name: 'Kit Keys', region: 'Manchester', password: PASSWORD, cert: CERT },
  );

  const context = await browser.newContext();
  const page = await context.newPage();
  await signIn(page, EMAIL, PASSWORD);
  await expect(page).toHaveURL(/\/operator$/);
  await page.getByTestId('go-ready').click();
  await expect(page.getByTestId('presence')).toHaveText('ready');
  const auth = { Authorization: `Bearer ${token}` };
  const call = await context.request.post('/v1/sessions', { headers: auth, data: { robotId: 'uk-keys-01' } });
  expect(call.status()).toBe(201);
  const session = (await call.json()).sessionId as string;
  await expect(page.getByTestId('offer-robot')).toHaveText('uk-keys-01');
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL(new RegExp(`/cockpit/${session}$`));
  await hydrated(page);
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
      await context.request.post(`/v1/sessions/${session}/telemetry`, {
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
