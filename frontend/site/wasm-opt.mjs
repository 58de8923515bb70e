// Optimises every .wasm in a directory for size, in one process: what
// `wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int
// --strip-producers --strip-target-features` does to each file (byte for
// byte the same output, checked on chunks of both builds), without
// starting Node and compiling binaryen once per file (a release build has
// thousands of chunks: 11 of its 14 minutes went to that).
// Stripping the `producers` and `target_features` custom sections matters:
// wasm-opt otherwise keeps them in every chunk, ~200 bytes a file that
// compress badly alone.
// Run by clutchcall-site (optimize.rs): node wasm-opt.mjs <binaryen/index.js> <dir>
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

const [binaryenPath, dir] = process.argv.slice(2);
if (!binaryenPath || !dir) {
  console.error('usage: node wasm-opt.mjs <binaryen/index.js> <dir>');
  process.exit(2);
}
const { default: binaryen } = await import(pathToFileURL(binaryenPath).href);
const F = binaryen.Features;
binaryen.setOptimizeLevel(2); // -Oz: optimise at level 2 ...
binaryen.setShrinkLevel(2); // ... shrinking as hard as it goes
binaryen.setDebugInfo(false); // no name section, as without -g
// The CLI writes its output through Stack IR, optimised, at -O2 and above
// or when shrinking; without these two the output is up to 0.3% larger.
binaryen.setGenerateStackIR(true);
binaryen.setOptimizeStackIR(true);

let before = 0;
let after = 0;
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.wasm'));
for (const file of files) {
  const at = path.join(dir, file);
  const input = fs.readFileSync(at);
  const module = binaryen.readBinary(input);
  // The features the module declares, and the two the CLI was asked for.
  module.setFeatures(module.getFeatures() | F.BulkMemory | F.BulkMemoryOpt | F.NontrappingFPToInt);
  module.optimize();
  module.runPasses(['strip-producers', 'strip-target-features']);
  const output = module.emitBinary();
  module.dispose();
  fs.writeFileSync(at, output);
  before += input.length;
  after += output.length;
}
console.log(`wasm-opt.mjs: ${files.length} modules, ${before} -> ${after} bytes`);
