// Builds dist/esm (ES modules) and dist/cjs (CommonJS), each with its type declarations, from
// src/ with the TypeScript compiler: `npm run build` (npm pack runs it as prepack).
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const sdk = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(path.join(sdk, 'dist'), { recursive: true, force: true });
// tsconfig.cli.json: the `listen` command (bin), Node.js only.
for (const project of ['tsconfig.json', 'tsconfig.cjs.json', 'tsconfig.cli.json']) {
  execFileSync(process.execPath, [tsc, '-p', project], { cwd: sdk, stdio: 'inherit' });
}
// The package is "type": "module"; this marks dist/cjs's .js and .d.ts files as CommonJS.
mkdirSync(path.join(sdk, 'dist/cjs'), { recursive: true });
writeFileSync(path.join(sdk, 'dist/cjs/package.json'), '{ "type": "commonjs" }\n');
