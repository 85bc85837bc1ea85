/**
 * The SDK package as a consumer gets it: `npm pack -w sdk`, then fresh projects in a temporary
 * directory outside the repository `npm install` the tarball (install scripts on) from the
 * registry like any package, and against a running server:
 *   - plain JavaScript: sdk/README.md's client example (create, page, search, a typed error) as
 *     an ES module and as CommonJS, and a webhook check in each;
 *   - TypeScript with `tsc --strict`: the README's client and receiver examples, as written,
 *     under moduleResolution node16 and nodenext (as .mts and .cts), node10, and bundler (bundled
 *     by esbuild for the browser platform, which fails on any Node-only import), each compiled
 *     program run; plus misuse the types must refuse.
 * Slow (npm installs), so .ci/run runs it once ("SDK consumers"), not `npm test`:
 *   npx tap test/consumers/sdk-package.ci.ts
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import t, { type Test } from 'tap';
import { currentBlock, sizeBlock } from '../../scripts/sdk-size.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { runCommand as run, said, type Ran } from '../helpers/processes.ts';
import { webhookHeaders } from '../../src/webhooks/signing.ts';
import { createEndpoint, startReceiver } from '../webhooks/support.ts';
import { waitUntil } from '../helpers/wait.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const version = (name: string) =>
  (
    JSON.parse(readFileSync(path.join(root, 'node_modules', name, 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;

/** The fenced block after `<!-- example: NAME ...-->` in sdk/README.md, as written there. */
function example(name: string): string {
  const readme = readFileSync(path.join(root, 'sdk/README.md'), 'utf8');
  const found = new RegExp(
    `<!-- example: ${name.replace('.', '\\.')}[^>]*-->\\n\`\`\`${path.extname(name).slice(1)}\\n([\\s\\S]*?)\`\`\``,
  ).exec(readme);
  if (!found?.[1]) throw new Error(`sdk/README.md has no example ${name}`);
  return found[1];
}

/** The one documented change for CommonJS: the import statement becomes a require. */
const asCommonJs = (code: string) =>
  code.replace(
    /import \{([^}]*)\} from 'marketplace-listings-sdk';/,
    (_, names: string) => `const {${names}} = require('marketplace-listings-sdk');`,
  );

// One test holding the rest: its setup awaits a server and a real delivery, then each part
// runs as a subtest in order.
t.test('the SDK package in fresh consumer projects', async (t) => {
  const work = mkdtempSync(path.join(tmpdir(), 'sdk-consumers-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));

  // --- The tarball ---------------------------------------------------------------------------

  const packed = await run(
    'npm',
    ['pack', '-w', 'sdk', '--pack-destination', work, '--json'],
    root,
  );
  t.equal(packed.code, 0, `npm pack -w sdk: ${packed.stderr}`);
  const [tarball] = JSON.parse(packed.stdout) as [
    { filename: string; size: number; unpackedSize: number; files: { path: string }[] },
  ];
  const tgz = path.join(work, tarball.filename);

  // --- A server, a key and a real webhook delivery -------------------------------------------

  const { app, baseUrl } = await listeningApp(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'sandbox');
  const receiver = await startReceiver(t);
  const endpoint = await createEndpoint(app, receiver, {
    appId: developer.appId,
    path: '/consumer-hook',
  });
  const seeded = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: { authorization: `Bearer ${key}` },
    payload: { title: 'Seed for the webhook', price_cents: 1200 },
  });
  t.equal(seeded.statusCode, 201, seeded.body);
  const delivery = await waitUntil('a delivery', () =>
    receiver.to('/consumer-hook').find((received) => received.event?.type === 'listing.created'),
  );
  const deliveryFile = path.join(work, 'delivery.json');
  /**
   * Writes the delivery for a receiver that is about to verify it, re-signed now by the
   * service's own signing (src/webhooks/signing.ts), as the service re-signs every attempt of a
   * delivery: same id and body, a fresh webhook-timestamp. The receivers run minutes after the
   * delivery arrived (npm installs, tsc), and they reject timestamps more than 5 minutes old, as
   * they should; so each gets a delivery signed right before it runs, not a stale one.
   */
  const freshDelivery = () => {
    const headers = delivery.headers as Record<string, string>;
    const signed = webhookHeaders({
      deliveryId: headers['webhook-id']!,
      type: headers['x-service-event']!,
      body: delivery.raw.toString('utf8'),
      secrets: [endpoint.secret],
      timestamp: Math.floor(Date.now() / 1000),
    });
    writeFileSync(
      deliveryFile,
      JSON.stringify({ raw: delivery.raw.toString('utf8'), headers: { ...headers, ...signed } }),
    );
  };
  // The secret as CONTRACT.md section 6 has it; the Standard Webhooks libraries verify the
  // delivery in their default mode with the one step docs/webhooks.md gives (no `svc_`).
  t.match(endpoint.secret, /^svc_whsec_[A-Za-z0-9+/]{43}=$/, 'the secret shown at creation');
  const standardForm = endpoint.secret.replace(/^svc_/, '');
  const deliveryHeaders = delivery.headers as Record<string, string>;
  t.ok(new StandardWebhook(standardForm).verify(delivery.raw.toString('utf8'), deliveryHeaders));
  t.doesNotThrow(() =>
    new SvixWebhook(standardForm).verify(delivery.raw.toString(), deliveryHeaders),
  );
  const env = {
    MARKETPLACE_URL: baseUrl,
    MARKETPLACE_KEY: key,
    WEBHOOK_SECRET: endpoint.secret,
    DELIVERY_FILE: deliveryFile,
  };

  await t.test(
    'the tarball holds the builds, the README, the CHANGELOG and nothing else',
    async (t) => {
      const files = tarball.files.map((file) => file.path).sort();
      for (const expected of [
        'package.json',
        'README.md',
        'CHANGELOG.md',
        'LICENSE',
        'dist/esm/index.js',
        'dist/esm/index.d.ts',
        'dist/esm/webhooks.js',
        'dist/esm/generated/openapi-types.d.ts',
        'dist/cjs/index.js',
        'dist/cjs/index.d.ts',
        'dist/cjs/package.json',
        'dist/cli/cli.js',
        'dist/cli/listen.js',
      ]) {
        t.ok(files.includes(expected), `ships ${expected}`);
      }
      t.same(
        files.filter(
          (file) => !/^(dist\/(esm|cjs|cli)\/|package\.json$|README|CHANGELOG|LICENSE)/.test(file),
        ),
        [],
        'nothing outside dist/ and the package documents',
      );
      const manifest = JSON.parse(readFileSync(path.join(root, 'sdk/package.json'), 'utf8')) as {
        dependencies: Record<string, string>;
        scripts: Record<string, string>;
        bin: Record<string, string>;
      };
      t.same(
        manifest.bin,
        { 'marketplace-listings-sdk': 'dist/cli/cli.js' },
        'one command, listen',
      );
      t.same(
        Object.keys(manifest.dependencies),
        ['openapi-fetch'],
        'openapi-fetch and nothing else',
      );
      for (const hook of ['preinstall', 'install', 'postinstall'])
        t.notOk(manifest.scripts[hook], `no ${hook} script`);
      t.comment(
        `${tarball.filename}: ${tarball.files.length} files, ${tarball.size} bytes packed, ${tarball.unpackedSize} unpacked`,
      );
      t.equal(
        currentBlock(readFileSync(path.join(root, 'sdk/README.md'), 'utf8')),
        sizeBlock({ ...tarball, entryCount: tarball.files.length }),
        "sdk/README.md's size figures are this tarball's (npm run sdk:size rewrites them)",
      );
    },
  );

  /** What the README's client example prints when it worked. */
  function clientWorked(t: Test, ran: Ran, label: string) {
    t.equal(ran.code, 0, `${label} exits 0: ${said(ran)}`);
    t.match(ran.stdout, /^created [0-9a-f-]{36} 4950$/m, `${label}: created the listing`);
    t.match(ran.stdout, /^found it on the feed after \d+ listings$/m, `${label}: paged to it`);
    t.match(ran.stdout, /^found it by search at 4950 cents$/m, `${label}: searched for it`);
    t.match(ran.stdout, /^404 not_found \S+$/m, `${label}: caught the typed error`);
  }

  /** Runs a receiver check on a delivery signed right before it. */
  const runReceiver = (file: string, dir: string) => {
    freshDelivery();
    return run(process.execPath, [file], dir, env);
  };

  /** What the receiver check prints: the genuine delivery 204, the tampered one 400. */
  function receiverWorked(t: Test, ran: Ran, label: string) {
    t.equal(ran.code, 0, `${label} exits 0: ${said(ran)}`);
    t.match(ran.stdout, /^verified listing\.created [0-9a-f]+$/m, `${label}: verified`);
    t.match(
      ran.stdout,
      /^\{"genuine":204,"tampered":400\}$/m,
      `${label}: refused the tampered body`,
    );
  }

  /** Reads the delivery and feeds it to the README's handleDelivery, genuine and tampered. */
  const receiverCheck = (from: string) => `import { readFileSync } from 'node:fs';
  import { handleDelivery } from '${from}';

  async function main(): Promise<void> {
    const delivery = JSON.parse(readFileSync(process.env.DELIVERY_FILE ?? '', 'utf8')) as {
      raw: string;
      headers: Record<string, string>;
    };
    const genuine = await handleDelivery(delivery.raw, new Headers(delivery.headers));
    const tampered = await handleDelivery(delivery.raw + ' ', new Headers(delivery.headers));
    console.log(JSON.stringify({ genuine, tampered }));
  }
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
  `;

  // --- JavaScript: ES module and CommonJS ----------------------------------------------------

  /** A project with package.json and the tarball installed, as `npm install <file>` leaves it. */
  async function project(t: Test, name: string, extra: string[] = []): Promise<string> {
    const dir = path.join(work, name);
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, private: true }));
    const installed = await run(
      'npm',
      ['install', '--no-audit', '--no-fund', '--foreground-scripts', tgz, ...extra],
      dir,
    );
    t.equal(installed.code, 0, `npm install in ${name}: ${said(installed)}`);
    t.notMatch(installed.stderr, /EBADENGINE/, 'no engine warning');
    return dir;
  }

  const verifyScript = (imports: string) => `${imports}
  const { readFileSync } = require_or_import_fs;
  async function main() {
    const delivery = JSON.parse(readFileSync(process.env.DELIVERY_FILE, 'utf8'));
    const event = await verifyWebhook(process.env.WEBHOOK_SECRET, delivery.raw, delivery.headers);
    console.log('verified', event.type, event.id);
    try {
      await verifyWebhook(process.env.WEBHOOK_SECRET, delivery.raw + ' ', delivery.headers);
      console.log('tampered body verified');
    } catch (err) {
      if (!(err instanceof WebhookVerificationError)) throw err;
      console.log(JSON.stringify({ genuine: 204, tampered: err.reason === 'invalid_signature' ? 400 : 500 }));
    }
  }
  main().catch((err) => { console.error(err); process.exitCode = 1; });
  `;

  await t.test(
    'JavaScript: the README example and a webhook check, as ESM and as CommonJS',
    async (t) => {
      const dir = await project(t, 'consumer-js');
      writeFileSync(path.join(dir, 'client.mjs'), example('client.ts'));
      writeFileSync(path.join(dir, 'client.cjs'), asCommonJs(example('client.ts')));
      writeFileSync(
        path.join(dir, 'verify.mjs'),
        verifyScript(
          "import { verifyWebhook, WebhookVerificationError } from 'marketplace-listings-sdk';\n" +
            "import * as require_or_import_fs from 'node:fs';",
        ),
      );
      writeFileSync(
        path.join(dir, 'verify.cjs'),
        verifyScript(
          "const { verifyWebhook, WebhookVerificationError } = require('marketplace-listings-sdk');\n" +
            "const require_or_import_fs = require('node:fs');",
        ),
      );
      clientWorked(t, await run(process.execPath, ['client.mjs'], dir, env), 'client.mjs');
      clientWorked(t, await run(process.execPath, ['client.cjs'], dir, env), 'client.cjs');
      receiverWorked(t, await runReceiver('verify.mjs', dir), 'verify.mjs');
      receiverWorked(t, await runReceiver('verify.cjs', dir), 'verify.cjs');
      // The README's JavaScript receiver, as written, fed the same delivery.
      writeFileSync(path.join(dir, 'receiver.mjs'), example('receiver.js'));
      writeFileSync(
        path.join(dir, 'receiver-check.mjs'),
        receiverCheck('./receiver.mjs')
          .replace(/ as \{[^}]*\};/, ';')
          .replace(': Promise<void>', '')
          .replace(': unknown', ''),
      );
      receiverWorked(t, await runReceiver('receiver-check.mjs', dir), 'receiver.js');

      // Disk usage (du -sk) of the package and of the whole node_modules, as a consumer sees it.
      const kb = async (target: string) =>
        Number((await run('du', ['-sk', target], dir)).stdout.split('\t')[0]);
      const sdkKb = await kb('node_modules/marketplace-listings-sdk');
      const allKb = await kb('node_modules');
      t.ok(sdkKb < 1024, `the SDK takes ${sdkKb} KB installed (< 1 MB)`);
      t.comment(`installed: marketplace-listings-sdk ${sdkKb} KB, node_modules ${allKb} KB`);
    },
  );

  // --- The listen command -------------------------------------------------------------------

  await t.test(
    'listen: the installed command forwards a create, an update and an archive, verified',
    async (t) => {
      const dir = await project(t, 'consumer-listen');
      // The consumer's receiver verifies with the installed SDK and with standardwebhooks.
      const sdk = (await import(
        path.join(dir, 'node_modules/marketplace-listings-sdk/dist/esm/index.js')
      )) as typeof import('../../sdk/src/index.ts');
      const { Webhook } = await import('standardwebhooks');
      let secret = '';
      const verified: { type: string; eventId: string; sdk: boolean; standard: boolean }[] = [];
      const receiver = createServer((request, response) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          let standard = false;
          try {
            // Default mode, with the step docs/webhooks.md gives (a no-op on listen's whsec_).
            new Webhook(secret.replace(/^svc_/, '')).verify(raw, request.headers as never);
            standard = true;
          } catch {
            // recorded as false
          }
          sdk.verifyWebhook(secret, raw, request.headers).then(
            (event) => {
              verified.push({ type: event.type, eventId: event.event_id, sdk: true, standard });
              response.writeHead(204).end();
            },
            () => {
              verified.push({ type: 'unverified', eventId: '', sdk: false, standard });
              response.writeHead(400).end();
            },
          );
        });
      });
      await new Promise<void>((done) => receiver.listen(0, '127.0.0.1', done));
      t.teardown(() => new Promise<void>((done) => receiver.close(() => done())));
      const hooks = `http://localhost:${(receiver.address() as AddressInfo).port}/hooks`;

      const listenEnv = {
        ...process.env,
        NODE_OPTIONS: '',
        NODE_EXTRA_CA_CERTS: path.join(root, 'test/fixtures/tls/ca.pem'),
        MARKETPLACE_KEY: key,
        MARKETPLACE_URL: baseUrl,
        // The per-machine secret is kept under here, not in the real home.
        XDG_CONFIG_HOME: path.join(work, 'config'),
      };
      // The installed bin, as npx runs it (run directly, so Ctrl-C's SIGINT reaches it as a
      // terminal's would; npx itself is used for the refusals below).
      const bin = path.join(dir, 'node_modules/.bin/marketplace-listings-sdk');
      const child = spawn(bin, ['listen', '--forward-to', hooks], { cwd: dir, env: listenEnv });
      t.teardown(() => {
        if (child.exitCode === null) child.kill('SIGKILL');
      });
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
      const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
      secret = (
        await waitUntil('listen to be ready', () => /^Signing secret: (whsec_\S+)/m.exec(out), {
          timeoutMs: 60_000,
        })
      )[1]!;
      t.match(out, /loopback only/, 'it says it forwards to loopback only');

      const call = async (method: string, url: string, payload?: object) => {
        const res = await app.inject({
          method: method as 'POST',
          url,
          headers: { authorization: `Bearer ${key}` },
          ...(payload ? { payload } : {}),
        });
        t.ok(res.statusCode < 300, `${method} ${url}: ${res.statusCode}`);
        return res.json<{ data: { id: string } }>().data;
      };
      const listing = await call('POST', '/api/v1/listings', {
        title: 'Forwarded by listen',
        price_cents: 1500,
      });
      await call('PATCH', `/api/v1/listings/${listing.id}`, { title: 'Renamed' });
      await call('DELETE', `/api/v1/listings/${listing.id}`);
      await waitUntil('three forwards', () => verified.length >= 3 || undefined, {
        timeoutMs: 20_000,
      });
      t.strictSame(
        verified.map(({ type, sdk, standard }) => ({ type, sdk, standard })),
        ['listing.created', 'listing.updated', 'listing.archived'].map((type) => ({
          type,
          sdk: true,
          standard: true,
        })),
        'in order, each verified by verifyWebhook and by standardwebhooks',
      );
      await waitUntil(
        'three lines',
        () => out.split('\n').filter((l) => / -> 204 /.test(l)).length >= 3,
      );
      for (const { type, eventId } of verified)
        t.match(
          out,
          new RegExp(`${eventId}\\s+${type.replace('.', '\\.')}\\s+-> 204\\s+\\d+ ms`),
          `a line for ${type}`,
        );

      child.kill('SIGINT');
      t.equal(await exited, 0, `Ctrl-C: exits 0 (${err})`);
      t.match(out, /Stopped\./);
      t.equal(
        await app.services.endpoints.list(developer.appId).then((l) => l.length),
        1,
        'the app keeps its one endpoint',
      );

      const remote = await run(
        'npx',
        ['marketplace-listings-sdk', 'listen', '--forward-to', 'https://example.com/hooks'],
        dir,
        {
          MARKETPLACE_KEY: key,
          MARKETPLACE_URL: baseUrl,
          XDG_CONFIG_HOME: listenEnv.XDG_CONFIG_HOME,
        },
      );
      t.equal(remote.code, 2, 'another host: refused');
      t.match(remote.stderr, /loopback hosts only .*--allow-remote/);
      const asArgument = await run(
        'npx',
        ['marketplace-listings-sdk', 'listen', '--forward-to', hooks, '--key', key],
        dir,
        { MARKETPLACE_URL: baseUrl },
      );
      t.equal(asArgument.code, 2, 'a credential as an argument: refused');
      t.notMatch(said(asArgument), key, 'and not echoed');
    },
  );

  // --- TypeScript: node16, nodenext, node10, bundler -----------------------------------------

  /** Misuse the SDK's types must refuse (each line is an error, or tsc fails on the directive). */
  const misuse = `import { createMarketplaceClient, type Listing } from 'marketplace-listings-sdk';
  export async function misuse(): Promise<string> {
    const api = createMarketplaceClient({ baseUrl: 'http://127.0.0.1:3000' });
    const page = await api.listings.list({ limit: 10 });
    const first: Listing | undefined = page.data[0];
    // @ts-expect-error price_cents is a number
    const price: string = first?.price_cents ?? 0;
    // @ts-expect-error title is required
    await api.listings.create({ price_cents: 100 });
    // @ts-expect-error not a path of the document
    await api.raw.GET('/api/v1/listing');
    // @ts-expect-error status is an enum
    await api.listings.update('id', { status: 'sold' });
    // @ts-expect-error sort is an enum
    await api.listings.list({ q: 'denim', sort: 'cheapest' });
    // @ts-expect-error tag is repeatable: an array
    await api.listings.list({ tag: 'denim' });
    return price;
  }
  `;

  const compilerOptions = {
    target: 'ES2022',
    strict: true,
    skipLibCheck: false,
    types: ['node'],
  };

  await t.test(
    'TypeScript --strict: the README examples under each moduleResolution',
    async (t) => {
      const dir = await project(t, 'consumer-ts', [
        `typescript@${version('typescript')}`,
        `@types/node@${version('@types/node')}`,
      ]);
      const write = (file: string, text: string) => {
        mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
        writeFileSync(path.join(dir, file), text);
      };
      // ES module (.mts) and CommonJS (.cts) files for node16/nodenext; plain .ts for the others.
      write('src/client.mts', example('client.ts'));
      write('src/receiver.mts', example('receiver.ts'));
      write('src/check.mts', receiverCheck('./receiver.mjs'));
      write('src/misuse.mts', misuse);
      write('src/client.cts', example('client.ts'));
      write('src/receiver.cts', example('receiver.ts'));
      write('src/check.cts', receiverCheck('./receiver.cjs'));
      write('src/misuse.cts', misuse);
      write('plain/client.ts', example('client.ts'));
      write('plain/receiver.ts', example('receiver.ts'));
      write('plain/check.ts', receiverCheck('./receiver'));
      write('plain/misuse.ts', misuse);
      const tsc = path.join(dir, 'node_modules/typescript/bin/tsc');
      const compile = async (name: string, options: Record<string, unknown>, include: string) => {
        write(
          `tsconfig.${name}.json`,
          JSON.stringify({
            compilerOptions: { ...compilerOptions, ...options },
            include: [include],
          }),
        );
        const ran = await run(process.execPath, [tsc, '-p', `tsconfig.${name}.json`], dir);
        t.equal(ran.code, 0, `tsc --strict, moduleResolution ${name}: ${said(ran)}`);
      };

      for (const mode of ['node16', 'nodenext']) {
        await compile(mode, { module: mode, moduleResolution: mode, outDir: `out-${mode}` }, 'src');
        for (const ext of ['mjs', 'cjs']) {
          const out = path.join(`out-${mode}`, `client.${ext}`);
          clientWorked(t, await run(process.execPath, [out], dir, env), `${mode} ${ext}`);
          const check = path.join(`out-${mode}`, `check.${ext}`);
          receiverWorked(t, await runReceiver(check, dir), `${mode} ${ext} receiver`);
        }
      }

      await compile(
        'node10',
        { module: 'commonjs', moduleResolution: 'node10', outDir: 'out-node10' },
        'plain',
      );
      clientWorked(t, await run(process.execPath, ['out-node10/client.js'], dir, env), 'node10');
      receiverWorked(t, await runReceiver('out-node10/check.js', dir), 'node10 receiver');

      // bundler: type-checked by tsc, then bundled as an application's bundler does, for the
      // browser platform (a Node-only import in the SDK would not resolve) and run.
      await compile(
        'bundler',
        { module: 'esnext', moduleResolution: 'bundler', noEmit: true },
        'plain',
      );
      const { build } = await import('esbuild');
      for (const entry of ['client', 'receiver', 'check']) {
        const result = await build({
          entryPoints: [path.join(dir, `plain/${entry}.ts`)],
          bundle: true,
          // The check reads the delivery from a file; the SDK's parts are bundled for browsers.
          platform: entry === 'check' ? 'node' : 'browser',
          format: 'esm',
          outfile: path.join(dir, `out-bundler/${entry}.mjs`),
          logLevel: 'silent',
        });
        t.same(result.errors, [], `esbuild bundles ${entry}.ts`);
      }
      clientWorked(t, await run(process.execPath, ['out-bundler/client.mjs'], dir, env), 'bundler');
      receiverWorked(t, await runReceiver('out-bundler/check.mjs', dir), 'bundler receiver');
    },
  );
});
