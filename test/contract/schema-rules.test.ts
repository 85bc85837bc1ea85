/**
 * The rules across fields that the document's schemas state (issue #58: exactly one price, a
 * photo when active, `q` or a filter in a saved search, `*` alone in `enabled_events`, https
 * webhook URLs), each exercised both ways, three times over: by the document's own schema as a
 * generic validator reads it (Ajv 2020 on openapi.yaml), by the server's request validator (the
 * generated TypeBox schema through src/lib/validator.ts), and by the server over HTTP, whose
 * refusal is the schema's `400 validation_error` naming the field. Every answer is checked
 * against the document by the recorder as well.
 */
import t from 'tap';
import * as schemas from '../../src/generated/schemas.ts';
import { compileBodyValidator } from '../../src/lib/validator.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { OpenApiDocument } from './document.ts';
import { ContractRecorder } from './recorder.ts';
import { listingBody } from './support.ts';

const doc = new OpenApiDocument();
const app = await buildTestApp(t);
const contract = new ContractRecorder(app, doc);
const developer = await createDeveloper(app);
const key = await createKey(
  app,
  developer,
  'sandbox',
  'read listings:write searches webhooks:write',
);

/** A public address literal, as in the webhook replay: no DNS on the test machine. */
const HOOK = '93.184.215.14/hooks/rules';
const PHOTO = 'https://images.example.com/rules/cover.jpg';

interface Rule {
  name: string;
  /** The operation whose request body the rule is in. */
  op: string;
  /** The component schema of that body (document and generated code alike). */
  schema: keyof typeof schemas & string;
  /** The listing the body applies to, for PATCH: made first. */
  needsListing?: boolean;
  accepted: Record<string, unknown>[];
  /** Refused bodies, with the error details' paths the refusal names. */
  refused: { body: Record<string, unknown>; paths: string[] }[];
}

const RULES: Rule[] = [
  {
    name: 'ListingCreate: exactly one of price_cents and price_dollars',
    op: 'createListing',
    schema: 'ListingCreate',
    accepted: [
      { title: 'Priced in cents', price_cents: 1200 },
      { title: 'Priced in dollars', price_dollars: 12.5 },
    ],
    refused: [
      { body: { title: 'No price' }, paths: ['/price_cents'] },
      {
        body: { title: 'Two prices', price_cents: 1200, price_dollars: 12 },
        paths: ['/price_dollars'],
      },
    ],
  },
  {
    name: 'ListingCreate: status active needs a photo in the body',
    op: 'createListing',
    schema: 'ListingCreate',
    accepted: [
      { title: 'Active, cover', price_cents: 900, status: 'active', cover_image_url: PHOTO },
      { title: 'Active, gallery', price_cents: 900, status: 'active', image_urls: [PHOTO] },
      { title: 'Draft, no photo', price_cents: 900, status: 'draft' },
    ],
    refused: [
      {
        body: { title: 'Active, no photo', price_cents: 900, status: 'active' },
        paths: ['/cover_image_url', '/image_urls'],
      },
      {
        body: {
          title: 'Active, empty photos',
          price_cents: 900,
          status: 'active',
          cover_image_url: null,
          image_urls: [],
        },
        paths: ['/cover_image_url', '/image_urls'],
      },
    ],
  },
  {
    name: 'ListingUpdate: at most one of price_cents and price_dollars',
    op: 'updateListing',
    schema: 'ListingUpdate',
    needsListing: true,
    accepted: [{ price_dollars: 30 }, { price_cents: 3100 }],
    refused: [{ body: { price_cents: 3100, price_dollars: 31 }, paths: ['/price_dollars'] }],
  },
  {
    name: 'SavedSearchCreate: q or a filter',
    op: 'createSavedSearch',
    schema: 'SavedSearchCreate',
    accepted: [
      { name: 'By words', q: 'denim jacket' },
      { name: 'By filter', category: 'outerwear' },
    ],
    refused: [{ body: { name: 'Nothing to match' }, paths: ['/q'] }],
  },
  {
    name: 'WebhookEndpointCreate: * alone in enabled_events; an https URL',
    op: 'createWebhookEndpoint',
    schema: 'WebhookEndpointCreate',
    accepted: [
      { url: `https://${HOOK}/1`, enabled_events: ['*'] },
      // A URL scheme is case-insensitive (RFC 3986 §3.1); a type given twice counts once.
      { url: `HTTPS://${HOOK}/2`, enabled_events: ['listing.created', 'listing.created'] },
    ],
    refused: [
      {
        body: { url: `https://${HOOK}/3`, enabled_events: ['*', 'listing.created'] },
        paths: ['/enabled_events/1'],
      },
      { body: { url: `http://${HOOK}/4` }, paths: ['/url'] },
    ],
  },
];

/**
 * The fields the document's schema errors name: the instancePath, the missing property of a
 * `required`, or the property a `dependentSchemas: {a: {not: {required: [b]}}}` forbids (a
 * generic validator reports that `not` at the object; the schema beside it names b).
 */
function documentPaths(schema: string, body: unknown): string[] {
  const validate = doc.validator(doc.schemaPointerOf(schema));
  if (validate(body)) return [];
  return (validate.errors ?? []).map((e) => {
    if (e.keyword === 'required') return `${e.instancePath}/${String(e.params.missingProperty)}`;
    const dependent = /\/dependentSchemas\/([^/]+)\/not$/.exec(e.schemaPath)?.[1];
    if (e.keyword === 'not' && dependent) {
      const not = doc.at(`${doc.schemaPointerOf(schema)}/dependentSchemas/${dependent}/not`) as {
        required: string[];
      };
      return `${e.instancePath}/${not.required[0]}`;
    }
    return e.instancePath;
  });
}

for (const rule of RULES) {
  t.test(rule.name, async (t) => {
    const serverSchema = compileBodyValidator(schemas[rule.schema] as object);
    let path: Record<string, string> = {};
    if (rule.needsListing) {
      const made = await contract.send(t, {
        op: 'createListing',
        label: 'a listing to update',
        credential: key,
        body: listingBody('Listing to update'),
        expect: 201,
      });
      path = { id: made.json.data.id };
    }
    for (const body of rule.accepted) {
      const label = `accepted: ${JSON.stringify(body)}`;
      t.strictSame(documentPaths(rule.schema, body), [], `document schema ${label}`);
      t.equal(serverSchema(body), null, `server schema ${label}`);
      await contract.send(t, {
        op: rule.op,
        label,
        credential: key,
        path,
        body,
        expect: [200, 201],
      });
    }
    for (const { body, paths } of rule.refused) {
      const label = `refused: ${JSON.stringify(body)}`;
      const fromDocument = documentPaths(rule.schema, body);
      for (const field of paths)
        t.ok(fromDocument.includes(field), `document schema ${label} names ${field}`, {
          found: fromDocument,
        });
      const fromServerSchema = (serverSchema(body) ?? []).map((d) => d.path);
      t.strictSame(fromServerSchema, paths, `server schema ${label} names ${paths.join(', ')}`);
      const res = await contract.send(t, {
        op: rule.op,
        label,
        credential: key,
        path,
        body,
        expect: 400,
      });
      t.equal(res.json?.error?.code, 'validation_error', `${label}: validation_error`);
      t.strictSame(
        (res.json?.error?.details ?? []).map((d: { path: string }) => d.path),
        paths,
        `${label}: the answer names ${paths.join(', ')}, as the schema does`,
      );
    }
  });
}

t.test('a batch item is refused by the schema on its own, naming its field', async (t) => {
  const res = await contract.send(t, {
    op: 'batchCreateListings',
    label: 'one item with two prices, one valid',
    credential: key,
    body: {
      items: [
        { title: 'Batch two prices', price_cents: 100, price_dollars: 1 },
        { title: 'Batch one price', price_dollars: 1 },
      ],
    },
    expect: 200,
  });
  const [refused, accepted] = res.json.data.results;
  t.equal(refused.status, 400, 'the item with two prices is refused');
  t.strictSame(
    refused.error.details.map((d: { path: string }) => d.path),
    ['/price_dollars'],
    'naming /price_dollars',
  );
  t.equal(accepted.status, 201, 'the valid item is created');
});

t.test('zero contract violations', async (t) => {
  t.equal(contract.problems.length, 0, `in ${contract.requests} recorded answers`, {
    problems: contract.problems,
  });
});
