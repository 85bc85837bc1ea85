/**
 * The document's `links` (OpenAPI "Link Object") walked against a running server, the way a
 * generic client or a stateful fuzzer walks them: the served document is read over HTTP, each
 * create is sent, and every operation it links to is called with only what the link says (its
 * operationId, and its parameters' runtime expressions evaluated on the create's answer), reads
 * first, then changes, then deletes. Every resource's create links to each operation that takes
 * its id, and each answer is the one the document gives for that operation.
 */
import t, { type Test } from 'tap';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listeningApp } from '../helpers/listening.ts';
import { OpenApiDocument, type DocOperation } from './document.ts';
import { listingBody } from './support.ts';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A public address literal, as in the webhook replay: no DNS on the test machine. */
const WEBHOOK_URL = 'https://93.184.215.14/hooks/links';

/** A valid body of each create, and of each update a link leads to (the links give ids only). */
const CREATE_BODIES: Record<string, unknown> = {
  createListing: listingBody('Linked listing'),
  createSavedSearch: { name: 'Linked search', q: 'jacket' },
  createWebhookEndpoint: { url: WEBHOOK_URL },
};
const UPDATE_BODIES: Record<string, unknown> = {
  updateListing: { title: 'Linked listing, renamed' },
  updateWebhookEndpoint: { enabled_events: ['listing.created'] },
};

/** The order a client walks links in: what reads, then what changes, then what deletes. */
const METHOD_ORDER = ['GET', 'PATCH', 'PUT', 'POST', 'DELETE'];

const { baseUrl, app } = await listeningApp(t);
const developer = await createDeveloper(app);
const key = await createKey(
  app,
  developer,
  'sandbox',
  'read listings:write searches webhooks:write',
);
const served = await fetch(`${baseUrl}/api/v1/openapi.json`);
const doc = new OpenApiDocument(await served.text());
const raw = doc.raw as Json;

/** JSON Pointer (RFC 6901) into a value. */
function atPointer(value: unknown, pointer: string): unknown {
  let node = value as Json | undefined;
  for (const token of pointer.split('/').slice(1)) {
    node = node?.[token.replaceAll('~1', '/').replaceAll('~0', '~')];
  }
  return node;
}

/** A runtime expression on a response (OpenAPI "Runtime Expressions"): the body's pointers. */
function evaluate(expression: string, body: unknown): unknown {
  const match = /^\$response\.body#(\/.*)?$/.exec(expression);
  if (!match) throw new Error(`unsupported runtime expression ${expression}`);
  return atPointer(body, match[1] ?? '');
}

interface Link {
  name: string;
  operationId: string;
  parameters: Record<string, string>;
}

/** The links of a response, `$ref`s to components.links followed. */
function linksOf(response: Json): Link[] {
  return Object.entries<Json>(response.links ?? {}).map(([name, link]) => {
    const target: Json = typeof link.$ref === 'string' ? atPointer(raw, link.$ref.slice(1))! : link;
    return { name, operationId: target.operationId, parameters: target.parameters ?? {} };
  });
}

/** Each operation with links from one of its 2xx answers: status -> links. */
function linkingOperations(): { op: DocOperation; status: string; links: Link[] }[] {
  const result = [];
  for (const op of doc.operations.filter((o) => o.section === 'paths')) {
    const operation = doc.at(op.pointer) as Json;
    for (const [status, response] of Object.entries<Json>(operation.responses ?? {})) {
      if (!/^2\d\d$/.test(status) || !response.links) continue;
      result.push({ op, status, links: linksOf(response) });
    }
  }
  return result;
}

async function call(
  op: DocOperation,
  path: Record<string, string>,
  body?: unknown,
): Promise<{ status: number; json: Json | undefined; text: string; media: string | null }> {
  const url = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
    const value = path[name];
    if (value === undefined) throw new Error(`${op.operationId}: no value for path.${name}`);
    return encodeURIComponent(value);
  });
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${baseUrl}${url}`, {
    method: op.method,
    headers,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  const media = res.headers.get('content-type')?.split(';')[0]!.trim() ?? null;
  return {
    status: res.status,
    json: media === 'application/json' ? JSON.parse(text) : undefined,
    text,
    media,
  };
}

/** The body validates against the schema the document gives for this status. */
function documented(
  t: Test,
  op: DocOperation,
  status: number,
  json: unknown,
  media: string | null,
) {
  const response = op.responses.get(String(status));
  t.ok(response, `${op.operationId}: ${status} is documented`);
  const pointer = media ? response?.content.get(media)?.schemaPointer : undefined;
  if (pointer)
    t.strictSame(
      doc.validate(pointer, json),
      [],
      `${op.operationId} ${status}: body as documented`,
    );
}

t.test('every link names an operation, and parameters that operation takes', async (t) => {
  for (const { op, status, links } of linkingOperations()) {
    for (const link of links) {
      const target = doc.operations.find((o) => o.operationId === link.operationId);
      t.ok(target, `${op.operationId} ${status} ${link.name}: operation ${link.operationId}`);
      for (const [qualified, expression] of Object.entries(link.parameters)) {
        const [where, name] = qualified.includes('.')
          ? qualified.split('.', 2)
          : [undefined, qualified];
        t.ok(
          target?.parameters.some(
            (p) => p.name === name && (where === undefined || p.in === where),
          ),
          `${link.name}: ${link.operationId} takes ${qualified}`,
        );
        t.match(
          expression,
          /^\$response\.body#\//,
          `${link.name}: ${qualified} is read from the answer`,
        );
      }
    }
  }
});

t.test('every create links to each operation that takes its id', async (t) => {
  const creates = linkingOperations().filter(({ op }) => op.operationId in CREATE_BODIES);
  t.strictSame(
    [...new Set(creates.map(({ op }) => op.operationId))].sort(),
    Object.keys(CREATE_BODIES).sort(),
    'the creates with links',
  );
  for (const { op, status, links } of creates) {
    // The operations on the item path under the create's collection path: /x -> /x/{id}.
    const itemOps = doc.operations
      .filter((o) => o.section === 'paths' && o.path === `${op.path}/{id}`)
      .map((o) => o.operationId)
      .sort();
    t.strictSame(
      links.map((l) => l.operationId).sort(),
      itemOps,
      `${op.operationId} ${status} links to ${itemOps.join(', ')}`,
    );
  }
});

t.test('create -> read -> update -> delete through the links alone', async (t) => {
  const walks = linkingOperations().filter(
    ({ op, status }) => op.operationId in CREATE_BODIES && /^201$/.test(status),
  );
  t.equal(walks.length, Object.keys(CREATE_BODIES).length, 'one walk per create');
  for (const { op, status, links } of walks) {
    await t.test(op.operationId, async (t) => {
      const created = await call(op, {}, CREATE_BODIES[op.operationId]);
      t.equal(created.status, Number(status), `${op.operationId} answers ${status}`, {
        body: created.text,
      });
      documented(t, op, created.status, created.json, created.media);
      const ordered = [...links].sort(
        (a, b) =>
          METHOD_ORDER.indexOf(doc.operation(a.operationId).method) -
          METHOD_ORDER.indexOf(doc.operation(b.operationId).method),
      );
      for (const link of ordered) {
        const target = doc.operation(link.operationId);
        const path: Record<string, string> = {};
        for (const [qualified, expression] of Object.entries(link.parameters)) {
          const value = evaluate(expression, created.json);
          t.type(value, 'string', `${link.name}: ${expression} gives a value`);
          path[qualified.replace(/^path\./, '')] = String(value);
        }
        const answer = await call(target, path, UPDATE_BODIES[target.operationId]);
        t.ok(
          answer.status >= 200 && answer.status < 300,
          `${link.name}: ${target.method} ${target.path} answers ${answer.status}`,
          { body: answer.text },
        );
        documented(t, target, answer.status, answer.json, answer.media);
        if (answer.json) t.equal(answer.json.data?.id, path.id, `${link.name}: the same resource`);
      }
    });
  }
});
