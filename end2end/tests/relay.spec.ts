import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { acceptIntoCockpit, expect, hydrated, readyOperator, signedIn, test } from './helpers';

// A real edge agent: the simulator playing ue-pick-01 of the test's own
// org, where Carla (Austin, pick-place · tier-2) is the only one ready.
const SIM = process.env.CLUTCHCALL_SIM_BIN ?? path.resolve(__dirname, '../../target/debug/clutchcall-sim');

test('W15 L12: the cockpit shows the joints and camera the robot sends on the relay, the wallboard shows it flowing, and the completed session is an episode', async ({ browser, baseURL, org }) => {
  // Its cockpit steps have taken up to 10 s each on CI's two cores.
  test.setTimeout(120_000);
  const robot = org.robots['ue-pick-01'];
  const admin = await signedIn(browser, org, org.admin);
  const page = await readyOperator(browser, org, org.people.carla);
  const context = page.context();

  const sim = spawn(SIM, ['--base', baseURL!, '--operators', 'false', '--robot', `${robot.id}=${robot.token}`, '--call-every-s', '2', '--calls', '1'], { stdio: 'ignore' });
  try {
    await acceptIntoCockpit(page, org, 'ue-pick-01', undefined, 15_000);
    await expect(page.getByTestId('cockpit-lifecycle')).toHaveText('ACTIVE');
    // The edge agent joins when it sees its session attached (it polls each second).
    await expect(page.getByTestId('relay-status')).toHaveText('robot connected', { timeout: 15_000 });
    await expect(page.getByTestId('joint-plot').locator('path').first()).toHaveAttribute('d', /^M[\d.]+ [\d.]+ L/);
    await expect(page.getByTestId('camera')).toBeVisible();
    await page.keyboard.press('ArrowUp'); // a drive key: an action on the relay

    const board = await admin.newPage();
    await board.setViewportSize({ width: 1280, height: 720 });
    await board.goto('/ops/wallboard');
    await hydrated(board);
    await expect(board.getByTestId(`relay-${robot.id}`).getByTestId('relay-health')).toHaveText('flowing');
    await page.screenshot({ path: 'test-results/cockpit-relay.png', fullPage: true });
    // Every column in view on a 1,280 px wallboard: nothing scrolled out of
    // its panel. (Read on the panel: the table is drawn again as the counts
    // change, and one read between two drawings has no table to measure.)
    const relayPanel = board.getByRole('region', { name: 'Relay · robot namespace' });
    await expect.poll(() => relayPanel.evaluate((panel) => (panel.querySelector('table.relay') ? panel.scrollWidth - panel.clientWidth : Number.NaN))).toBeLessThanOrEqual(0);
    await board.screenshot({ path: 'test-results/wallboard-relay.png', fullPage: true });

    await page.keyboard.press('c');
    await page.keyboard.press('c');
    await expect(page.getByTestId('cockpit-lifecycle')).toHaveText('COMPLETED');
    sim.kill();

    const datasets = await admin.newPage();
    await expect(async () => {
      await datasets.goto('/datasets');
      await hydrated(datasets);
      await expect(datasets.getByTestId('episodes').filter({ hasText: robot.id })).toHaveCount(1, { timeout: 1_000 });
    }).toPass({ timeout: 15_000 });
    await expect(datasets.getByTestId('dataset').filter({ hasText: robot.id }).getByTestId('download-v3')).toHaveAttribute('href', /lerobot\.tar\?version=v3\.0$/);
  } finally {
    sim.kill();
    await context.close();
    await admin.close();
  }
});

// The relay's counts reach the wallboard pushed, once a second while a
// channel is open, and once more, empty, when the last one closes. A
// wallboard whose socket stopped hearing them (here, its pushes held back
// on the way) must not keep the last counts it heard, flowing, after the
// frames stopped: the next board it loads, read after that, says so (rule
// W15's HeardCounts).
test('W15: a wallboard that stopped hearing the relay lets go of its last counts at the next board it loads', async ({ browser, baseURL, org }) => {
  test.setTimeout(120_000);
  const robot = org.robots['ue-pick-01'];
  const page = await readyOperator(browser, org, org.people.carla);
  const admin = await signedIn(browser, org, org.admin);
  const board = await admin.newPage();
  let held = false;
  await board.routeWebSocket(/\/ws\?watch=org/, (ws) => {
    const server = ws.connectToServer();
    server.onMessage((message) => { if (!held) ws.send(message); });
  });
  const sim = spawn(SIM, ['--base', baseURL!, '--operators', 'false', '--robot', `${robot.id}=${robot.token}`, '--call-every-s', '2', '--calls', '1'], { stdio: 'ignore' });
  try {
    await acceptIntoCockpit(page, org, 'ue-pick-01', undefined, 15_000);
    await expect(page.getByTestId('relay-status')).toHaveText('robot connected', { timeout: 15_000 });
    await board.goto('/ops/wallboard');
    await hydrated(board);
    const row = board.getByTestId(`relay-${robot.id}`);
    await expect(row.getByTestId('relay-health')).toHaveText('flowing');
    await expect(row.locator('td').nth(2)).toContainText('fps');

    // Heard no more; then both sides leave (the session stays ACTIVE: the
    // operator is on the operator screen).
    held = true;
    sim.kill();
    await page.goto('/operator');
    await hydrated(page);
    // The board's 15 s poll reloads it, with counts read after the frames
    // stopped: none, or none a second (the relay may still hold the channel).
    await expect(row.locator('td').nth(2)).toHaveText(/^(—|0 fps)/, { timeout: 35_000 });
    await expect(row.getByTestId('relay-health')).toHaveText('stalled');
  } finally {
    sim.kill();
    await page.context().close();
    await admin.close();
  }
});
