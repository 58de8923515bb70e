import { expect, test } from '@playwright/test';
import { ADMIN, hydrated, signIn } from './helpers';

// Owen is used by no other browser test.
const OWEN = 'owen.davies@northstar.example';

test('the roster filters in place with counters fixed, shows an operator going ready on push, and one whose browser died going offline', async ({ browser }) => {
  test.setTimeout(90_000);
  const adminContext = await browser.newContext();
  const admin = await adminContext.newPage();
  await signIn(admin, ADMIN);
  await expect(admin).toHaveURL(/\/admin\/directory$/);
  await admin.goto('/ops/roster');
  await hydrated(admin);
  const owenRow = admin.locator('[data-testid="roster-row"][data-agent="u-owen"]');
  await expect(owenRow).toHaveAttribute('data-state', 'offline');
  await admin.evaluate(() => ((window as any).__noReload = true));

  // Owen signs in and goes Ready in his own browser: pushed, no reload here.
  const owenContext = await browser.newContext();
  const owen = await owenContext.newPage();
  await signIn(owen, OWEN);
  await expect(owen).toHaveURL(/\/operator$/);
  await owen.getByTestId('go-ready').click();
  await expect(owen.getByTestId('presence')).toHaveText('ready');
  await expect(owenRow).toHaveAttribute('data-state', 'ready', { timeout: 5_000 });
  await expect(owenRow).toContainText('Owen Davies');
  await expect(owenRow).not.toContainText('owen.davies@northstar.example'); // email searchable, never shown

  // Filters narrow the rows, not the counters; they live in the URL.
  const counters = await admin.getByTestId('roster-counters').innerText();
  expect(counters).toMatch(/\d+ online · \d+ ready · \d+ on call · \d+ aux/);
  await admin.getByTestId('roster-search').fill('davies');
  await expect(admin.getByTestId('roster-row')).toHaveCount(1);
  await expect(admin).toHaveURL(/[?&]q=davies/);
  await expect(admin.getByTestId('roster-counters')).toHaveText(counters);
  await admin.getByTestId('roster-state').selectOption('aux');
  await expect(admin.getByTestId('roster-row')).toHaveCount(0);
  await expect(admin.getByTestId('roster-counters')).toHaveText(counters);
  await admin.getByTestId('roster-state').selectOption('ready');
  await expect(admin.getByTestId('roster-row')).toHaveCount(1);
  expect(await admin.evaluate(() => (window as any).__noReload)).toBe(true);
  await admin.screenshot({ path: 'test-results/roster.png' });

  // Owen's browser dies: after the presence TTL (20 s) he is offline.
  await owenContext.close();
  await admin.getByTestId('roster-state').selectOption('');
  await expect(owenRow).toHaveAttribute('data-state', 'offline', { timeout: 40_000 });
  await expect(owenRow.getByTestId('roster-age')).toHaveText(/^\d+s$/);
  await adminContext.close();
});
