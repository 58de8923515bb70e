import { defineConfig } from '@playwright/test';
import { execSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

// The config is evaluated by the runner and again by every worker; workers
// inherit the runner's environment, so the port and data dir are chosen once.
const root = path.resolve(__dirname, '..');
process.env.E2E_PORT ??= execSync(
  `node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"`,
).toString().trim();
process.env.E2E_DATA_DIR ??= fs.mkdtempSync(path.join(os.tmpdir(), 'clutchcall-e2e-'));

const port = process.env.E2E_PORT;
const baseURL = `http://127.0.0.1:${port}`;
const bin = process.env.CLUTCHCALL_BIN ?? path.join(root, 'target', 'debug', 'server');

export default defineConfig({
  testDir: './tests',
  timeout: 30_000,
  expect: { timeout: 10_000 },
  // Every test makes its own org (helpers.ts, `POST /test/orgs`), so any
  // test runs beside any other. Two at a time, as CI's two cores allow.
  fullyParallel: true,
  workers: 2,
  forbidOnly: !!process.env.CI,
  reporter: [['list']],
  use: {
    baseURL,
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-quic',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    },
  },
  webServer: {
    command: bin,
    cwd: root,
    url: `${baseURL}/healthz`,
    reuseExistingServer: false,
    timeout: 120_000,
    stdout: 'pipe',
    stderr: 'pipe',
    env: {
      CLUTCHCALL_ADDR: `127.0.0.1:${port}`,
      CLUTCHCALL_DATA_DIR: process.env.E2E_DATA_DIR,
      LEPTOS_SITE_ROOT: process.env.LEPTOS_SITE_ROOT ?? path.join(root, 'target', 'site'),
      RUST_LOG: process.env.E2E_RUST_LOG ?? 'warn',
      // No demo org: a test that leaned on shared data would fail here.
      CLUTCHCALL_DEMO: '0',
      CLUTCHCALL_TEST_ORGS: '1',
      // Every test signs its own people in, all from 127.0.0.1.
      CLUTCHCALL_SIGNIN_PER_MINUTE: '1000',
      // Webhook tests run their receiver on 127.0.0.1 and want retries soon.
      CLUTCHCALL_WEBHOOK_ALLOW_PRIVATE: '1',
      CLUTCHCALL_WEBHOOK_RETRY_MS: '200',
    },
  },
});
