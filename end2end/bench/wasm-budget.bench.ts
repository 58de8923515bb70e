import { Browser, expect, test } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';
import * as zlib from 'zlib';
import { hydrated, signIn } from '../tests/helpers';

// What each screen loads before it is interactive: every wasm and JS file
// the browser fetches from /pkg between navigation and hydration (screens
// are lazy routes, so that is the main module plus the screen's chunks,
// which arrive as one bundle: frontend/site/src/bundle.rs). Each screen is
// also loaded with its bundle blocked, chunk by chunk, for comparison.
// Run by scripts/bench-wasm.sh against the release build; figures in
// BENCHMARKS.md. Sizes are the site's own files: raw, gzip -9 of each file
// (the budget's measure, as in earlier figures), and what Chromium actually
// received (the server sends the `.br` the release site build wrote).
const BUDGET_GZIP = 350 * 1024;
const SITE = process.env.BENCH_SITE ?? path.resolve(__dirname, '../../target/site');

type Who = 'nobody' | 'admin' | 'operator' | 'client';
const USERS: Record<Exclude<Who, 'nobody'>, string> = {
  admin: 'dana.okafor@northstar.example',
  operator: 'priya.shah@northstar.example',
  client: 'kofi.mensah@leeds-logistics.example',
};
/** The demo org's password (the benchmark's server seeds the demo). */
const DEMO_PASSWORD = 'clutchcall-demo';
const SCREENS: [string, Who][] = [
  ['/signin', 'nobody'],
  ['/invite/not-a-token', 'nobody'],
  ['/', 'admin'],
  ['/orgs', 'admin'],
  ['/admin', 'admin'],
  ['/admin/directory', 'admin'],
  ['/admin/people', 'admin'],
  ['/admin/floors', 'admin'],
  ['/ops/wallboard', 'admin'],
  ['/ops/roster', 'admin'],
  ['/ops/sessions', 'admin'],
  ['/datasets', 'admin'],
  ['/account', 'admin'],
  ['/operator', 'operator'],
  ['/cockpit/no-such-session', 'operator'],
  ['/client', 'client'],
];

async function storageFor(browser: Browser, who: Who) {
  if (who === 'nobody') return undefined;
  const context = await browser.newContext();
  const page = await context.newPage();
  await signIn(page, USERS[who], DEMO_PASSWORD);
  await expect(page).not.toHaveURL(/\/signin/);
  const state = await context.storageState();
  await context.close();
  return state;
}

const size = (file: string) => (fs.existsSync(file) ? fs.statSync(file).size : NaN);
const gzipped = (file: string) => (fs.existsSync(file) ? zlib.gzipSync(fs.readFileSync(file), { level: 9 }).length : NaN);
const kb = (n: number) => `${(n / 1024).toFixed(0)} KB`;

type Row = { screen: string; files: number; raw: number; gzip: number; received: number; deferred: number; hydratedMs: number };

// One load of a screen in a fresh context; `chunkByChunk` blocks the
// screen's bundle, so the loader fetches its chunks one by one (as before
// chunks were bundled): the floor, measured in the same run.
async function load(browser: Browser, storage: Awaited<ReturnType<typeof storageFor>>, screen: string, chunkByChunk: boolean): Promise<Row> {
  const context = await browser.newContext({ storageState: storage });
  if (chunkByChunk) await context.route(/\/pkg\/bundle_[^/]*\.wasm$/, (route) => route.abort());
  const page = await context.newPage();
  // A screen fetches a couple of hundred chunks: keep every timing (the
  // default buffer holds 250 entries).
  await page.addInitScript(() => performance.setResourceTimingBufferSize(5_000));
  page.on('pageerror', (e) => console.log(`${screen}: ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && console.log(`${screen}: ${m.text()}`));
  await page.goto(screen);
  // Hydration waits for the screen's chunks (hydrate_lazy), so by now
  // everything the screen needs to be interactive has been fetched; the
  // page's own resource timings list it (preloads included, once each).
  await hydrated(page, 60_000);
  // Let the panels that load after hydration fetch their code too.
  await page.waitForLoadState('networkidle', { timeout: 15_000 }).catch(() => {});
  // Fetches that started before the page marked itself interactive;
  // panels whose code loads after that are listed apart. A blocked bundle
  // is not counted: nothing of it arrived.
  const { files, later, hydratedMs }: { files: { file: string; received: number }[]; later: string[]; hydratedMs: number } = await page.evaluate((blocked) => {
    const interactive = performance.getEntriesByName('hydrated', 'mark')[0]?.startTime ?? Infinity;
    const seen = new Map<string, number>();
    const after = new Set<string>();
    for (const e of performance.getEntriesByType('resource') as PerformanceResourceTiming[]) {
      const path = new URL(e.name).pathname;
      if (!/^\/pkg\/.*\.(wasm|js)$/.test(path)) continue;
      const file = path.slice('/pkg/'.length);
      if (blocked && file.startsWith('bundle_')) continue;
      if (e.startTime > interactive) after.add(file);
      else seen.set(file, Math.max(seen.get(file) ?? 0, e.encodedBodySize));
    }
    return { files: [...seen].map(([file, received]) => ({ file, received })), later: [...after].filter((f) => !seen.has(f)), hydratedMs: interactive };
  }, chunkByChunk);
  await context.close();
  return {
    screen,
    files: files.length,
    raw: files.reduce((sum, f) => sum + size(path.join(SITE, 'pkg', f.file)), 0),
    gzip: files.reduce((sum, f) => sum + gzipped(path.join(SITE, 'pkg', f.file)), 0),
    received: files.reduce((sum, f) => sum + f.received, 0),
    deferred: later.reduce((sum, f) => sum + gzipped(path.join(SITE, 'pkg', f)), 0),
    hydratedMs,
  };
}

test('what each screen loads before it is interactive', async ({ browser }) => {
  test.setTimeout(900_000);
  const states = new Map<Who, Awaited<ReturnType<typeof storageFor>>>();
  for (const who of ['nobody', 'admin', 'operator', 'client'] as Who[]) states.set(who, await storageFor(browser, who));

  const rows: { bundled: Row; apart: Row }[] = [];
  for (const [screen, who] of SCREENS) {
    const apart = await load(browser, states.get(who), screen, true);
    const bundled = await load(browser, states.get(who), screen, false);
    rows.push({ bundled, apart });
  }

  console.log('| screen | files | raw | gzip (budget) | received (br) | then, after interactive (gzip) | hydrated at | chunk by chunk: files | gzip | hydrated at |');
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const { bundled: r, apart: a } of rows) {
    console.log(`| \`${r.screen}\` | ${r.files} | ${kb(r.raw)} | ${kb(r.gzip)} | ${kb(r.received)} | ${kb(r.deferred)} | ${r.hydratedMs.toFixed(0)} ms | ${a.files} | ${kb(a.gzip)} | ${a.hydratedMs.toFixed(0)} ms |`);
  }
  const worst = rows.map((r) => r.bundled).reduce((a, b) => (b.gzip > a.gzip ? b : a));
  console.log(`heaviest: ${worst.screen}, ${kb(worst.gzip)} gzip in ${worst.files} files (budget ${kb(BUDGET_GZIP)}): ${worst.gzip} bytes, ${BUDGET_GZIP - worst.gzip} under`);
  for (const { bundled: r } of rows) {
    expect(Number.isFinite(r.gzip), `${r.screen}: every fetched file is in ${SITE}`).toBe(true);
    expect(r.gzip, `${r.screen} loads ${kb(r.gzip)} gzip before it is interactive`).toBeLessThanOrEqual(BUDGET_GZIP);
  }
});
