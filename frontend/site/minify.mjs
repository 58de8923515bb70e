// Minifies the site's scripts in place (release builds): the bindings
// wasm-bindgen wrote and the chunk loader. Every page loads both before it
// is interactive; minified they weigh ~5 KiB gzip less, which the heaviest
// screen needs to stay in its 350 KiB budget (BENCHMARKS.md).
// Run by clutchcall-site (optimize.rs): node minify.mjs <terser's main> <file>...
import * as fs from 'node:fs';
import { pathToFileURL } from 'node:url';

const [terserPath, ...files] = process.argv.slice(2);
if (!terserPath || files.length === 0) {
  console.error('usage: node minify.mjs <terser main> <file>...');
  process.exit(2);
}
const { minify } = await import(pathToFileURL(terserPath).href);
for (const file of files) {
  const code = fs.readFileSync(file, 'utf8');
  // ES modules: their own top-level names may be shortened, their exports
  // and every property name (the wasm's imports are properties) stay.
  const out = await minify(code, { module: true, compress: true, mangle: true });
  fs.writeFileSync(file, out.code);
  console.log(`minify.mjs: ${file.split('/').pop()} ${code.length} -> ${out.code.length} bytes`);
}
