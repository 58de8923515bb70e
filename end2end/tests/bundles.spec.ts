import { BrowserContext } from '@playwright/test';
import { expect, hydrated, panicsOf, signedIn, test } from './helpers';

// A screen's wasm chunks arrive as one file (frontend/site, bundle.rs): the
// page preloads its bundle (or the loader fetches it), each chunk is taken
// from it, and a bundle that cannot be fetched falls back to the chunks one
// by one.

/** Opens the roster in `context`: the page, what it reports of a panic, and
 * every /pkg file it requested (without the prefix). */
async function openRoster(context: BrowserContext) {
  const page = await context.newPage();
  const errors = panicsOf(page);
  const fetched = new Set<string>();
  page.on('request', (r) => {
    const { pathname } = new URL(r.url());
    if (pathname.startsWith('/pkg/')) fetched.add(pathname.slice('/pkg/'.length));
  });
  await page.goto('/ops/roster');
  await hydrated(page);
  await expect(page.getByRole('heading', { name: 'Sessions (Live)' })).toBeVisible();
  return { page, errors, fetched };
}

test("a screen's chunks arrive as one bundle, and none of them is fetched alone", async ({ browser, request, org }) => {
  const context = await signedIn(browser, org, org.admin);
  const { page, errors, fetched } = await openRoster(context);
  await page.waitForLoadState('networkidle');

  // The roster's own bundle (a panel or the console may bring theirs later).
  const bundles = [...fetched].filter((f) => f.startsWith('bundle___roster_screen_view'));
  expect(bundles).toHaveLength(1);
  const body = await (await request.get(`/pkg/${bundles[0]}`)).body();
  // Its header names its chunks and their sections (the script checks,
  // with the browser's reader, that each comes back byte for byte).
  const headerLen = body.readUInt32LE(0);
  const chunks: [string, number[]][] = JSON.parse(body.subarray(4, 4 + headerLen).toString());
  expect(chunks.length).toBeGreaterThan(1);
  expect(chunks.every(([name, sections]) => /^(chunk|split)_/.test(name) && sections.length > 0)).toBe(true);
  expect([...fetched].filter((f) => chunks.some(([chunk]) => f === `${chunk}.wasm`))).toEqual([]);
  expect(errors).toEqual([]);
  await context.close();
});

test('a screen whose bundle cannot be fetched loads its chunks one by one', async ({ browser, org }) => {
  const context = await signedIn(browser, org, org.admin);
  await context.route(/\/pkg\/bundle_[^/]*\.wasm$/, (route) => route.abort());
  const { errors, fetched } = await openRoster(context);
  expect([...fetched].some((f) => f.startsWith('bundle_'))).toBe(true);
  expect([...fetched].filter((f) => /^(chunk|split)_.*\.wasm$/.test(f)).length).toBeGreaterThan(1);
  expect(errors).toEqual([]);
  await context.close();
});
