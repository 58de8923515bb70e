// The split points' loader: the body of `__wasm_split.*.js`, which
// `clutchcall-site` (loader.rs) writes between an import of the main module's
// `initSync`, three constants it fills from the build (`ccShared`,
// `ccCanary`, `ccSplits`) and one `export const __wasm_split_load_<split
// point>` per split point, the names the wasm imports. Comment lines and
// indentation are dropped from the written file (every page loads it).
//
// A split point loads its chunks, then its own module, each instantiated
// with the main module's memory, table and globals; then calls the Rust
// callback the wasm passed. Chunks are fetched from the split point's bundle
// (bundle.rs) when most of them are still to come (the page's first screen,
// a panel), else one by one (a screen reached by a link, most of whose
// chunks came with the last), and one by one if the bundle failed.

// What chunks import from `__wasm_split`: the main module's exports, made
// once the main module is instantiated.
let ccSharedImports;
function ccImports() {
  if (ccSharedImports === undefined) {
    const exports = initSync(undefined, undefined);
    const shared = {};
    for (const name of ccShared) shared[name] = exports[name];
    if (ccCanary) shared[ccCanary] = ~0xdead;
    ccSharedImports = { __wasm_split: shared };
  }
  return ccSharedImports;
}

// Bundles by name: each a promise of its modules (an empty map if it failed).
const ccBundles = new Map();
// The files asked for so far.
const ccRequested = new Set();
function ccBundle(name, href) {
  if (!ccBundles.has(name)) {
    ccBundles.set(name, fetch(href)
      .then((r) => (r.ok ? r.arrayBuffer() : Promise.reject(new Error(`${href}: ${r.status}`))))
      .then(ccParts)
      .catch((e) => { console.warn('chunk bundle not loaded, fetching its chunks one by one', e); return new Map(); }));
  }
  return ccBundles.get(name);
}
// The server preloads the first screen's bundle when Leptos records the
// screen in time; take it from there.
for (const link of globalThis.document?.querySelectorAll('link[rel=preload][href*="/bundle_"]') ?? []) {
  ccBundle(/bundle_\w+/.exec(link.href)[0], link.href);
}

function ccSectionEnd(bytes, at) {
  let len = 0;
  let shift = 0;
  let b;
  do { b = bytes[at++]; len += (b & 0x7f) * 2 ** shift; shift += 7; } while (b & 0x80);
  return at + len;
}
// A bundle's modules by file name (the format: bundle.rs).
function ccParts(buf) {
  const bytes = new Uint8Array(buf);
  const headerLen = new DataView(buf).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + headerLen)));
  const entries = header.map(() => new Map());
  const ids = [...new Set(header.flatMap(([, sections]) => sections))].sort((a, b) => a - b);
  let at = 4 + headerLen;
  for (const id of ids) {
    header.forEach(([, sections], c) => {
      for (const s of sections.filter((s) => s === id)) {
        const start = at;
        at = ccSectionEnd(bytes, at);
        if (!entries[c].has(id)) entries[c].set(id, []);
        entries[c].get(id).push(bytes.subarray(start, at));
      }
    });
  }
  if (at !== bytes.length) throw new Error('chunk bundle: ' + (bytes.length - at) + ' bytes left over');
  const parts = new Map();
  header.forEach(([name, sections], c) => {
    const pieces = [Uint8Array.of(0, 0x61, 0x73, 0x6d, 1, 0, 0, 0)];
    for (const id of sections) pieces.push(Uint8Array.of(id), entries[c].get(id).shift());
    const module = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
    pieces.reduce((o, p) => (module.set(p, o), o + p.length), 0);
    parts.set(name, module);
  });
  return parts;
}

async function ccFetch(name) {
  ccRequested.add(name);
  for (const bundle of ccBundles.values()) {
    const part = (await bundle).get(name);
    if (part) return new Response(part, { headers: { 'Content-Type': 'application/wasm' } });
  }
  return fetch(new URL(`./${name}.wasm`, import.meta.url));
}

// Loads once; a failed load is forgotten, so the next call tries again (one
// transient network failure must not break a screen for the session).
function ccOnce(load) {
  let loading;
  return () => {
    if (loading === undefined) {
      const attempt = load();
      attempt.catch(() => { if (loading === attempt) loading = undefined; });
      loading = attempt;
    }
    return loading;
  };
}
// Instantiates a module with the main module's exports. A debug build's
// chunks import its canary: a chunk of another build (a cached one, after a
// deploy) fails on it, and says so.
async function ccLink(source) {
  try {
    return await WebAssembly.instantiateStreaming(source, ccImports());
  } catch (e) {
    if (ccCanary && e instanceof WebAssembly.LinkError && e.message.includes(ccCanary)) {
      console.error('wasm-split: a chunk of another build was loaded (reload the page)');
    }
    throw e;
  }
}
function ccInstantiate(name) {
  return () => ccLink(ccFetch(name));
}
// One loader per file, shared by the split points that need it.
const ccFiles = new Map();
function ccFile(name) {
  if (!ccFiles.has(name)) ccFiles.set(name, ccOnce(ccInstantiate(name)));
  return ccFiles.get(name);
}

function ccNumbers(spec) {
  const out = [];
  for (const run of spec.split(',').filter(Boolean)) {
    const [a, b = a] = run.split('-').map(Number);
    for (let i = a; i <= b; i += 1) out.push(i);
  }
  return out;
}
// The loader the wasm calls for a split point: loads it, then calls back
// `(callbackData, success)` through the table.
function ccSplit(split) {
  const [ownModule, hasBundle, chunkSpec] = ccSplits[split];
  const chunks = ccNumbers(chunkSpec).map((i) => `chunk_${i}`);
  const own = ownModule ? `split_${split}` : null;
  const names = own ? chunks.concat([own]) : chunks;
  const load = ccOnce(async () => {
    // Its own module downloads while the chunks it needs are instantiated
    // (it can only be instantiated after them).
    const ownSource = own ? ccFetch(own) : null;
    ownSource?.catch(() => {}); // reported where it is awaited
    await Promise.all(chunks.map((c) => ccFile(c)()));
    if (ownSource) await ccLink(ownSource);
  });
  return async (callbackIndex, callbackData) => {
    if (hasBundle && names.filter((n) => !ccRequested.has(n)).length * 2 > names.length) {
      ccBundle(`bundle_${split}`, new URL(`./bundle_${split}.wasm`, import.meta.url));
    }
    let success;
    try {
      await load();
      success = true;
    } catch (e) {
      console.error(e);
      success = false;
    } finally {
      ccImports().__wasm_split.__indirect_function_table.get(callbackIndex)(callbackData, success);
    }
  };
}
