import * as http from 'node:http';
import { expect, hydrated, signedIn, test } from './helpers';

// Issue #30 part 1 in the test's own org: the admin makes an API key on
// /admin/integrations (shown once; it reads /v1/events until revoked), adds
// a webhook endpoint for one event type (its secret shown once), and reads
// its delivery log: a refused first attempt, the retry that succeeded, and
// a resend from the log.

/** A receiver on 127.0.0.1 that refuses its first request with 500. */
async function receiver(): Promise<{ url: string; bodies: any[]; close: () => void }> {
  const bodies: any[] = [];
  let seen = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      seen += 1;
      if (seen === 1) { res.writeHead(500).end(); return; }
      bodies.push(JSON.parse(body));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const port = (server.address() as any).port;
  return { url: `http://127.0.0.1:${port}/hook`, bodies, close: () => server.close() };
}

test('an admin makes and revokes an API key, adds a webhook, reads its delivery log and resends', async ({ browser, org, request }) => {
  test.setTimeout(120_000);
  const ctx = await signedIn(browser, org, org.admin);
  const page = await ctx.newPage();
  page.on('pageerror', (e) => console.log(`PAGE ERROR: ${e.message.slice(0, 300)}`));
  await page.goto('/admin');
  await hydrated(page);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Integrations' }).click();
  await expect(page).toHaveURL(/\/admin\/integrations$/);
  await expect(page.getByRole('heading', { name: 'Integrations', level: 1 })).toBeVisible();
  await hydrated(page);
  await expect(page.getByTestId('keys-empty')).toHaveText('No keys yet.');
  await expect(page.getByTestId('webhooks-empty')).toHaveText('No endpoints yet.');

  // A key, shown once; listed by its hint; it reads the org's events.
  const keys = page.getByTestId('keys-section');
  await keys.getByLabel('What it is for').fill('WMS re-planner');
  await keys.getByRole('button', { name: 'Create key' }).click();
  const shown = page.getByTestId('new-key');
  await expect(shown).toHaveText(/^cck_/);
  const key = (await shown.textContent())!;
  const row = page.getByTestId('keys').locator('tbody tr');
  await expect(row).toHaveCount(1);
  await expect(row.locator('td').nth(1)).toHaveText(`cck_…${key.slice(-4)}`);
  await expect(row.locator('td').nth(4)).toHaveText('live');
  const read = await request.get('/v1/events', { headers: { Authorization: `Bearer ${key}` } });
  expect(read.status()).toBe(200);

  // An endpoint for call.raised only; a bad URL is refused with a sentence.
  const hooks = page.getByTestId('webhooks-section');
  await hooks.getByLabel('URL').fill('ftp://files.example.com/x');
  await hooks.getByRole('button', { name: 'Add endpoint' }).click();
  await expect(hooks.getByRole('alert')).toContainText('The URL must start with https://');
  const hook = await receiver();
  try {
    await hooks.getByLabel('URL').fill(hook.url);
    await hooks.getByLabel('call.raised').check();
    await hooks.getByRole('button', { name: 'Add endpoint' }).click();
    await expect(page.getByTestId('new-secret')).toHaveText(/^whsec_/);
    const endpoint = page.getByTestId('webhook');
    await expect(endpoint).toHaveCount(1);
    await expect(endpoint).toContainText('call.raised · delivered up to event');

    // A call: the receiver refuses the first attempt, the retry lands.
    const call = await request.post('/v1/sessions', { headers: org.auth('uk-pick-01'), data: { robotId: org.robots['uk-pick-01'].id } });
    expect([201, 202]).toContain(call.status());
    await expect.poll(() => hook.bodies.length, { timeout: 20_000 }).toBe(1);
    expect(hook.bodies[0].type).toBe('call.raised');
    await page.reload();
    await hydrated(page);
    const log = page.getByTestId('deliveries').locator('tbody tr');
    await expect(log).toHaveCount(2);
    await expect(log.nth(0)).toContainText('204');
    await expect(log.nth(1)).toContainText('answered 500');
    await expect(page.getByTestId('webhook-state')).toHaveText('healthy');

    // Resend from the log: one more delivery, logged as a resend.
    await log.nth(0).getByRole('button', { name: /^Resend event \d+$/ }).click();
    await expect(page.getByTestId('deliveries').locator('tbody tr')).toHaveCount(3);
    await expect(page.getByTestId('deliveries').locator('tbody tr').nth(0)).toContainText('(resend)');
    expect(hook.bodies.length).toBe(2);
    await page.getByTestId('webhooks-section').screenshot({ path: 'test-results/integrations.png' });
  } finally {
    hook.close();
  }

  // Revoked, the key reads nothing.
  await row.getByRole('button', { name: 'Revoke the key WMS re-planner' }).click();
  await expect(row.locator('td').nth(4)).toHaveText(/^revoked /);
  const refused = await request.get('/v1/events', { headers: { Authorization: `Bearer ${key}` } });
  expect(refused.status()).toBe(401);
});
