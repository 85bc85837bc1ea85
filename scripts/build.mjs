/**
 * `npm run build`: bundles the server (src/server.ts and everything it imports from src/) into
 * one ES module, dist/server.js, with a source map; packages in node_modules stay imports.
 * `npm start` builds and then runs it: production starts plain JavaScript, without the tsx
 * loader's memory (~80 MB) and start-up cost (`npm run bench`). Runtime files (migrations, the
 * OpenAPI document, page assets) are read from the project root (src/project-files.ts).
 *
 * Plain JavaScript so that `npm start` needs no TypeScript loader to build.
 * `--outfile <path>` builds elsewhere , relative to the project root (tests build their own copy:
 * test/helpers/processes.ts).
 */
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));

const flag = process.argv.indexOf('--outfile');
const outfile = flag === -1 ? 'dist/server.js' : process.argv[flag + 1];
if (!outfile) {
  process.stderr.write('usage: node scripts/build.mjs [--outfile <path>]\n');
  process.exit(2);
}

await build({
  absWorkingDir: root,
  entryPoints: ['src/server.ts'],
  outfile,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  packages: 'external',
  sourcemap: true,
  logLevel: 'warning',
});
