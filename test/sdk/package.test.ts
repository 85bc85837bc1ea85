/**
 * The SDK as a consumer gets it (package.json "exports" "./sdk", built by `npm run build:sdk`,
 * shipped by `npm pack`): a project outside this repository, with the package linked into its
 * node_modules, type-checks against it under strict settings and runs on plain Node (no tsx)
 * against the running server.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function run(
  command: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const npm = (args: string[]) => run('npm', [...args, '--no-update-notifier'], root);

const build = await npm(['run', '--silent', 'build:sdk']);
t.equal(build.code, 0, `npm run build:sdk: ${build.stdout}${build.stderr}`);

t.test('npm pack ships the built SDK and the document, not the server', async (t) => {
  const packed = await npm(['pack', '--dry-run', '--json', '--ignore-scripts']);
  t.equal(packed.code, 0, packed.stderr);
  const [info] = JSON.parse(packed.stdout) as [{ files: { path: string }[] }];
  const files = info.files.map((f) => f.path);
  for (const expected of [
    'dist/sdk/index.js',
    'dist/sdk/index.d.ts',
    'dist/generated/openapi-types.d.ts',
    'dist/webhooks/verify.js',
    'openapi/openapi.yaml',
    'CHANGELOG.md',
  ]) {
    t.ok(files.includes(expected), `ships ${expected}`);
  }
  t.notOk(
    files.some((f) => f.startsWith('src/')),
    'no server source',
  );
});

// A consumer project of its own, with this package in node_modules as `npm install` puts it.
const consumer = mkdtempSync(path.join(tmpdir(), 'sdk-consumer-'));
t.teardown(() => rmSync(consumer, { recursive: true, force: true }));
mkdirSync(path.join(consumer, 'node_modules'));
symlinkSync(root, path.join(consumer, 'node_modules/marketplace-listings-api'), 'dir');
writeFileSync(
  path.join(consumer, 'package.json'),
  JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
);

// The docs/sdk.md example, as a consumer writes it.
const program = `
import { apiKeyAuth, createMarketplaceClient, MarketplaceApiError } from 'marketplace-listings-api/sdk';

const api = createMarketplaceClient({ baseUrl: process.env.API_BASE_URL, auth: apiKeyAuth(process.env.API_KEY) });
const { data: listing, created } = await api.listings.create(
  { title: 'Vintage denim jacket', price_dollars: 49.5, condition: 'excellent', tags: ['denim'] },
  { idempotencyKey: 'jacket-42' },
);
const titles = [];
for await (const item of api.listings.iterate({ limit: 1 })) titles.push(item.title);
let code = null;
try {
  await api.listings.get('00000000-0000-4000-8000-000000000000');
} catch (error) {
  if (error instanceof MarketplaceApiError) code = error.code;
}
console.log(JSON.stringify({ created, price_cents: listing.price_cents, titles, code }));
`;

t.test(
  'types: strict TypeScript in the consumer resolves the exports and catches misuse',
  async (t) => {
    writeFileSync(
      path.join(consumer, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
          typeRoots: [path.join(root, 'node_modules/@types')],
        },
        files: ['main.ts', 'misuse.ts'],
      }),
    );
    writeFileSync(
      path.join(consumer, 'main.ts'),
      `declare const process: { env: Record<string, string> };\n${program}`,
    );
    writeFileSync(
      path.join(consumer, 'misuse.ts'),
      `import { createMarketplaceClient, type Listing } from 'marketplace-listings-api/sdk';
const api = createMarketplaceClient({ baseUrl: 'http://127.0.0.1:3000' });
const page = await api.listings.list({ limit: 10 });
const first: Listing | undefined = page.data[0];
// @ts-expect-error price_cents is a number
const price: string = first!.price_cents;
// @ts-expect-error title is required
await api.listings.create({ price_cents: 100 });
// @ts-expect-error not a path of the document
await api.raw.GET('/api/v1/listing');
// @ts-expect-error status is an enum
await api.listings.update('id', { status: 'sold' });
export { price };
`,
    );
    const tsc = await run(
      process.execPath,
      [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', consumer],
      consumer,
    );
    t.equal(tsc.code, 0, `tsc: ${tsc.stdout}${tsc.stderr}`);
  },
);

t.test('runtime: plain Node imports the built package and talks to the server', async (t) => {
  const { app, baseUrl } = await listeningApp(t);
  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'sandbox');
  writeFileSync(path.join(consumer, 'main.mjs'), program);
  // No --import tsx: what an integrator's Node runs.
  const result = await run(process.execPath, ['main.mjs'], consumer, {
    API_BASE_URL: baseUrl,
    API_KEY: key,
    NODE_OPTIONS: '',
  });
  t.equal(result.code, 0, result.stderr);
  t.same(JSON.parse(result.stdout), {
    created: true,
    price_cents: 4950,
    titles: ['Vintage denim jacket'],
    code: 'not_found',
  });
});
