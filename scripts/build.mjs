/**
 * `npm run build`: bundles the server (src/server.ts, everything it imports from src/ and the
 * packages it always loads) into one ES module, dist/server.js, with a source map.
 * `npm start` builds and then runs it: production starts plain JavaScript, without the tsx
 * loader's memory (~80 MB) and start-up cost (`npm run bench`). Runtime files (migrations, the
 * OpenAPI document, page assets) are read from the project root (src/project-files.ts).
 *
 * The packages are bundled too: resolving and reading some 400 files of node_modules was most of
 * a start on PostgreSQL (0.63 s to the first response, 0.47 s bundled, on the same machine in
 * the same minute: bench/LOG.md). A few stay imports from node_modules, see EXTERNAL.
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

/**
 * Packages that stay imports: those that read their own files by path (a bundle would move
 * them), and those the server loads only when it is configured to (importing them from
 * node_modules then costs nothing on a start that does not).
 */
const EXTERNAL = [
  // The embedded database: its WebAssembly and data files sit beside its module.
  '@electric-sql/pglite',
  // /docs: reads its page script from its own directory, on the first request (docs-plugin.ts).
  '@scalar/fastify-api-reference',
  // Its stores are loaded by path (src/lib/rate-limit-store.ts): one copy of the plugin.
  '@fastify/rate-limit',
  // Only with METRICS_TOKEN and REDIS_URL (src/plugins/metrics.ts, rate-limit.ts).
  'prom-client',
  'ioredis',
];

await build({
  absWorkingDir: root,
  entryPoints: ['src/server.ts'],
  outfile,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: EXTERNAL,
  // The bundled CommonJS packages call require() for Node's own modules.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
  // Stack traces name the source files and lines; the sources themselves are in the checkout.
  sourcemap: true,
  sourcesContent: false,
  logLevel: 'warning',
});
