import { expect, hydrated, signedIn, test } from './helpers';

test('A02: an admin edits a robot (the skill shows as the reqCert is typed) and rotates its token, shown once', async ({ browser, request, org }) => {
  const robot = org.robots['ue-pick-01'].id;
  const context = await signedIn(browser, org, org.admin);
  const page = await context.newPage();
  await page.goto(`/admin/directory?robot=${robot}`);
  await hydrated(page);
  const reqCert = page.getByTestId('robot-req-cert');
  await reqCert.fill('   ');
  await expect(page.getByTestId('robot-skill')).toContainText('names no skill');
  await reqCert.fill('pick-place · tier-3');
  await expect(page.getByTestId('robot-skill')).toHaveText('skill: pick-place');
  await page.getByTestId('robot-save').click();
  await expect(page.locator('.detail .facts')).toContainText('pick-place · tier-3');

  await expect(page.getByTestId('token-rotated')).toHaveText('never');
  await page.getByTestId('rotate-token').click();
  const token = (await page.getByTestId('new-token').textContent())?.trim() ?? '';
  expect(token.length).toBeGreaterThan(20);
  await expect(page.getByTestId('token-rotated')).not.toHaveText('never');
  // The old token stops at once; the new one works.
  const old = await request.post(`/v1/robots/${robot}/heartbeat`, { headers: org.auth('ue-pick-01') });
  expect(old.status()).toBe(401);
  const fresh = await request.post(`/v1/robots/${robot}/heartbeat`, { headers: { Authorization: `Bearer ${token}` } });
  expect(fresh.status()).toBe(200);
  await context.close();
});
