import { expect, hydrated, panicsOf, signedIn, signIn, test } from './helpers';

// The new robot's certification, which the invited operator is given.
const CERT = 'laser-cutting · tier-1';

test('an admin registers a robot and invites an operator, who sets a password, signs in, presses Ready and is rung by that robot', async ({ browser, request, org }) => {
  // Five screens, two browsers and a call: more than the default 30 s on
  // the debug build (each screen's chunks, then its deferred panels').
  test.setTimeout(60_000);
  const robot = org.robotId('ue-laser-01');
  const email = org.email('nia.clarke');
  const admin = await signedIn(browser, org, org.admin);
  const page = await admin.newPage();
  await page.goto('/admin/directory');
  await hydrated(page);
  await page.getByTestId('register-toggle').click();
  const form = page.getByTestId('robot-register');
  await form.getByLabel('Robot id').fill(robot);
  await form.getByLabel('Model').fill('Trumpf TruLaser');
  await form.getByLabel('Site').fill('Ashburn FC-2');
  await form.getByLabel('PoP').fill('us-east');
  await form.getByLabel('Required cert').fill(CERT);
  await expect(page.getByTestId('register-skill')).toHaveText('skill: laser-cutting');
  await page.getByTestId('register-submit').click();
  const token = ((await page.getByTestId('registered-token').textContent()) ?? '').trim();
  expect(token.length).toBeGreaterThan(20);
  await expect(page.getByTestId('robots')).toContainText(robot);

  await page.goto('/admin/people');
  await hydrated(page);
  const invite = page.getByTestId('invite-form');
  await invite.getByLabel('Email').fill(email);
  await invite.getByLabel('Display name').fill('Nia Clarke');
  await invite.getByLabel('Region').selectOption('Austin');
  await invite.getByLabel(new RegExp(CERT)).check();
  await page.getByTestId('invite-submit').click();
  const link = ((await page.getByTestId('invite-link').textContent()) ?? '').trim();
  expect(link).toContain('/invite/');
  await expect(page.getByTestId('members')).toContainText('Nia Clarke');
  await expect(page.getByTestId('members')).toContainText('invited');
  await page.screenshot({ path: 'test-results/people-invite.png', fullPage: true });
  await admin.close();

  // Nia, in a browser of her own.
  const nia = await browser.newContext();
  const tab = await nia.newPage();
  await tab.goto(link);
  await hydrated(tab);
  await expect(tab.getByTestId('invitation')).toContainText(email);
  await tab.getByLabel('Password', { exact: true }).fill('nia-has-a-long-password');
  await tab.getByLabel('Password again').fill('nia-has-a-long-password');
  await tab.getByTestId('set-password').click();
  await expect(tab).toHaveURL(/\/signin\?welcome=1$/);
  await expect(tab.getByTestId('welcome')).toBeVisible();
  await signIn(tab, email, 'nia-has-a-long-password');
  await expect(tab).toHaveURL(/\/operator$/);
  await tab.getByTestId('go-ready').click();
  await expect(tab.getByTestId('presence')).toHaveText('ready');

  const call = await request.post('/v1/sessions', { headers: { Authorization: `Bearer ${token}` }, data: { robotId: robot } });
  expect(call.status(), await call.text()).toBe(201);
  await expect(tab.getByTestId('offer')).toBeVisible();
  await expect(tab.getByTestId('offer-robot')).toHaveText(robot);
  // The link was for one use.
  const again = await browser.newContext();
  const used = await again.newPage();
  await used.goto(link);
  await expect(used.getByRole('alert')).toContainText('used or has expired');
  await again.close();
  await nia.close();
});

test('a CSV import names the lines to fix, then imports all of them and offers their links once', async ({ browser, org }) => {
  const ivy = org.email('ivy', 'import.example');
  const rex = org.email('rex', 'import.example');
  const admin = await signedIn(browser, org, org.admin);
  const page = await admin.newPage();
  await page.goto('/admin/people');
  await hydrated(page);
  const header = 'email,display name,external id,region,certifications,role\n';
  await page.getByTestId('import-csv').fill(`${header}${ivy},Ivy,IM-1,Austin,${CERT},operator\n${rex},Rex,,Atlantis,,operator\n`);
  await page.getByTestId('import-preview').click();
  await expect(page.getByTestId('import-problems')).toContainText('Atlantis');
  await expect(page.getByTestId('import-problems').locator('tbody tr td').first()).toHaveText('3');
  await expect(page.getByTestId('import-run')).toBeDisabled();
  await page.getByTestId('import-csv').fill(`${header}${ivy},Ivy,IM-1,Austin,${CERT},operator\n${rex},Rex,,BLR,,client\n`);
  await expect(page.getByTestId('import-run')).toBeDisabled(); // a changed text needs a new preview
  await page.getByTestId('import-preview').click();
  await expect(page.getByTestId('import-ok')).toHaveText('2 people ready to import.');
  await page.getByTestId('import-run').click();
  await expect(page.getByTestId('import-done')).toContainText('Imported 2 people');
  const download = page.waitForEvent('download');
  await page.getByRole('link', { name: 'Download links (CSV)' }).click();
  const file = await (await download).path();
  const text = require('node:fs').readFileSync(file, 'utf8');
  expect(text).toContain(ivy);
  expect(text).toContain('/invite/');
  await expect(page.getByTestId('members')).toContainText('Ivy');
  await admin.close();
});

test('a panel whose code cannot be fetched says so without breaking the page, and loads when tried again', async ({ browser, org }) => {
  const context = await signedIn(browser, org, org.admin);
  const page = await context.newPage();
  const errors = panicsOf(page);
  // The invite and import forms are a deferred panel with a chunk of its
  // own (split_people_forms, which may also come in its bundle): the
  // network drops both.
  const panelChunk = /\/pkg\/(split|bundle)_people_forms[^/]*\.wasm$/;
  await page.route(panelChunk, (route) => route.abort());
  await page.goto('/admin/people');
  await hydrated(page);
  const notice = page.getByTestId('panel-unavailable');
  await expect(notice).toContainText('could not be loaded', { timeout: 20_000 });
  await expect(page.getByTestId('invite-form')).toHaveCount(0);
  // The rest of the screen still works, and nothing panicked.
  await page.getByLabel('Filter').fill('dana');
  await expect(page.locator('tbody tr', { hasText: org.admin.email })).toBeVisible();
  expect(errors).toEqual([]);
  // The network is back: trying again builds the panel.
  await page.unroute(panelChunk);
  await notice.getByRole('button', { name: 'Try again' }).click();
  await expect(page.getByTestId('invite-form')).toBeVisible({ timeout: 20_000 });
  await expect(notice).toHaveCount(0);
  expect(errors).toEqual([]);
  await context.close();
});
