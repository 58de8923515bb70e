// Sends each screen's wasm chunks as one file: run on the site's pkg
// directory after `cargo leptos build --split` (scripts/run.sh, test.sh and
// bench-wasm.sh do).
//
// Why: wasm-split cuts a screen into its own module plus every chunk it
// shares with other screens, so a page fetched 40–240 files, most under
// 1 KB. Each is compressed alone, which costs a quarter of their size
// (BENCHMARKS.md, fifth pass). Each chunk is a module of its own that
// imports the shell's memory and table, so several can travel in one
// response and still be instantiated apart.
//
// What it does, for every split point the server preloads for a page
// (`__wasm_split_manifest.json`: split point -> its chunk files):
// - writes `bundle_<split point>.wasm` (format below) and checks that it gives
//   back every chunk byte for byte, with the reader the browser runs;
// - points the manifest at that one file, so the page preloads it instead;
// - rewrites the chunk loader (`__wasm_split.*.js`) compactly: a split
//   point fetches its bundle (or takes the one the page preloaded) when
//   most of its chunks are still to come, and its chunks alone otherwise
//   (a screen reached by a link after another) or if the bundle failed;
// - compresses what it wrote as the build did (.gz/.br beside the originals).
// The chunk files stay: client-side navigation and the fallback fetch them.
//
// Bundle format: a little-endian u32 header length; a JSON header
// `[[chunk, [section id, ...]], ...]`; then the chunks' sections grouped by
// section id (ascending), each as the module has it (LEB128 length, body),
// chunk by chunk in header order. Like with like (code beside code, imports
// beside imports) compresses 3–5 KB better on the big screens than whole
// modules end to end.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as zlib from 'node:zlib';

const MARK = '/* chunks bundled by scripts/bundle-split.mjs */';
// The browser's bundle reader, also run here on every bundle written (and
// its section reader splits the chunks into sections).
const READER = `function ccSectionEnd(bytes, at) {
  let len = 0;
  let shift = 0;
  let b;
  do { b = bytes[at++]; len += (b & 0x7f) * 2 ** shift; shift += 7; } while (b & 0x80);
  return at + len;
}
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
`;
const RUNTIME = `${MARK}
// Bundles by name: each a promise of its chunks (an empty map if it failed).
const ccBundles = new Map();
// The chunks asked for so far.
const ccRequested = new Set();
function ccBundle(name, href) {
  if (!ccBundles.has(name)) {
    ccBundles.set(name, fetch(href)
      .then((r) => (r.ok ? r.arrayBuffer() : Promise.reject(new Error(\`\${href}: \${r.status}\`))))
      .then(ccParts)
      .catch((e) => { console.warn('chunk bundle not loaded, fetching its chunks one by one', e); return new Map(); }));
  }
  return ccBundles.get(name);
}
// The server preloads the first screen's bundle when Leptos records the
// screen in time (6 of 15 loads, BENCHMARKS.md); take it from there.
for (const link of globalThis.document?.querySelectorAll('link[rel=preload][href*="/bundle_"]') ?? []) {
  ccBundle(/bundle_\\w+/.exec(link.href)[0], link.href);
}
${READER}async function ccFetch(name, url) {
  ccRequested.add(name);
  for (const bundle of ccBundles.values()) {
    const part = (await bundle).get(name);
    if (part) return new Response(part, { headers: { 'Content-Type': 'application/wasm' } });
  }
  return fetch(url);
}
`;
const { ccParts, ccSectionEnd } = new Function(`${READER}return { ccParts, ccSectionEnd };`)();

function fail(message) {
  console.error(`bundle-split: ${message}`);
  process.exit(1);
}

const pkg = process.argv[2];
if (!pkg) fail('usage: node scripts/bundle-split.mjs <site>/pkg');
const manifestPath = path.join(pkg, '__wasm_split_manifest.json');
const loaderName = fs.readdirSync(pkg).find((f) => /^__wasm_split\..*\.js$/.test(f));
if (!fs.existsSync(manifestPath) || !loaderName) fail(`no split manifest or loader in ${pkg} (built without --split?)`);
const loaderPath = path.join(pkg, loaderName);
const original = fs.readFileSync(loaderPath, 'utf8');
if (original.includes(`\n${MARK}\n`)) {
  // cargo-leptos left the last build's output (the wasm had not changed).
  console.log('bundle-split: already bundled');
  process.exit(0);
}

// Compress like the build did: only where it wrote .gz/.br for the shell.
const shell = fs.readdirSync(pkg).find((f) => f.endsWith('.wasm') && !/^(chunk_|split_|bundle_)/.test(f));
const compress = {
  gz: fs.existsSync(path.join(pkg, `${shell}.gz`)),
  br: fs.existsSync(path.join(pkg, `${shell}.br`)),
};
function write(file, bytes) {
  fs.writeFileSync(file, bytes);
  if (compress.gz) fs.writeFileSync(`${file}.gz`, zlib.gzipSync(bytes, { level: 9 }));
  if (compress.br) fs.writeFileSync(`${file}.br`, zlib.brotliCompressSync(bytes, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11 } }));
}

/** A module's sections: [id, the section as stored after its id byte]. */
function sections(name, module) {
  if (!module.subarray(0, 8).equals(Buffer.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]))) fail(`${name}: not a wasm module`);
  const out = [];
  for (let at = 8; at < module.length; ) {
    const id = module[at];
    const start = at + 1;
    at = ccSectionEnd(module, start);
    if (at > module.length) fail(`${name}: a section runs past the end`);
    out.push([id, module.subarray(start, at)]);
  }
  return out;
}

function bundle(chunks) {
  // Smallest first: similar small chunks sit within gzip's 32 KB window.
  const modules = chunks
    .map((name) => ({ name, bytes: fs.readFileSync(path.join(pkg, `${name}.wasm`)) }))
    .sort((a, b) => a.bytes.length - b.bytes.length || (a.name < b.name ? -1 : 1))
    .map((m) => ({ ...m, sections: sections(m.name, m.bytes) }));
  const header = Buffer.from(JSON.stringify(modules.map((m) => [m.name, m.sections.map(([id]) => id)])));
  const ids = [...new Set(modules.flatMap((m) => m.sections.map(([id]) => id)))].sort((a, b) => a - b);
  const headerLen = Buffer.alloc(4);
  headerLen.writeUInt32LE(header.length);
  const bytes = Buffer.concat([
    headerLen,
    header,
    ...ids.flatMap((id) => modules.flatMap((m) => m.sections.filter(([s]) => s === id).map(([, body]) => body))),
  ]);
  const parts = ccParts(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
  for (const m of modules) {
    if (!Buffer.from(parts.get(m.name) ?? []).equals(m.bytes)) fail(`a bundle does not give ${m.name} back as it was`);
  }
  return bytes;
}

// The loader as the split tool writes it: each of ~500 chunks has a comment
// naming the split points that use it and a fetcher of its own, and each
// split point lists its chunks one by one (~10 KB gzip, on every page).
// Read into (chunk -> file) and (split point -> file, chunks) and written
// again compactly; anything not understood stops the build.
const runtimeEnd = original.search(/^(\/\* |const __chunk_|export const )/m);
if (runtimeEnd < 0) fail(`${loaderName}: no chunk loaders found (has the split tool's loader changed?)`);
const head = original.slice(0, runtimeEnd);
// A debug build wraps each instantiation in `debugWrap` (its own checks).
const FETCHER = String.raw`(\(\) => \{\n    const src = fetch\(new URL\("\./(\w+)\.wasm", import\.meta\.url\)\);\n    return async \(imports\) => (\w*)\(WebAssembly\.instantiateStreaming\(src, imports\)\);\n\}\n|\(\) => async \(_imp\) => \(\{\}\))`;
const CHUNK = new RegExp(String.raw`^const __chunk_(\d+) = makeLoad\(${FETCHER}, \[\]\);\n`);
const SPLIT = new RegExp(String.raw`^export const (__wasm_split_load_\w+) = wrapAsyncCb\(makeLoad\(${FETCHER}, \[([\w, ]*)\]\)\);\n`);
const emptyChunks = [];
const splits = [];
const wraps = new Set();
for (let rest = original.slice(runtimeEnd).replace(/^\/\* [^*]* \*\/\n/gm, ''); rest.length > 0; ) {
  let m;
  if ((m = CHUNK.exec(rest))) {
    const [all, index, , file, wrap] = m;
    if (file === undefined) emptyChunks.push(Number(index));
    else if (file !== `chunk_${index}`) fail(`${loaderName}: chunk ${index} is in ${file}, not chunk_${index}`);
    else wraps.add(wrap);
    rest = rest.slice(all.length);
  } else if ((m = SPLIT.exec(rest))) {
    const [all, loaderFn, , file, wrap, deps] = m;
    if (file !== undefined) wraps.add(wrap);
    const chunks = deps.split(',').map((d) => d.trim()).filter(Boolean).map((d) => {
      const n = /^__chunk_(\d+)$/.exec(d);
      if (!n) fail(`${loaderName}: ${loaderFn} depends on ${d}, not a chunk`);
      return Number(n[1]);
    });
    splits.push({ loaderFn, file, chunks });
    rest = rest.slice(all.length);
  } else {
    fail(`${loaderName}: cannot read the loader at: ${rest.slice(0, 200)}`);
  }
}
if (wraps.size > 1) fail(`${loaderName}: chunks are instantiated in ${wraps.size} different ways`);
const wrap = [...wraps][0] ?? '';

// Every split point with more than one file gets its bundle.
for (const f of fs.readdirSync(pkg)) if (f.startsWith('bundle_')) fs.unlinkSync(path.join(pkg, f));
const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
const bundled = new Set();
let bundles = 0;
let files = 0;
for (const [split, chunks] of Object.entries(manifest)) {
  if (chunks.length < 2) continue;
  const name = `bundle_${split}`;
  write(path.join(pkg, `${name}.wasm`), bundle(chunks));
  manifest[split] = [name];
  bundled.add(split);
  bundles += 1;
  files += chunks.length;
}

/** "3-7,9": runs of chunk numbers. */
function ranges(numbers) {
  const runs = [];
  for (const n of [...new Set(numbers)].sort((a, b) => a - b)) {
    const last = runs[runs.length - 1];
    if (last && last[1] === n - 1) last[1] = n;
    else runs.push([n, n]);
  }
  return runs.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(',');
}
const LOADERS = `// One loader per chunk, made on first use and shared by the split points
// that need it.
function ccFile(name) {
  return () => {
    const src = ccFetch(name, new URL(\`./\${name}.wasm\`, import.meta.url));
    return async (imports) => ${wrap}(WebAssembly.instantiateStreaming(src, imports));
  };
}
const ccNothing = () => async () => ({});
function ccNumbers(spec) {
  const out = [];
  for (const run of spec.split(',').filter(Boolean)) {
    const [a, b = a] = run.split('-').map(Number);
    for (let i = a; i <= b; i += 1) out.push(i);
  }
  return out;
}
const ccEmpty = new Set(ccNumbers("${ranges(emptyChunks)}"));
const ccChunks = new Map();
function ccChunk(i) {
  if (!ccChunks.has(i)) ccChunks.set(i, makeLoad(ccEmpty.has(i) ? ccNothing : ccFile(\`chunk_\${i}\`), []));
  return ccChunks.get(i);
}
// A split point fetches its bundle when most of its chunks are still to
// come (the page's first screen, a panel), else its missing chunks one by
// one (a screen reached by a link, most of whose chunks came with the last).
function ccSplit(split, hasFile, hasBundle, spec) {
  const file = hasFile ? \`split_\${split}\` : null;
  const numbers = ccNumbers(spec);
  const names = numbers.filter((i) => !ccEmpty.has(i)).map((i) => \`chunk_\${i}\`).concat(file ? [file] : []);
  const load = makeLoad(file ? ccFile(file) : ccNothing, numbers.map(ccChunk));
  return () => {
    if (hasBundle && names.filter((n) => !ccRequested.has(n)).length * 2 > names.length) {
      ccBundle(\`bundle_\${split}\`, new URL(\`./bundle_\${split}.wasm\`, import.meta.url));
    }
    return load();
  };
}
`;
const splitLines = splits.map(({ loaderFn, file, chunks }) => {
  const split = loaderFn.slice('__wasm_split_load_'.length);
  if (file && file !== `split_${split}`) fail(`${loaderName}: ${loaderFn} loads ${file}, not split_${split}`);
  return `export const ${loaderFn} = wrapAsyncCb(ccSplit("${split}", ${file ? 1 : 0}, ${bundled.has(split) ? 1 : 0}, "${ranges(chunks)}"));\n`;
});
const unbundled = [...bundled].filter((split) => !splits.some((s) => s.loaderFn === `__wasm_split_load_${split}`));
if (unbundled.length) fail(`${loaderName}: no loader for the split points ${unbundled.join(', ')}`);
const firstImportEnd = head.indexOf('\n', head.indexOf('import ')) + 1;
// Every page loads this file: without its comment lines and indentation
// (none of its strings spans lines) it is half a KB lighter.
const loader = `${head.slice(0, firstImportEnd)}${RUNTIME}${head.slice(firstImportEnd)}${LOADERS}${splitLines.join('')}`
  .replace(/^[ \t]*\/\/.*\n/gm, '')
  .replace(/^[ \t]+/gm, '');

write(loaderPath, Buffer.from(loader));
write(manifestPath, Buffer.from(JSON.stringify(manifest, null, 2)));
console.log(`bundle-split: ${files} chunk files of ${bundles} split points in ${bundles} bundles (each checked); ${loaderName} rewritten for ${splits.length} split points`);
