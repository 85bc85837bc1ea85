/**
 * The document is consistent with itself (every example validates, the OAuth examples are one
 * flow), with what was generated from it and with the handlers bound at boot; the contract
 * checker catches what the document forbids; and every served operation is replayed by the
 * contract test file of its tag (CONTRACT_FILES).
 */
import { existsSync, readFileSync } from 'node:fs';
import Fastify from 'fastify';
import t from 'tap';
import { operations as generatedOperations } from '../../src/generated/operations.ts';
import type { OperationId } from '../../src/generated/operations.ts';
import type { Handlers } from '../../src/lib/handlers.ts';
import {
  bindOperations,
  checkBindings,
  UnboundOperationError,
} from '../../src/plugins/operations.ts';
import { allHandlers, PENDING_OPERATIONS } from '../../src/routes.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { s256 } from '../oauth/support.ts';
import { OpenApiDocument } from './document.ts';
import { FORM } from './oauth-fixtures.ts';
import { ContractRecorder } from './recorder.ts';
import { boundOperations, CONTRACT_FILES, servedOperations } from './replay.ts';

const doc = new OpenApiDocument();
const served = servedOperations(doc);
const bound = boundOperations(doc);
const app = await buildTestApp(t);
const contract = new ContractRecorder(app, doc);
const developer = await createDeveloper(app);
const keys = {
  // Every API and OAuth scope, so every operation with a path parameter is reached.
  sandbox: await createKey(app, developer, 'sandbox', 'read listings:write searches'),
  webhooksSandbox: await createKey(app, developer, 'sandbox', 'read listings:write webhooks:write'),
};

t.test('every served operation is replayed by the contract file of its tag', async (t) => {
  const tags = (doc.raw.tags as { name: string }[]).map((tag) => tag.name);
  t.strictSame(Object.keys(CONTRACT_FILES).sort(), [...tags].sort(), 'a file for each tag');
  for (const [tag, file] of Object.entries(CONTRACT_FILES)) {
    const url = new URL(file, import.meta.url);
    t.ok(existsSync(url), `${tag}: ${file}`);
    if (existsSync(url))
      t.match(
        readFileSync(url, 'utf8'),
        `replayExamples(t, suite, '${tag}'`,
        `${file} replays the ${tag} operations`,
      );
  }
  for (const op of served)
    t.ok(
      op.tags.length === 1 && op.tags[0]! in CONTRACT_FILES,
      `${op.operationId}: one tag with a contract file (${op.tags.join(', ')})`,
    );
});

t.test('every example of the document validates against its schema', async (t) => {
  const problems: string[] = [];
  for (const op of doc.operations) {
    for (const p of op.parameters) {
      if (p.hasExample && p.schemaPointer) {
        for (const e of doc.validate(p.schemaPointer, p.example))
          problems.push(`${op.operationId} parameter ${p.name}: ${e}`);
      }
    }
    for (const [media, definition] of op.requestBody?.content ?? []) {
      for (const example of definition.examples) {
        if (!definition.schemaPointer) continue;
        for (const e of doc.validate(definition.schemaPointer, example.value))
          problems.push(`${op.operationId} request ${media} ${example.name}: ${e}`);
      }
    }
    for (const [status, response] of op.responses) {
      for (const [media, definition] of response.content) {
        if (!definition.schemaPointer) continue;
        for (const example of definition.examples) {
          for (const e of doc.validate(definition.schemaPointer, example.value))
            problems.push(`${op.operationId} ${status} ${media} ${example.name}: ${e}`);
        }
      }
    }
  }
  t.strictSame(problems, [], 'examples validate');
});

/** A JSON Pointer token in the URI-fragment form OpenApiDocument.validate takes. */
const token = (key: string) => encodeURIComponent(key.replaceAll('~', '~0').replaceAll('/', '~1'));

/**
 * Every example anywhere in the document with the schema it illustrates, as a generic validator
 * reads them: a media type's, parameter's or header's `example` and `examples` (Example Objects,
 * `$ref`s followed) against its `schema`; a schema's own `examples` (JSON Schema's array) and
 * `example` (OpenAPI's) against that schema; in paths, webhooks and components alike.
 */
function everyExample(): { where: string; schema: string; value: unknown }[] {
  const found: { where: string; schema: string; value: unknown }[] = [];
  const isNode = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v);
  const exampleValue = (example: unknown, at: string): unknown[] => {
    if (!isNode(example)) return [];
    const { node } = doc.deref(example, at);
    return 'value' in node ? [node.value] : [];
  };
  function walk(node: unknown, at: string, inSchema: boolean): void {
    if (Array.isArray(node)) {
      node.forEach((item, i) => walk(item, `${at}/${i}`, inSchema));
      return;
    }
    if (!isNode(node)) return;
    if (inSchema) {
      if (Array.isArray(node.examples))
        node.examples.forEach((value, i) =>
          found.push({ where: `${at}/examples/${i}`, schema: at, value }),
        );
      if ('example' in node)
        found.push({ where: `${at}/example`, schema: at, value: node.example });
    } else if (isNode(node.schema)) {
      const schema = `${at}/schema`;
      if ('example' in node) found.push({ where: `${at}/example`, schema, value: node.example });
      if (isNode(node.examples))
        for (const [name, example] of Object.entries(node.examples))
          for (const value of exampleValue(example, `${at}/examples/${token(name)}`))
            found.push({ where: `${at}/examples/${token(name)}`, schema, value });
    }
    for (const [key, value] of Object.entries(node)) {
      const child = `${at}/${token(key)}`;
      if (!inSchema && (key === 'example' || key === 'examples')) continue;
      if (
        inSchema &&
        (key === 'example' || key === 'examples' || key === 'const' || key === 'enum')
      )
        continue;
      if (inSchema && (key === 'properties' || key === 'dependentSchemas') && isNode(value)) {
        // The keys are names, not keywords: each value is a schema.
        for (const [name, schema] of Object.entries(value))
          walk(schema, `${child}/${token(name)}`, true);
        continue;
      }
      walk(value, child, inSchema || key === 'schema' || at === '/components/schemas');
    }
  }
  walk(doc.raw, '', false);
  return found;
}

t.test('every example anywhere in the document validates against its own schema', async (t) => {
  const examples = everyExample();
  // The schemas' own examples are part of it: more than the operations' examples alone.
  t.ok(examples.length > 100, `${examples.length} examples found`);
  t.ok(
    examples.some((e) => e.where.startsWith('/components/schemas/')),
    'the component schemas’ own examples are among them',
  );
  const problems = examples.flatMap((e) =>
    doc.validate(e.schema, e.value).map((problem) => `${e.where}: ${problem}`),
  );
  t.strictSame(problems, [], 'zero violations');
});

t.test('the OAuth examples are one consistent flow', async (t) => {
  const challenge = doc
    .operation('authorize')
    .parameters.find((p) => p.name === 'code_challenge')?.example;
  const tokenExample = doc
    .operation('oauthToken')
    .requestBody?.content.get(FORM)
    ?.examples.find((e) => 'code_verifier' in (e.value as object));
  const verifier = (tokenExample?.value as { code_verifier?: string } | undefined)?.code_verifier;
  t.type(verifier, 'string', 'a token example sends a code_verifier');
  if (typeof verifier === 'string')
    t.equal(
      challenge,
      s256(verifier),
      "authorize's code_challenge example is the S256 of the token example's code_verifier",
    );
});

t.test('the generated operations match the document', async (t) => {
  const generated = generatedOperations as unknown as Record<
    string,
    {
      method: string;
      path: string;
      security: unknown;
      responseContentTypes: Record<string, readonly string[]>;
    }
  >;
  t.strictSame(
    Object.keys(generated).sort(),
    served.map((op) => op.operationId).sort(),
    'the same operationIds',
  );
  for (const op of served) {
    const g = generated[op.operationId];
    if (!g) continue;
    t.strictSame(
      {
        method: g.method,
        path: g.path,
        security: g.security,
        responses: Object.fromEntries(
          Object.entries(g.responseContentTypes).map(([s, m]) => [s, [...m].sort()]),
        ),
      },
      {
        method: op.method,
        path: op.path,
        security: op.security,
        responses: Object.fromEntries(
          [...op.responses].map(([s, r]) => [s, [...r.content.keys()].sort()]),
        ),
      },
      `${op.operationId}: method, path, security and response media types`,
    );
  }
});

t.test('the checker itself catches what the document forbids', async (t) => {
  const health = doc.operation('getHealth');
  const meta = { version: 'v1', environment: 'live', request_id: 'req_1' };
  const ok = {
    status: 200,
    headers: { 'x-request-id': 'req_1', 'content-type': 'application/json' },
    text: '',
  };
  const health1 = { database: 'not_checked', session_secret: 'configured', db: null };
  const valid = { data: { ok: true, ...health1, config_ready: true }, meta };
  t.strictSame(contract.check(health, {}, { ...ok, json: valid }), [], 'a valid answer passes');
  t.match(contract.check(health, {}, { ...ok, status: 418, json: valid }), [
    /status 418 is not documented/,
  ]);
  t.match(
    contract.check(
      health,
      {},
      { ...ok, headers: { ...ok.headers, 'content-type': 'text/html' }, json: undefined },
    ),
    [/Content-Type "text\/html" is not documented/],
  );
  t.match(
    contract.check(
      health,
      {},
      { ...ok, json: { data: { ok: 'yes', ...health1, config_ready: true }, meta } },
    ),
    [/body: \/data\/ok must be boolean/],
  );
  t.match(
    contract.check(
      health,
      {},
      { ...ok, json: { ...valid, meta: { ...meta, request_id: 'req_2' } } },
    ),
    [/differs from X-Request-Id/],
  );
  t.match(
    contract.check(health, { authorization: `Bearer ${keys.sandbox}` }, { ...ok, json: valid }),
    [/meta.environment is "live"/],
  );
  t.match(
    contract.check(
      health,
      {},
      { ...ok, status: 400, json: { error: { code: 'not_found', message: 'x' }, meta } },
    ),
    [/error.code is "not_found", the Errors table gives validation_error for 400/],
  );
  t.match(
    contract.check(
      health,
      {},
      { ...ok, status: 400, json: { error: { code: 'validation_error', message: 'x' }, meta } },
    ),
    [/validation_error without error.details/],
  );
  t.match(
    contract.check(doc.operation('createListing'), {}, { ...ok, status: 201, json: undefined }),
    [/body is not JSON/, /required header location is missing/],
  );

  const token = doc.operation('oauthToken');
  const noStore = { ...ok.headers, 'cache-control': 'no-store', pragma: 'no-cache' };
  const invalidClient = {
    status: 401,
    headers: noStore,
    text: '',
    json: { error: 'invalid_client', error_description: 'x' },
  };
  t.strictSame(contract.check(token, {}, invalidClient), [], 'an OAuth error passes');
  t.match(contract.check(token, { authorization: 'Basic eDp5' }, invalidClient), [
    /401 after HTTP Basic client authentication without a Basic challenge/,
  ]);
  t.strictSame(
    contract.check(
      token,
      { authorization: 'Basic eDp5' },
      { ...invalidClient, headers: { ...noStore, 'www-authenticate': 'Basic realm="oauth"' } },
    ),
    [],
    'with the Basic challenge it passes',
  );
  t.match(contract.check(token, {}, { ...invalidClient, json: { ...invalidClient.json, meta } }), [
    /OAuth-format body wrapped in the API envelope/,
  ]);
  t.match(contract.check(token, {}, { ...invalidClient, headers: ok.headers }), [
    /required header cache-control is missing/,
    /required header pragma is missing/,
  ]);
  t.match(
    contract.check(
      token,
      {},
      {
        ...invalidClient,
        status: 400,
        json: { error: 'validation_error', error_description: 'x' },
      },
    ),
    [/body: \/error must be equal to one of the allowed values/],
  );
  const page = {
    status: 200,
    headers: { 'x-request-id': 'req_1', 'content-type': 'application/json' },
    text: '{}',
    json: {},
  };
  t.match(contract.check(doc.operation('authorize'), {}, page), [
    /Content-Type "application\/json" is not documented for 200/,
  ]);
});

// "An operation without a handler fails loudly" (STYLE: contract first); one not served yet is
// declared pending (src/routes.ts).

t.test('an operation without a handler stops the boot', async (t) => {
  const handlers = allHandlers(app);
  t.doesNotThrow(
    () => checkBindings(handlers, PENDING_OPERATIONS),
    'the real handlers and pending list agree with the document',
  );
  for (const op of bound) {
    const missing: Handlers = { ...handlers };
    delete (missing as Record<string, unknown>)[op.operationId];
    t.throws(
      () => checkBindings(missing, PENDING_OPERATIONS),
      {
        name: 'UnboundOperationError',
        message: new RegExp(`${op.operationId} \\(${op.method} [^)]+\\) has no handler`),
      },
      `without a handler for ${op.operationId}`,
    );
  }
  const victim = bound[0]!.operationId as OperationId;
  const missing: Handlers = { ...handlers };
  delete (missing as Record<string, unknown>)[victim];
  const bare = Fastify();
  t.teardown(() => bare.close());
  await t.rejects(
    bindOperations(bare, missing, PENDING_OPERATIONS),
    UnboundOperationError,
    'bindOperations refuses to bind',
  );

  t.doesNotThrow(
    () => checkBindings(missing, [...PENDING_OPERATIONS, victim]),
    'an operation listed as pending needs no handler',
  );
  t.throws(
    () => checkBindings(handlers, [...PENDING_OPERATIONS, victim]),
    /handled but still listed as pending/,
  );
  t.throws(
    () => checkBindings(handlers, [...PENDING_OPERATIONS, 'noSuchOperation' as OperationId]),
    /pending noSuchOperation matches no operation/,
  );
  t.throws(
    () =>
      checkBindings(
        { ...handlers, noSuchOperation: async () => ({}) } as Handlers,
        PENDING_OPERATIONS,
      ),
    /matches no operation/,
  );
});

t.test('an over-long path parameter is answered by its operation, as documented', async (t) => {
  // Fastify's router sends a parameter over its maxParamLength (100 by default) to the catch-all
  // 404, which no operation documents (and which has no RateLimit headers): issue #32.
  let sent = 0;
  for (const op of served) {
    const names = op.parameters.filter((p) => p.in === 'path').map((p) => p.name);
    if (names.length === 0) continue;
    for (const length of [101, 2_000, 8_000]) {
      const path = Object.fromEntries(names.map((name) => [name, 'a'.repeat(length)]));
      const res = await contract.send(t, {
        op: op.operationId,
        label: `${names.join(', ')} of ${length} characters`,
        // A key the operation's scope admits (webhooks:write is a key-only scope).
        credential: op.security.some((r) => r.apiKey?.includes('webhooks:write'))
          ? keys.webhooksSandbox
          : keys.sandbox,
        path,
        ...(op.requestBody ? { body: { title: 'Long id' } } : {}),
        expect: [400, 404],
      });
      t.notMatch(res.json?.error?.message, /No resource at this path/, 'not the catch-all');
      t.ok(res.headers['ratelimit-limit'], 'counted by the rate limit');
      sent += 1;
    }
  }
  t.ok(sent >= 12, `every operation with a path parameter (${sent} requests)`);
});
