import { Browser, BrowserContext, BrowserContextOptions, expect, Page } from '@playwright/test';

export const PASSWORD = 'clutchcall-demo';
export const ADMIN = 'dana.okafor@northstar.example';
export const OPERATOR = 'asha.rao@northstar.example';
export const CLIENT = 'kofi.mensah@leeds-logistics.example';

/** Waits until the wasm has hydrated the server-rendered page. The debug
 * build's shell and a screen's lazy chunks are several MB of unoptimised
 * wasm, which Chromium compiles before hydrating: with two workers and
 * parallel tabs that can take longer than a plain expect's 10 s. */
export async function hydrated(page: Page, timeout = 30_000) {
  await expect(page.locator('body[data-hydrated="true"]')).toHaveCount(1, { timeout });
}

export async function signIn(page: Page, email: string, password = PASSWORD) {
  await page.goto('/signin');
  await hydrated(page);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

// The admin's signed-in browser state, one sign-in per worker: sign-ins are
// rate-limited per (address, email) — a burst of 5, then one per 12 s — and
// every browser test's admin comes from 127.0.0.1 as Dana.
let adminState: Awaited<ReturnType<BrowserContext['storageState']>> | undefined;

/** A browser context signed in as the demo admin (Dana). */
export async function adminContext(browser: Browser, options: BrowserContextOptions = {}): Promise<BrowserContext> {
  if (!adminState) {
    const context = await browser.newContext();
    const page = await context.newPage();
    await signIn(page, ADMIN);
    await expect(page).toHaveURL(/\/admin\/directory$/);
    adminState = await context.storageState();
    await context.close();
  }
  return browser.newContext({ ...options, storageState: adminState });
}

/** What a page reports of a panic in its wasm, collected as it happens (for
 * tests that drop a chunk's fetch on purpose). A panic logs "panicked at"
 * and throws a RuntimeError; the dropped fetch itself is reported too, as an
 * unhandled "Failed to fetch" from the split tool's chunk loader, and is not
 * a failure of the page. */
export function panicsOf(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => { if (!e.message.includes('Failed to fetch')) errors.push(`${e.name}: ${e.message.slice(0, 300)}`); });
  page.on('console', (m) => { if (m.type() === 'error' && m.text().includes('panicked')) errors.push(m.text().slice(0, 300)); });
  return errors;
}

/** A robot and an operator of the test's own in the demo org: the robot
 * needs a certification only this operator holds, so its calls ring nobody
 * else and no other test's operator takes them. Registered and invited by
 * the admin; the invitation is accepted from a browser of the operator's
 * own. Returns the robot's bearer token. */
export async function ownRobotAndOperator(
  browser: Browser,
  baseURL: string,
  robot: { id: string; model: string; site: string; pop: string },
  operator: { email: string; name: string; region: string; password: string; cert: string },
): Promise<string> {
  const admin = await adminContext(browser);
  const origin = { origin: baseURL };
  const registered = await admin.request.post('/v1/robots', { data: { ...robot, reqCert: operator.cert } });
  expect(registered.status()).toBe(201);
  const { token } = await registered.json();
  const invited = await admin.request.post('/api/invite_person', {
    headers: origin,
    form: { email: operator.email, display_name: operator.name, region: operator.region, role: 'operator', 'certifications[0]': operator.cert },
  });
  expect(invited.status()).toBe(200);
  const link: string = (await invited.json()).url;
  await admin.close();
  const invitee = await browser.newContext();
  const accepted = await invitee.request.post('/api/accept_invitation', {
    headers: origin,
    form: { token: link.split('/').pop()!, password: operator.password, confirm: operator.password },
    maxRedirects: 0,
  });
  expect(accepted.status()).toBeLessThan(400);
  await invitee.close();
  return token;
}
