import { APIRequestContext, Browser, BrowserContext, BrowserContextOptions, expect, Page, test as base } from '@playwright/test';

export { expect };

export interface Person { id: string; name: string; email: string }
export interface Robot { id: string; token: string; org: string }

/** One test's own copy of the demo orgs (`POST /test/orgs`, which the
 * server opens only with `CLUTCHCALL_TEST_ORGS=1`): Northstar Robotics and
 * Harbor Labs with every person, robot and link floor of the demo, under
 * ids and emails marked with the copy's tag. Display names are the demo's.
 * No other test can see, ring or sign in as anyone in it, so a test passes
 * alone, in any order and beside any number of others. */
export class TestOrg {
  readonly tag: string;
  readonly password: string;
  /** By demo id: `org-northstar`, `org-harbor`. */
  readonly orgs: Record<string, { id: string; name: string }>;
  /** By first name: `asha`, `dana` (the admin), `kofi` (the client), `lena` (Harbor's operator)… */
  readonly people: Record<string, Person>;
  /** By demo id: `uk-insp-01`, `hb-pick-01`… */
  readonly robots: Record<string, Robot>;

  constructor(answer: any) {
    this.tag = answer.tag;
    this.password = answer.password;
    this.orgs = answer.orgs;
    this.people = Object.fromEntries(Object.entries(answer.people).map(([id, p]) => [id.replace(/^u-/, ''), p as Person]));
    this.robots = answer.robots;
  }

  get admin(): Person { return this.people.dana; }
  get client(): Person { return this.people.kofi; }

  /** The `Authorization` header of a robot's edge agent. */
  auth(robot: string): { Authorization: string } {
    return { Authorization: `Bearer ${this.robots[robot].token}` };
  }

  /** An email for someone the test itself invites (unique to this copy). */
  email(local: string, domain = 'northstar.example'): string {
    return `${local}@${this.tag}.${domain}`;
  }

  /** An id for a robot the test itself registers (unique to this copy). */
  robotId(base: string): string {
    return `${base}-${this.tag}`;
  }
}

/** Every test gets `org`, its own copy of the demo orgs, made on first use;
 * the browser contexts a test opens (its people's tabs) close when it ends,
 * whether or not it closed them itself. */
export const test = base.extend<{ org: TestOrg; _closeContexts: void }>({
  _closeContexts: [async ({ browser }, use) => {
    const before = new Set(browser.contexts());
    await use();
    await Promise.all(browser.contexts().filter((c) => !before.has(c)).map((c) => c.close().catch(() => {})));
  }, { auto: true }],
  org: async ({ playwright, baseURL }, use) => {
    // A context of its own: the test's `request` keeps no cookie from it.
    const api = await playwright.request.newContext({ baseURL });
    const made = await api.post('/test/orgs', { headers: { origin: baseURL! } });
    expect(made.status(), await made.text()).toBe(201);
    await use(new TestOrg(await made.json()));
    await api.dispose();
  },
});

/** Waits until the wasm has hydrated the server-rendered page. The debug
 * build's shell and a screen's lazy chunks are several MB of unoptimised
 * wasm, which Chromium compiles before hydrating: with two workers and
 * parallel tabs that can take longer than a plain expect's 10 s. */
export async function hydrated(page: Page, timeout = 30_000) {
  await expect(page.locator('body[data-hydrated="true"]')).toHaveCount(1, { timeout });
}

/** Signs in through the sign-in screen, as a person would. */
export async function signIn(page: Page, email: string, password: string) {
  await page.goto('/signin');
  await hydrated(page);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** A browser context of `person`'s own, signed in the way the sign-in
 * screen's script does it (tests of the screen itself use `signIn`). */
export async function signedIn(browser: Browser, org: TestOrg, person: Person, options: BrowserContextOptions = {}): Promise<BrowserContext> {
  const context = await browser.newContext(options);
  const origin = test.info().project.use.baseURL!;
  const answer = await context.request.post('/api/sign_in', { headers: { origin }, form: { email: person.email, password: org.password } });
  expect(answer.status(), await answer.text()).toBe(200);
  return context;
}

/** A page of `person`'s on the operator screen, Ready. */
export async function readyOperator(browser: Browser, org: TestOrg, person: Person): Promise<Page> {
  const context = await signedIn(browser, org, person);
  const page = await context.newPage();
  await page.goto('/operator');
  await hydrated(page);
  await page.getByTestId('go-ready').click();
  await expect(page.getByTestId('presence')).toHaveText('ready');
  return page;
}

/** Raises a distress call as `robot`'s edge agent would; the session id. */
export async function raise(request: APIRequestContext, org: TestOrg, robot: string): Promise<string> {
  const call = await request.post('/v1/sessions', { headers: org.auth(robot), data: { robotId: org.robots[robot].id } });
  expect(call.status(), await call.text()).toBe(201);
  return (await call.json()).sessionId;
}

/** The operator on `page`, rung for `robot`'s call (`session`, when the
 * test raised it itself), takes it (Enter) and is on its cockpit,
 * hydrated; the session's id. `ringWithin`: how long the ring may take (a
 * simulator raises on its own clock). */
export async function acceptIntoCockpit(page: Page, org: TestOrg, robot: string, session?: string, ringWithin?: number): Promise<string> {
  await expect(page.getByTestId('offer-robot')).toHaveText(org.robots[robot].id, { timeout: ringWithin });
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL(session ? new RegExp(`/cockpit/${session}$`) : /\/cockpit\/.+$/);
  await hydrated(page);
  return page.url().split('/cockpit/')[1];
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
