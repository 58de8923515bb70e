import { expect, hydrated, signedIn, test } from './helpers';

// A window a day ahead.
function tomorrowAtNoon(): string {
  const d = new Date(Date.now() + 24 * 3600 * 1000);
  return `${d.toISOString().slice(0, 10)}T12:00`;
}

test('L13: the client books a robot from the client screen, sees the booking and cancels it; an overlap is refused with the reason', async ({ browser, org }) => {
  test.setTimeout(60_000);
  const robot = org.robots['ue-pick-02'].id;
  const context = await signedIn(browser, org, org.client);
  const kofi = await context.newPage();
  const errors: string[] = [];
  kofi.on('pageerror', (e) => errors.push(`page error: ${e.message.slice(0, 300)}`));
  await kofi.goto('/client');
  await hydrated(kofi);
  await expect(kofi.getByTestId('client-live-empty')).toBeVisible();

  const book = async () => {
    await kofi.getByTestId('book-robot').selectOption(robot);
    await kofi.getByTestId('book-start').fill(tomorrowAtNoon());
    await kofi.getByTestId('book-minutes').fill('45');
    await kofi.getByTestId('book-submit').click();
  };
  await book();
  const rows = kofi.getByTestId('bookings').locator('tbody tr');
  await expect(rows.filter({ hasText: robot })).toHaveCount(1);
  await expect(rows.filter({ hasText: robot })).toContainText('12:00 UTC');
  await expect(rows.filter({ hasText: robot })).toContainText('12:45 UTC');
  // The same window again collides with it, and the screen says so.
  await book();
  await expect(kofi.getByRole('alert').filter({ hasText: 'is already booked from' })).toBeVisible();
  await rows.filter({ hasText: robot }).getByRole('button', { name: 'Cancel' }).click();
  await expect(rows.filter({ hasText: robot })).toHaveCount(0);
  expect(errors).toEqual([]);
  await context.close();
});
