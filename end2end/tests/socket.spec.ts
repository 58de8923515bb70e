import { CDPSession, Page, WebSocketRoute } from '@playwright/test';
import { expect, hydrated, signedIn, test } from './helpers';

// The browser's one socket client (app/src/socket.rs) owns the listeners of
// each WebSocket it makes and drops them once that socket has closed: a
// page whose socket reconnects all day holds no more than one that just
// loaded. (The clients it replaced forgot three closures per connect, and
// the page kept each one's JS function for good.)

/** What the page holds after a full garbage collection, from a heap
 * snapshot: its JS functions (each wasm-bindgen closure has a JS wrapper,
 * which a forgotten closure keeps for good) and its WebSocket objects (the
 * routed ones are Playwright's `_WebSocketMock`s). (`Runtime.queryObjects`
 * would be the direct way, but it never answers on a page running this
 * site's wasm.) */
async function held(cdp: CDPSession): Promise<{ functions: number; sockets: number }> {
  await cdp.send('HeapProfiler.collectGarbage');
  await cdp.send('HeapProfiler.collectGarbage');
  const chunks: string[] = [];
  const collect = (e: { chunk: string }) => { chunks.push(e.chunk); };
  cdp.on('HeapProfiler.addHeapSnapshotChunk', collect);
  try {
    await cdp.send('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
  } finally {
    cdp.off('HeapProfiler.addHeapSnapshotChunk', collect);
  }
  const snapshot = JSON.parse(chunks.join(''));
  const fields: string[] = snapshot.snapshot.meta.node_fields;
  const types: string[] = snapshot.snapshot.meta.node_types[0];
  const [type, name] = [fields.indexOf('type'), fields.indexOf('name')];
  let functions = 0;
  let sockets = 0;
  for (let at = 0; at < snapshot.nodes.length; at += fields.length) {
    const kind = types[snapshot.nodes[at + type]];
    if (kind === 'closure') functions += 1;
    else if (kind === 'object' && /^_?WebSocket(Mock)?$/.test(snapshot.strings[snapshot.nodes[at + name]])) sockets += 1;
  }
  return { functions, sockets };
}

test('a live screen whose watch socket reconnects 50 times holds no more functions or sockets than after 5', async ({ browser, org }) => {
  test.setTimeout(300_000);
  const context = await signedIn(browser, org, org.admin);
  const page: Page = await context.newPage();
  // The wallboard's watch socket, accepted here (not by the server) and
  // closed by the test, as often as it likes.
  const sockets: WebSocketRoute[] = [];
  await page.routeWebSocket((url) => url.pathname === '/ws' && url.searchParams.get('watch') === 'org', (ws) => { sockets.push(ws); });
  // The backoff's waits (up to 30 s) are skipped on the page's clock.
  await page.clock.install();
  await page.goto('/ops/wallboard');
  await hydrated(page);
  const status = page.getByTestId('live-status');
  await expect(status).toContainText('live');
  expect(sockets).toHaveLength(1);

  const reconnect = async (times: number) => {
    for (let i = 0; i < times; i += 1) {
      const made = sockets.length;
      sockets[made - 1].close({ code: 1011, reason: 'socket.spec closes it' });
      await expect(status).toContainText('polling');
      // The retry is scheduled once the page has seen the close.
      await page.clock.fastForward(30_000);
      await expect.poll(() => sockets.length, { message: `reconnect ${made}` }).toBe(made + 1);
      await expect(status).toContainText('live');
    }
  };

  const cdp = await context.newCDPSession(page);
  await reconnect(5);
  const after5 = await held(cdp);
  await reconnect(45);
  const after50 = await held(cdp);
  console.log(`socket.spec: after 5 reconnects ${JSON.stringify(after5)}, after 50 ${JSON.stringify(after50)}`);
  test.info().annotations.push({ type: 'held', description: `after 5: ${JSON.stringify(after5)}; after 50: ${JSON.stringify(after50)}` });
  expect(sockets).toHaveLength(51);
  // A forgotten closure keeps two functions (its wrapper and the wrapper's
  // unref): the old watch client forgot four per reconnect (three
  // listeners and the retry timer), 351 more functions here.
  expect(after50.functions - after5.functions, 'JS functions kept by 45 more reconnects').toBeLessThan(30);
  expect(after50.sockets - after5.sockets, 'WebSockets kept by 45 more reconnects').toBeLessThanOrEqual(1);
  await context.close();
});
