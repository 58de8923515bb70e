import { expect, test } from '@playwright/test';
import { adminContext, hydrated } from './helpers';

// ue-pick-01: no other browser test raises calls for it or counts its fields.
test('A02: an admin edits a robot (the skill shows as the reqCert is typed) and rotates its token, shown once', async ({ browser, request }) => {
  const context = await adminContext(browser);
  const page = await context.newPage();
  await page.goto('/admin/directory?robot=ue-pick-01');
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
  // The old demo token stops at once; the new one works.
  const old = await request.post('/v1/robots/ue-pick-01/heartbeat', { headers: { Authorization: 'Bearer cct_demo_ue-pick-01' } });
  expect(old.status()).toBe(401);
  const fresh = await request.post('/v1/robots/ue-pick-01/heartbeat', { headers: { Authorization: `Bearer ${token}` } });
  expect(fresh.status()).toBe(200);
  await context.close();
});
