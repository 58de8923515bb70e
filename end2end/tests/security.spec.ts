import { Page } from '@playwright/test';
import { expect, hydrated, signedIn, test } from './helpers';

/** Every message Chromium logs about the page's security policy. */
function policyReports(page: Page): string[] {
  const reports: string[] = [];
  page.on('console', (m) => {
    const text = m.text();
    if (text.includes('Content Security Policy') || text.includes('Refused to')) reports.push(text.slice(0, 300));
  });
  return reports;
}

// Issue "Hardening II", finding 6: the headers forbid framing and limit
// scripts; the hydrated app, the chunk loader and the sockets must still work.
test('s06 pages hydrate and load their chunks under the security policy, and refuse to be framed', async ({ browser, baseURL, org }) => {
  const robot = org.robots['ue-pick-01'].id;
  const context = await signedIn(browser, org, org.admin);
  const page = await context.newPage();
  const reports = policyReports(page);
  const response = await page.goto('/admin/directory');
  expect(response?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
  expect(response?.headers()['x-frame-options']).toBe('DENY');
  await hydrated(page);
  // A deferred panel: its chunks load through the split loader.
  await page.getByTestId('robots').getByRole('link', { name: robot }).click();
  await expect(page).toHaveURL(new RegExp(`robot=${robot}`));
  await expect(page.getByTestId('rotate-token')).toBeVisible();
  // The live screens' socket opens too.
  await page.goto('/ops/wallboard');
  await hydrated(page);
  await expect(page.getByRole('heading', { name: 'Wallboard', level: 1 })).toBeVisible();
  expect(reports).toEqual([]);

  // Another site framing the cockpit or the directory gets nothing.
  const decoy = await context.newPage();
  const refused = policyReports(decoy);
  await decoy.setContent(`<iframe src="${baseURL}/admin/directory" width="800" height="600"></iframe>`);
  await expect.poll(() => refused.some((r) => r.includes('frame'))).toBe(true);
  const framed = decoy.frames().find((f) => f !== decoy.mainFrame());
  expect(await framed?.locator('[data-testid="robots"]').count().catch(() => 0)).toBe(0);
  await context.close();
});
