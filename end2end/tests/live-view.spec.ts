import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { acceptIntoCockpit, expect, hydrated, readyOperator, signedIn, test } from './helpers';

// Issue #30 part 2 in the test's own org: the simulator plays uk-insp-01,
// Priya (inspection) takes its call, and Dana (admin, certified for
// inspection) opens the live view on the session detail: the camera, the
// joint plot and Priya's actions, read-only; Priya's cockpit says Dana is
// watching; Dana takes control with a reason.
const SIM = process.env.CLUTCHCALL_SIM_BIN ?? path.resolve(__dirname, '../../target/debug/clutchcall-sim');

test('an admin watches a held session live, is seen watching, and takes control', async ({ browser, baseURL, org }) => {
  test.setTimeout(120_000);
  const robot = org.robots['uk-insp-01'];
  const cockpit = await readyOperator(browser, org, org.people.priya);
  const admin = await signedIn(browser, org, org.admin, { viewport: { width: 1440, height: 1600 } });
  const sim = spawn(SIM, ['--base', baseURL!, '--operators', 'false', '--robot', `${robot.id}=${robot.token}`, '--call-every-s', '2', '--calls', '1'], { stdio: 'ignore' });
  try {
    const session = await acceptIntoCockpit(cockpit, org, 'uk-insp-01', undefined, 15_000);
    await expect(cockpit.getByTestId('relay-status')).toHaveText('robot connected', { timeout: 15_000 });

    const page = await admin.newPage();
    page.on('pageerror', (e) => console.log(`PAGE ERROR: ${e.message.slice(0, 300)}`));
    await page.goto(`/ops/sessions?s=${session}`);
    await hydrated(page);
    const live = page.getByTestId('live-view');
    await live.getByRole('button', { name: 'Watch live' }).click();
    await expect(live.getByTestId('relay-status')).toHaveText('robot connected', { timeout: 15_000 });
    await expect(live.getByTestId('joint-plot').locator('path').first()).toHaveAttribute('d', /^M[\d.]+ [\d.]+ L/);
    await expect(live.getByTestId('camera')).toBeVisible();

    // Priya's cockpit says who is watching; her actions reach the view.
    await expect(cockpit.getByTestId('watching')).toHaveText('Dana Okafor is watching');
    await cockpit.keyboard.press('ArrowUp');
    await expect(live.getByTestId('operator-action')).toHaveText(/^Operator's last action: /);
    await live.screenshot({ path: 'test-results/live-view.png' });

    // Dana takes control, with a reason: from her console (a tab on her
    // Ready screen), as every operator holds a session.
    const console_ = await admin.newPage();
    await console_.goto('/operator');
    await hydrated(console_);
    // Dana takes control, with a reason.
    await live.getByLabel('Why take control? (kept in the activity log)').fill('checking the gauge myself');
    await live.getByRole('button', { name: 'Take control' }).click();
    await expect(live.getByRole('status').filter({ hasText: 'You hold the session now' })).toBeVisible();
    await expect(page.getByTestId('session-record')).toContainText('Dana Okafor');

    // Stopping the view ends the watch. The activity log holds one join
    // (the pushes that reloaded the page meanwhile did not rebuild the
    // view's socket) and its leave.
    await live.getByRole('button', { name: 'Stop watching' }).click();
    await expect(live.getByTestId('relay-status')).toHaveCount(0);
    const activity = page.getByTestId('activity');
    await expect(activity.locator('li[data-kind="SUPERVISOR_LEFT"]')).toHaveCount(1);
    await expect(activity.locator('li[data-kind="SUPERVISOR_JOINED"]')).toHaveCount(1);
    await expect(activity.locator('li[data-kind="OPERATOR_SWITCH"]')).toContainText('checking the gauge myself');
  } finally {
    sim.kill();
  }
});
