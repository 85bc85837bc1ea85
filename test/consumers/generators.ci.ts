/**
 * The document with the client generators integrators use (docs/api.md, "Client generators"):
 * @hey-api/openapi-ts and openapi-typescript-codegen, at the versions pinned in package.json,
 * generate clients from openapi/openapi.yaml in a temporary directory outside the repository;
 * each must generate without a warning, type-check with `tsc --strict`, type the listing
 * operations without `any`, and a driver using it creates a listing, reads a page and pages a
 * search (q, the repeatable tag and condition, sort=price_asc, an opaque cursor) from a running
 * server. Slow, so .ci/run runs it once ("client generators"):
 *   npx tap test/consumers/generators.ci.ts
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import t, { type Test } from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { runCommand as run, said, type Ran } from '../helpers/processes.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const document = path.join(root, 'openapi/openapi.yaml');
/**
 * A package's own executable, by its package.json "bin" (node_modules/.bin/openapi is claimed by
 * both openapi-typescript-codegen and @redocly/cli; which one wins depends on install order).
 */
function bin(pkg: string, name: string): string {
  const manifest = JSON.parse(
    readFileSync(path.join(root, 'node_modules', pkg, 'package.json'), 'utf8'),
  ) as { bin: Record<string, string> };
  return path.join(root, 'node_modules', pkg, manifest.bin[name]!);
}
const tsc = path.join(root, 'node_modules/typescript/bin/tsc');

const pinned = (name: string) =>
  (
    JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
      devDependencies: Record<string, string>;
    }
  ).devDependencies[name];

/**
 * The code lines (not comments) of the generated .ts files under `dir` whose path matches
 * `which` that type something as `any` or with an `unknown` index signature, as "file: line".
 */
function looseTypes(dir: string, which: RegExp): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && which.test(file))
    .sort()
    .flatMap((file) =>
      readFileSync(path.join(dir, file), 'utf8')
        .split('\n')
        .filter((line) => !/^\s*(\*|\/\/|\/\*)/.test(line))
        .filter((line) => /\bany\b(?![-\w])|\[key: string\]: unknown/.test(line))
        .map((line) => `${file}: ${line.trim()}`),
    );
}

const compilerOptions = {
  target: 'ES2022',
  lib: ['ES2022', 'DOM'],
  strict: true,
  noUncheckedIndexedAccess: true,
  noEmit: true,
  skipLibCheck: false,
  types: ['node'],
  typeRoots: [path.join(root, 'node_modules/@types')],
};

t.test('clients from other generators talk to the server', async (t) => {
  const work = mkdtempSync(path.join(tmpdir(), 'generators-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  writeFileSync(path.join(work, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
  const write = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(work, file)), { recursive: true });
    writeFileSync(path.join(work, file), text);
  };

  const { app, baseUrl } = await listeningApp(t);
  const developer = await createDeveloper(app);
  const env = {
    MARKETPLACE_URL: baseUrl,
    MARKETPLACE_KEY: await createKey(app, developer, 'sandbox'),
  };

  // What the drivers search for: `q=denim jacket&tag=denim&tag=vintage&condition=like_new&
  // condition=good&sort=price_asc`, one listing a page. Three match; each of the others misses
  // by one thing (the sandbox key sees its owner's sandbox listings, drafts included).
  const seeds: [string, number, string, string[]][] = [
    ['Denim jacket, cropped', 4500, 'like_new', ['denim', 'vintage']],
    ['Denim jacket, faded', 3500, 'excellent', ['denim', 'vintage']],
    ['Denim jacket, oversized', 2500, 'good', ['denim', 'vintage']],
    ['Denim skirt', 1500, 'like_new', ['denim', 'vintage']],
    ['Denim jacket, raw', 3000, 'like_new', ['denim']],
    ['Denim jacket, boxy', 5500, 'like_new', ['vintage', 'denim', 'blue']],
  ];
  for (const [title, price_cents, condition, tags] of seeds) {
    const seeded = await app.inject({
      method: 'POST',
      url: '/api/v1/listings',
      headers: { authorization: `Bearer ${env.MARKETPLACE_KEY}` },
      payload: { title, price_cents, condition, tags },
    });
    t.equal(seeded.statusCode, 201, seeded.body);
  }
  const FOUND = 'Denim jacket, oversized 2500|Denim jacket, cropped 4500|Denim jacket, boxy 5500';

  /**
   * The driver's lines: the created listing's id, the page's size, then the search's matches
   * over its pages (one a page: the cursor came back with the same filters each time).
   */
  function drove(t: Test, ran: Ran, label: string) {
    t.equal(ran.code, 0, `${label} exits 0: ${said(ran)}`);
    t.match(ran.stdout, /^created [0-9a-f-]{36}$/m, `${label}: POST /api/v1/listings`);
    t.match(ran.stdout, /^page [12] next_cursor=\S+$/m, `${label}: GET /api/v1/listings`);
    t.match(
      ran.stdout,
      new RegExp(`^search 3 pages: ${FOUND}$`, 'm'),
      `${label}: GET /api/v1/listings?q=…&tag=…&tag=…&condition=…&sort=price_asc, paged`,
    );
  }

  await t.test(`@hey-api/openapi-ts ${pinned('@hey-api/openapi-ts')} (fetch client)`, async (t) => {
    write(
      'openapi-ts.config.mjs',
      `export default ${JSON.stringify({
        input: document,
        // ESM in Node (moduleResolution nodenext) needs .js specifiers.
        output: { path: 'hey', module: { extension: '.js' } },
        plugins: ['@hey-api/typescript', '@hey-api/sdk', '@hey-api/client-fetch'],
      })};\n`,
    );
    const generated = await run(
      process.execPath,
      [bin('@hey-api/openapi-ts', 'openapi-ts'), '-f', 'openapi-ts.config.mjs', '--no-log-file'],
      work,
    );
    t.equal(generated.code, 0, said(generated));
    t.notMatch(said(generated), /warn|error|⚠/i, 'no warning');
    // Free-form objects on purpose: the served OpenAPI document's `info` and `paths`, and an
    // audit entry's `details` (what changed, by action: roles, scopes, environment, a URL).
    t.same(
      looseTypes(path.join(work, 'hey'), /^types\.gen\.ts$/),
      [
        'types.gen.ts: [key: string]: unknown;',
        'types.gen.ts: [key: string]: unknown;',
        'types.gen.ts: [key: string]: unknown;',
      ],
      'no `any` but the free-form document',
    );
    write(
      'hey-driver.ts',
      `import { client } from './hey/client.gen.js';
import { createListing, listListings } from './hey/index.js';

// The key answers bearer schemes only (it must never go out as HTTP Basic on /oauth/*).
client.setConfig({
  baseUrl: process.env.MARKETPLACE_URL ?? '',
  auth: (scheme) => (scheme.scheme === 'bearer' ? process.env.MARKETPLACE_KEY : undefined),
});
const created = await createListing({
  body: { title: 'Denim jacket', price_dollars: 49.5 },
  throwOnError: true,
});
console.log('created', created.data.data.id);
const page = await listListings({ query: { limit: 2 }, throwOnError: true });
console.log('page', page.data.data.length, \`next_cursor=\${page.data.meta.next_cursor}\`);

// A search, one match a page: arrays go out as repeated parameters (tag=denim&tag=vintage).
const found: string[] = [];
let cursor: string | undefined;
let pages = 0;
do {
  const { data } = await listListings({
    query: {
      q: 'denim jacket',
      tag: ['denim', 'vintage'],
      condition: ['like_new', 'good'],
      sort: 'price_asc',
      limit: 1,
      ...(cursor ? { cursor } : {}),
    },
    throwOnError: true,
  });
  pages += 1;
  found.push(...data.data.map((l) => \`\${l.title} \${l.price_cents}\`));
  cursor = data.meta.next_cursor ?? undefined;
} while (cursor && pages < 10);
console.log(\`search \${pages} pages: \${found.join('|')}\`);
`,
    );
    write(
      'tsconfig.hey.json',
      JSON.stringify({
        compilerOptions: {
          ...compilerOptions,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          noEmit: false,
          outDir: 'out-hey',
        },
        include: ['hey-driver.ts', 'hey/**/*.ts'],
      }),
    );
    const checked = await run(process.execPath, [tsc, '-p', 'tsconfig.hey.json'], work);
    t.equal(checked.code, 0, `tsc --strict (nodenext): ${said(checked)}`);
    drove(t, await run(process.execPath, ['out-hey/hey-driver.js'], work, env), 'hey-api');
  });

  await t.test(
    `openapi-typescript-codegen ${pinned('openapi-typescript-codegen')} (fetch)`,
    async (t) => {
      // --useUnionTypes: string unions instead of TypeScript enums, so literals type-check.
      const generated = await run(
        process.execPath,
        [
          bin('openapi-typescript-codegen', 'openapi'),
          ...['--input', document, '--output', 'codegen', '--client', 'fetch', '--useUnionTypes'],
        ],
        work,
      );
      t.equal(generated.code, 0, said(generated));
      t.equal(said(generated), '', 'prints nothing: no warning');
      t.same(
        looseTypes(path.join(work, 'codegen'), /^(models|services)\//),
        [
          'models/AuditEvent.ts: details: Record<string, any>;',
          'models/OpenApiDocument.ts: info: Record<string, any>;',
          'models/OpenApiDocument.ts: paths: Record<string, any>;',
        ],
        'no `any` but the free-form document',
      );
      write(
        'codegen-driver.ts',
        `import { ListingsService, OpenAPI } from './codegen/index';

OpenAPI.BASE = process.env.MARKETPLACE_URL ?? '';
OpenAPI.TOKEN = process.env.MARKETPLACE_KEY;
const created = await ListingsService.createListing({ title: 'Denim jacket', price_dollars: 49.5 });
console.log('created', created.data.id);
const page = await ListingsService.listListings(2);
console.log('page', page.data.length, \`next_cursor=\${page.meta.next_cursor}\`);

// A search, one match a page. Positional: limit, cursor, If-None-Match, q, category,
// condition, tag, then brand … sort; arrays go out as repeated parameters.
const found: string[] = [];
let cursor: string | undefined;
let pages = 0;
do {
  const result = await ListingsService.listListings(
    1,
    cursor,
    undefined,
    'denim jacket',
    undefined,
    ['like_new', 'good'],
    ['denim', 'vintage'],
    undefined,
    undefined,
    undefined,
    undefined,
    undefined,
    undefined,
    undefined,
    undefined,
    'price_asc',
  );
  pages += 1;
  found.push(...result.data.map((l) => \`\${l.title} \${l.price_cents}\`));
  cursor = result.meta.next_cursor ?? undefined;
} while (cursor && pages < 10);
console.log(\`search \${pages} pages: \${found.join('|')}\`);
`,
      );
      // Its imports carry no extensions: a bundler's resolution, so tsc checks it that way and
      // esbuild bundles it, as an application would.
      write(
        'tsconfig.codegen.json',
        JSON.stringify({
          compilerOptions: { ...compilerOptions, module: 'esnext', moduleResolution: 'bundler' },
          include: ['codegen-driver.ts', 'codegen/**/*.ts'],
        }),
      );
      const checked = await run(process.execPath, [tsc, '-p', 'tsconfig.codegen.json'], work);
      t.equal(checked.code, 0, `tsc --strict (bundler): ${said(checked)}`);
      const bundled = await build({
        entryPoints: [path.join(work, 'codegen-driver.ts')],
        bundle: true,
        platform: 'node',
        format: 'esm',
        outfile: path.join(work, 'out-codegen/driver.mjs'),
        logLevel: 'silent',
      });
      t.same(bundled.errors, [], 'esbuild bundles it');
      drove(t, await run(process.execPath, ['out-codegen/driver.mjs'], work, env), 'codegen');
    },
  );
});
