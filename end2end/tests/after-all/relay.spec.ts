import { expect, test } from '@playwright/test';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { adminContext, hydrated, ownRobotAndOperator, signIn } from '../helpers';

// A real edge agent: the simulator playing a robot this test registers,
// whose skill only this test's operator holds, so no other test's
// operators take its call and it rings no one else.
const SIM = process.env.CLUTCHCALL_SIM_BIN ?? path.resolve(__dirname, '../../../target/debug/clutchcall-sim');
const CERT = 'relay-demo · tier-1';
const EMAIL = 'rhea.relay@northstar.example';
const PASSWORD = 'rhea-has-a-long-password';

test('W15 L12: the cockpit shows the joints and camera the robot sends on the relay, the wallboard shows it flowing, and the completed session is an episode', async ({ browser, baseURL }) => {
  // As its sibling spec: the two run side by side on CI's two cores, and
  // this one's cockpit steps took up to 10 s each under that load.
  test.setTimeout(120_000);
  const admin = await adminContext(browser);
  const token = await ownRobotAndOperator(
    browser,
    baseURL!,
    { id: 'ue-relay-01', model: 'UR10e', site: 'Relay Bay', pop: 'us-east' },
    { email: EMAIL, name: 'Rhea Relay', region: 'Austin', password: PASSWORD, cert: CERT },
  );

  const context = await browser.newContext();
  const page = await context.newPage();
  await signIn(page, EMAIL, PASSWORD);
  await expect(page).toHaveURL(/\/operator$/);
  await page.getByTestId('go-ready').click();
  await expect(page.getByTestId('presence')).toHaveText('ready');

  const sim = spawn(SIM, ['--base', baseURL!, '--operators', 'false', '--robot', `ue-relay-01=${token}`, '--call-every-s', '2', '--calls', '1'], { stdio: 'ignore' });
  try {
    await expect(page.getByTestId('offer-robot')).toHaveText('ue-relay-01', { timeout: 15_000 });
    await page.keyboard.press('Enter');
    await expect(page).toHaveURL(/\/cockpit\//);
    await expect(page.getByTestId('cockpit-lifecycle')).toHaveText('ACTIVE');
    // The edge agent joins when it sees its session attached (it polls each second).
    await expect(page.getByTestId('relay-status')).toHaveText('robot connected', { timeout: 15_000 });
    await expect(page.getByTestId('joint-plot').locator('path').first()).toHaveAttribute('d', /^M[\d.]+ [\d.]+ L/);
    await expect(page.getByTestId('camera')).toBeVisible();
    await page.keyboard.press('ArrowUp'); // a drive key: an action on the relay

    const board = await admin.newPage();
    await board.goto('/ops/wallboard');
    await hydrated(board);
    await expect(board.getByTestId('relay-ue-relay-01').getByTestId('relay-health')).toHaveText('flowing');
    await page.screenshot({ path: 'test-results/cockpit-relay.png', fullPage: true });

    await page.keyboard.press('c');
    await page.keyboard.press('c');
    await expect(page.getByTestId('cockpit-lifecycle')).toHaveText('COMPLETED');
    sim.kill();

    const datasets = await admin.newPage();
    await expect(async () => {
      await datasets.goto('/datasets');
      await hydrated(datasets);
      await expect(datasets.getByTestId('episodes').filter({ hasText: 'ue-relay-01' })).toHaveCount(1, { timeout: 1_000 });
    }).toPass({ timeout: 15_000 });
    await expect(datasets.getByTestId('dataset').filter({ hasText: 'ue-relay-01' }).getByTestId('download-v3')).toHaveAttribute('href', /lerobot\.tar\?version=v3\.0$/);
  } finally {
    sim.kill();
    await context.close();
    await admin.close();
  }
});
