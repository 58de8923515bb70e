import { expect, hydrated, signedIn, signIn, test } from './helpers';

test('the page hydrates: a client-side toggle changes the DOM without a reload', async ({ page }) => {
  await page.goto('/signin');
  await hydrated(page);
  await page.evaluate(() => ((window as any).__sameDocument = true));
  const password = page.getByLabel('Password', { exact: true });
  await expect(password).toHaveAttribute('type', 'password');
  await page.getByRole('button', { name: 'Show' }).click();
  await expect(password).toHaveAttribute('type', 'text');
  await page.getByRole('button', { name: 'Hide' }).click();
  await expect(password).toHaveAttribute('type', 'password');
  expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true);
});

test('an admin signs in and lands on the directory, which filters in place', async ({ page, org }) => {
  const robot = (id: string) => org.robots[id].id;
  await signIn(page, org.admin.email, org.password);
  await expect(page).toHaveURL(/\/admin\/directory$/);
  const robots = page.getByTestId('robots');
  await expect(robots.getByRole('link', { name: robot('ue-pick-01') })).toBeVisible();
  await expect(page.getByText(/robots online · as of \d\d:\d\d:\d\d UTC/)).toBeVisible();

  await hydrated(page);
  await page.evaluate(() => ((window as any).__sameDocument = true));
  await page.getByLabel('Filter').fill('weld');
  await expect(robots.locator('tbody tr')).toHaveCount(2);
  await expect(robots.getByRole('link', { name: robot('uw-weld-01') })).toBeVisible();
  await expect(robots.getByRole('link', { name: robot('ue-pick-01') })).toHaveCount(0);
  await page.getByLabel('Filter').fill('no such robot');
  await expect(page.getByText('No robot matches the filter.')).toBeVisible();
  expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true);
});

test('the top bar is plain HTML, yet once the page is hydrated its links move within the page', async ({ browser, org }) => {
  const context = await signedIn(browser, org, org.admin);
  const page = await context.newPage();
  await page.goto('/admin/directory');
  await hydrated(page);
  await page.evaluate(() => ((window as any).__sameDocument = true));
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Wallboard' }).click();
  await expect(page).toHaveURL(/\/ops\/wallboard$/);
  await expect(page.getByRole('heading', { name: 'Wallboard', level: 1 })).toBeVisible();
  expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true);
  await context.close();
});

test('an operator signs in and lands on the operator screen', async ({ page, org }) => {
  await signIn(page, org.people.asha.email, org.password);
  await expect(page).toHaveURL(/\/operator$/);
  const profile = page.getByTestId('operator-profile');
  await expect(profile).toContainText('Asha Rao');
  await expect(profile).toContainText('BLR');
  await expect(profile).toContainText('pick-place · tier-2');
  // No admin navigation for an operator.
  await expect(page.getByRole('link', { name: 'Directory' })).toHaveCount(0);
});

test('an operator cannot open an admin screen', async ({ browser, org }) => {
  const context = await signedIn(browser, org, org.people.asha);
  const page = await context.newPage();
  const response = await page.goto('/admin/directory');
  expect(response?.status()).toBe(403);
  await expect(page.getByRole('heading', { name: 'Not allowed' })).toBeVisible();
  await expect(page.getByTestId('robots')).toHaveCount(0);
  await context.close();
});

test('a wrong password says so without saying which part was wrong', async ({ page, org }) => {
  await signIn(page, org.people.vikram.email, 'not-the-password');
  await expect(page.getByRole('alert')).toHaveText('Email or password is incorrect.');
  await expect(page).toHaveURL(/\/signin/);
});

test('without the script the sign-in form still works, and still says what went wrong', async ({ browser, org }) => {
  // The form posts itself before the wasm has loaded (here: never).
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  const submit = async (password: string) => {
    await page.getByLabel('Email').fill(org.client.email);
    await page.getByLabel('Password', { exact: true }).fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
  };
  await page.goto('/signin?next=/client');
  await submit('not-the-password');
  await expect(page.getByRole('alert')).toHaveText('Email or password is incorrect.');
  await expect(page).toHaveURL(/\/signin\?next=/);
  await submit(org.password);
  await expect(page).toHaveURL(/\/client$/);
  // The page came with who is signed in: the top bar names them.
  await expect(page.getByRole('link', { name: 'Kofi Mensah (Leeds Logistics)' })).toBeVisible();
  await context.close();
});

test('signed out, an admin screen sends you to sign in and back', async ({ page, org }) => {
  await page.goto('/admin/directory');
  await expect(page).toHaveURL(/\/signin\?next=\/admin\/directory$/);
  await hydrated(page);
  await page.getByLabel('Email').fill(org.admin.email);
  await page.getByLabel('Password', { exact: true }).fill(org.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/admin\/directory$/);
});

test('orgs are isolated: another org\'s robot is not found until you switch to it', async ({ page, org }) => {
  const harbor = org.robots['hb-pick-01'].id;
  await signIn(page, org.admin.email, org.password);
  await expect(page).toHaveURL(/\/admin\/directory$/);
  await page.goto(`/admin/directory?robot=${harbor}`);
  await expect(page.getByRole('alert')).toHaveText(`Robot ${harbor} not found.`);

  await hydrated(page);
  await page.getByLabel('Organisation').selectOption({ label: `${org.orgs['org-harbor'].name} · admin` });
  await page.getByRole('button', { name: 'Switch' }).click();
  await expect(page.getByTestId('robots').getByRole('link', { name: harbor })).toBeVisible();
  await expect(page.getByTestId('robots').getByRole('link', { name: org.robots['ue-pick-01'].id })).toHaveCount(0);
});

test('signing out ends the session', async ({ page, org }) => {
  await signIn(page, org.admin.email, org.password);
  await expect(page).toHaveURL(/\/admin\/directory$/);
  await hydrated(page);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/signin$/);
  await page.goto('/admin/directory');
  await expect(page).toHaveURL(/\/signin\?next=/);
});
