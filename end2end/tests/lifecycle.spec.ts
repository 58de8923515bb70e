import { expect, test } from '@playwright/test';
import { hydrated, signIn } from './helpers';

// Tom (Manchester, pick-place) takes uk-pick-01 (London): of the operators
// other browser tests make ready, none is closer to London with pick-place.
const TOM = 'tom.whitfield@northstar.example';

test('L01 L03 L05: the operator pauses, resumes and completes the session from the cockpit by keyboard, and the log tells it', async ({ browser, request }) => {
  test.setTimeout(90_000);
  const context = await browser.newContext();
  const tom = await context.newPage();
  const errors: string[] = [];
  tom.on('pageerror', (e) => errors.push(`page error: ${e.message.slice(0, 300)}`));
  tom.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text().slice(0, 600)}`); });
  await signIn(tom, TOM);
  await expect(tom).toHaveURL(/\/operator$/);
  await tom.getByTestId('go-ready').click();
  await expect(tom.getByTestId('presence')).toHaveText('ready');

  const call = await request.post('/v1/sessions', {
    headers: { Authorization: 'Bearer cct_demo_uk-pick-01' },
    data: { robotId: 'uk-pick-01' },
  });
  expect(call.status()).toBe(201);
  await expect(tom.getByTestId('offer-robot')).toHaveText('uk-pick-01');
  await tom.keyboard.press('Enter');
  await expect(tom).toHaveURL(/\/cockpit\/.+$/);
  await hydrated(tom);
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
