/**
 * The compatibility check (scripts/check-compat.ts, README "Versioning"): deliberately breaking
 * changes of a small released document fail, additive ones and a new major version pass, and
 * the CLI exits 1 on a break. The real document against openapi/released/ runs in .ci/run.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { checkCompat, prepareForDiff } from '../../scripts/check-compat.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const fixture = (name: string) => path.join(root, 'test/scripts/fixtures/compat', name);
const base = fixture('v1.yaml');

t.test(
  'prepareForDiff: webhooks become operations answering their payload; open enums lose their enum',
  async (t) => {
    const prepared = prepareForDiff({
      openapi: '3.1.0',
      jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
      paths: {},
      webhooks: {
        ping: {
          post: {
            operationId: 'webhookPing',
            requestBody: { content: { 'application/json': { schema: { type: 'object' } } } },
          },
        },
      },
      components: {
        schemas: {
          ErrorCode: { type: 'string', enum: ['a'] },
          ListingStatus: { type: 'string', enum: ['draft'] },
        },
      },
    });
    t.equal(prepared.jsonSchemaDialect, undefined);
    t.equal(prepared.webhooks, undefined);
    t.same(prepared.paths['/webhooks/ping'].post.responses['200'].content, {
      'application/json': { schema: { type: 'object' } },
    });
    t.equal(prepared.components.schemas.ErrorCode.enum, undefined, 'ErrorCode is open within v1');
    t.same(prepared.components.schemas.ListingStatus.enum, ['draft'], 'other enums stay closed');
  },
);

t.test('prepareForDiff: a YAML body described as its text is read as no schema', async (t) => {
  const yaml = (schema: object) => ({
    openapi: '3.1.0',
    paths: {
      '/doc.yaml': {
        get: {
          responses: {
            '200': { content: { 'application/yaml': { schema, example: 'openapi: 3.1.0\n' } } },
          },
        },
      },
    },
  });
  const content = (doc: ReturnType<typeof prepareForDiff>) =>
    doc.paths['/doc.yaml'].get.responses['200'].content['application/yaml'];
  t.same(content(prepareForDiff(yaml({ type: 'string' }))), {}, '`type: string`: the text');
  t.same(
    content(prepareForDiff(yaml({ type: 'object' }))).schema,
    { type: 'object' },
    'a schema of the parsed value is compared as is',
  );
});

t.test('verdicts on the fixtures', async (t) => {
  // Optic takes seconds per diff: run the four at once.
  const [response, webhook, additive, major] = await Promise.all(
    ['breaking-response.yaml', 'breaking-webhook.yaml', 'additive.yaml', 'v2-breaking.yaml'].map(
      (name) => checkCompat(base, fixture(name)),
    ),
  );
  t.equal(response!.ok, false, 'removing a response property is breaking');
  t.match(response!.output, /cannot remove response property 'title'/);

  t.equal(webhook!.ok, false, 'changing the type of a webhook payload field is breaking');
  t.match(webhook!.output, /webhooks\/listing\.created/);
  t.match(webhook!.output, /price_cents/);

  t.equal(additive!.ok, true, 'additive changes pass');
  if (!additive!.ok) t.comment(additive!.output);

  t.equal(major!.ok, true, 'a breaking change with info.version 2.0.0 passes');
  if (!major!.ok) t.comment(major!.output);
  t.equal(major!.majorChange, true);
});

t.test('the CLI exits 1 and names the policy on a breaking change', async (t) => {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'scripts/check-compat.ts',
      '--base',
      base,
      '--head',
      fixture('breaking-response.yaml'),
    ],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  child.stdout.resume();
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  t.equal(code, 1);
  t.match(stderr, /BREAKING CHANGES/);
  t.match(stderr, /v2/);
});
