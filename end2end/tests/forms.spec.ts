import { expect, hydrated, signedIn, signIn, test } from './helpers';

// The forms read their fields by hand (app/src/forms.rs) instead of
// ActionForm's decoder: each one here must still send every field it shows.
// Other specs cover sign-in, booking, robot register/edit, invite, import,
// rating and the stop clear.

test('the link-floor form adds a path, its row saves a new floor and note, and the path is removed', async ({ browser, org }) => {
  const admin = await signedIn(browser, org, org.admin);
  const page = await admin.newPage();
  await page.goto('/admin/floors');
  await hydrated(page);
  const add = page.getByTestId('floor-add');
  await add.getByLabel('Operator region').fill('Lagos');
  await add.getByLabel('Robot PoP').fill('eu-forms');
  await add.getByLabel('Floor (ms)').fill('77');
  await add.getByLabel('Note').fill('Forms test path');
  await add.getByRole('button', { name: 'Add' }).click();
  const row = page.getByTestId('floors').locator('tr', { hasText: 'Lagos → eu-forms' });
  await expect(row.getByLabel('Floor (ms)')).toHaveValue('77');
  await expect(row.getByLabel('Note')).toHaveValue('Forms test path');

  await row.getByLabel('Floor (ms)').fill('78');
  await row.getByLabel('Note').fill('Saved inline');
  // Reloaded once the save has been answered: a reload before would cancel it.
  const saved = page.waitForResponse((r) => r.url().endsWith('/api/set_link_floor') && r.request().method() === 'POST');
  await row.getByRole('button', { name: 'Save' }).click();
  expect((await saved).ok()).toBe(true);
  await page.reload();
  await hydrated(page);
  await expect(row.getByLabel('Floor (ms)')).toHaveValue('78');
  await expect(row.getByLabel('Note')).toHaveValue('Saved inline');

  await row.getByRole('button', { name: 'Remove' }).click();
  await expect(row).toHaveCount(0);
  await admin.close();
});

test('an invited person joins, changes their password on the account screen and signs in with it; the admin edits their profile', async ({ browser, org }) => {
  test.setTimeout(60_000);
  const email = org.email('sam.forms');
  const admin = await signedIn(browser, org, org.admin);
  const page = await admin.newPage();
  await page.goto('/admin/people');
  await hydrated(page);
  const invite = page.getByTestId('invite-form');
  await invite.getByLabel('Email').fill(email);
  await invite.getByLabel('Display name').fill('Sam Forms');
  await invite.getByLabel('Role').selectOption('operator');
  await invite.getByLabel('Region').selectOption('Austin');
  await page.getByTestId('invite-submit').click();
  const link = ((await page.getByTestId('invite-link').textContent()) ?? '').trim();
  expect(link).toContain('/invite/');

  // The member edit form: every field it shows is saved.
  await page.getByTestId('members').getByRole('link', { name: 'Sam Forms' }).click();
  await hydrated(page);
  const edit = page.getByTestId('member-edit');
  await edit.getByLabel('Display name').fill('Sam Forms-Edited');
  await edit.getByLabel('External agent id').fill('EXT-SAM-1');
  await page.getByTestId('member-save').click();
  await expect(page.getByText('Saved: the next dispatch decision uses it.')).toBeVisible();
  await expect(page.getByTestId('members')).toContainText('Sam Forms-Edited');
  await page.reload();
  await hydrated(page);
  await expect(page.getByTestId('member-edit').getByLabel('External agent id')).toHaveValue('EXT-SAM-1');
  await admin.close();

  // Sam, in a browser of their own: set a password, then change it.
  const sam = await browser.newContext();
  const tab = await sam.newPage();
  await tab.goto(link);
  await hydrated(tab);
  await tab.getByLabel('Password', { exact: true }).fill('sam-first-long-password');
  await tab.getByLabel('Password again').fill('sam-first-long-password');
  await tab.getByTestId('set-password').click();
  await expect(tab).toHaveURL(/\/signin\?welcome=1$/);
  await signIn(tab, email, 'sam-first-long-password');
  await expect(tab).toHaveURL(/\/operator$/);
  await tab.goto('/account');
  await hydrated(tab);
  const form = tab.getByTestId('password-form');
  await form.getByLabel('Current password').fill('sam-first-long-password');
  await form.getByLabel('New password', { exact: true }).fill('sam-second-long-password');
  await form.getByLabel('New password again').fill('sam-second-long-password');
  await tab.getByTestId('password-submit').click();
  await expect(tab.getByTestId('password-changed')).toBeVisible();
  await tab.getByRole('button', { name: 'Sign out' }).first().click();
  await expect(tab).toHaveURL(/\/signin/);
  await signIn(tab, email, 'sam-second-long-password');
  await expect(tab).toHaveURL(/\/operator$/);
  await sam.close();
});
