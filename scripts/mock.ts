/**
 * A mock of the API for integrators (README "Mock server"): Prism answers every operation of
 * openapi/openapi.yaml with the document's examples, and checks requests against it (a missing
 * credential is a 401, an invalid body a 400, as the real server would say).
 *
 * Usage: npm run mock [-- --port 4010] [--host 127.0.0.1] [--dynamic]
 *   Prefer: code=201            choose the status of the answer
 *   Prefer: example=<name>      choose a named example
 *   --dynamic                   generate data from the schemas instead of the examples
 *
 * Prism 5 is started from node_modules/.bin (not npx, so stopping this process stops it). It is
 * given a copy of the document without `jsonSchemaDialect`: that line only restates the 3.1
 * default, and with it present Prism 5 silently skips request validation.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { parse, stringify } from 'yaml';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const prism = path.join(root, 'node_modules/.bin/prism');

/** The document as the mock serves it: our servers entry points at the mock itself. */
export function mockDocument(source: string, baseUrl: string): string {
  const doc = parse(source) as Record<string, unknown>;
  delete doc.jsonSchemaDialect;
  doc.servers = [
    { url: baseUrl, description: 'Mock server (Prism): example answers, no data is stored' },
  ];
  return stringify(doc);
}

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: process.env.MOCK_PORT ?? '4010' },
    host: { type: 'string', default: '127.0.0.1' },
    dynamic: { type: 'boolean', default: false },
    document: { type: 'string', default: path.join(root, 'openapi/openapi.yaml') },
  },
});

const work = mkdtempSync(path.join(tmpdir(), 'mock-'));
const file = path.join(work, 'openapi.yaml');
writeFileSync(
  file,
  mockDocument(readFileSync(values.document!, 'utf8'), `http://${values.host}:${values.port}`),
);

const child = spawn(
  prism,
  [
    'mock',
    file,
    '--host',
    values.host!,
    '--port',
    values.port!,
    ...(values.dynamic ? ['--dynamic'] : []),
  ],
  {
    stdio: 'inherit',
  },
);
const cleanup = () => rmSync(work, { recursive: true, force: true });
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    stopping = true;
    child.kill(signal);
  });
}
child.on('error', (error) => {
  cleanup();
  console.error(`could not start Prism (${prism}): ${error.message}`);
  process.exit(1);
});
child.on('exit', (code, signal) => {
  cleanup();
  // Stopped by us on request: a clean exit. Prism ending on its own is a failure.
  process.exit(code ?? (signal && stopping ? 0 : 1));
});
