/**
 * The mock server for integrators (`npm run mock`, scripts/mock.ts) answers the SDK with the
 * document's examples and validates requests like the real server. Run once per CI run by
 * .ci/run ("mock server"), not by `npm test` (the file name is outside the test glob):
 *   npx tap test/mock/mock-server.ci.ts
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import {
  apiKeyAuth,
  createMarketplaceClient,
  MarketplaceApiError,
  type ListingCreate,
} from '../../sdk/src/index.ts';
import { waitUntil } from '../helpers/wait.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const port = await new Promise<number>((resolve, reject) => {
  const probe = createServer();
  probe.once('error', reject);
  probe.listen(0, '127.0.0.1', () => {
    const address = probe.address();
    probe.close(() =>
      address && typeof address === 'object' ? resolve(address.port) : reject(new Error('no port')),
    );
  });
});
const baseUrl = `http://127.0.0.1:${port}`;

// The documented command, minus npm: `npm run mock -- --port N` runs exactly this. Its own
// process group, so teardown stops the script and Prism together, by id.
const mock = spawn(
  process.execPath,
  ['--import', 'tsx', 'scripts/mock.ts', '--port', String(port)],
  {
    cwd: root,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  },
);
let log = '';
mock.stdout.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
mock.stderr.setEncoding('utf8').on('data', (chunk: string) => (log += chunk));
const exited = new Promise<number | null>((resolve) => mock.on('exit', resolve));
t.teardown(async () => {
  if (mock.exitCode === null && mock.pid) process.kill(-mock.pid, 'SIGTERM');
  await exited;
});

await waitUntil(
  'the mock server to answer',
  async () => {
    if (mock.exitCode !== null) throw new Error(`the mock server exited:\n${log}`);
    return fetch(`${baseUrl}/api/v1/health`).then(
      (r) => r.ok,
      () => false,
    );
  },
  { timeoutMs: 90_000, everyMs: 250 },
).catch((err: Error) => {
  throw new Error(`the mock server did not start (${err.message}):\n${log}`);
});

const key = `svc_sandbox_${'m'.repeat(40)}`;
const anonymous = createMarketplaceClient({ baseUrl });
const sandbox = createMarketplaceClient({ baseUrl, auth: apiKeyAuth(key) });

t.test('examples come back typed through the SDK', async (t) => {
  const page = await anonymous.listings.list({ limit: 2 });
  t.equal(page.data.length, 2);
  t.equal(
    page.data[0]!.title,
    'Patagonia Better Sweater fleece',
    'the first example of GET /api/v1/listings',
  );
  t.equal(page.meta.version, 'v1');
  const created = await sandbox.listings.create(
    { title: 'Vintage denim jacket', price_cents: 4950 },
    { idempotencyKey: 'inv-000482' },
  );
  t.equal(created.data.external_id, 'inv-000482');
  const preferred = createMarketplaceClient({
    baseUrl,
    auth: apiKeyAuth(key),
    headers: { prefer: 'code=201' },
  });
  t.equal(
    (await preferred.listings.create({ title: 'Vintage denim jacket', price_cents: 4950 })).created,
    true,
    'Prefer: code=201',
  );
});

t.test('requests are checked against the document', async (t) => {
  const noKey = await anonymous.listings
    .create({ title: 'No credential', price_cents: 100 })
    .catch((e: unknown) => e);
  t.ok(noKey instanceof MarketplaceApiError);
  t.equal((noKey as MarketplaceApiError).status, 401);
  t.equal((noKey as MarketplaceApiError).code, 'unauthorized');
  const invalid = await sandbox.listings
    .create({ title: 5 } as unknown as ListingCreate)
    .catch((e: unknown) => e);
  t.equal((invalid as MarketplaceApiError).status, 400);
  t.equal((invalid as MarketplaceApiError).code, 'validation_error');
});
