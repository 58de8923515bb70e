import { defineConfig } from '@playwright/test';

// Benchmarks, not tests: run by scripts/bench-roster.sh against a server it
// started on a seeded database (figures in BENCHMARKS.md).
export default defineConfig({
  testDir: '.',
  testMatch: /.*\.bench\.ts/,
  timeout: 120_000,
  workers: 1,
  reporter: [['list']],
  use: {
    baseURL: process.env.BENCH_URL,
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
    },
  },
});
