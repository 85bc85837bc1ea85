// Contract tests: replay openapi/openapi.yaml against the server. Every documented example of
// every implemented operation is sent with real credentials, then scenarios drive each
// documented status that can be produced for real. Every answer is checked against the
// document (status, Content-Type, body schema, headers, envelope) and counted in a coverage
// table printed at the end. The document is read with `yaml`, not through src/generated, so
// the generator and the server are both checked against the source of truth.
import { eq } from 'drizzle-orm';
import Fastify from 'fastify';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { oauthCodes, oauthTokens } from '../../src/db/schema.ts';
import { operations as generatedOperations } from '../../src/generated/operations.ts';
import { hashSecret } from '../../src/lib/secrets.ts';
import type { Handlers } from '../../src/lib/handlers.ts';
import {
  bindOperations,
  checkBindings,
  UnboundOperationError,
} from '../../src/plugins/operations.ts';
import { allHandlers, PENDING_OPERATIONS } from '../../src/routes.ts';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { basicAuth, createClient, s256 } from '../oauth/support.ts';
import { coverageReport } from './coverage.ts';
import { OpenApiDocument, responseFor, type DocOperation } from './document.ts';
import { basicHeader, FORM, form, nextAddress, OAuthFixtures, postAuth } from './oauth-fixtures.ts';
import {
  ContractRecorder,
  DEFERRED_HEADERS,
  header,
  type Asserter,
  type ContractRequest,
  type ContractResponse,
} from './recorder.ts';

const doc = new OpenApiDocument();
const pending = new Set<string>(PENDING_OPERATIONS);
/** Operations the server serves (webhooks are sent by the server, not served). */
const served = doc.operations.filter((op) => op.section === 'paths');
const implemented = served.filter((op) => !pending.has(op.operationId));
const isImplemented = (operationId: string) =>
  implemented.some((op) => op.operationId === operationId);

const app = await buildTestApp(t);
const contract = new ContractRecorder(app, doc);
const send = (t: Asserter, request: ContractRequest) => contract.send(t, request);

// ---------------------------------------------------------------------------------------------
// Accounts and credentials, made through the services as the CLI and the portal do.

const seller = await createDeveloper(app);
const rival = await createDeveloper(app);
const keys = {
  sandbox: await createKey(app, seller, 'sandbox'),
  live: await createKey(app, seller, 'live'),
  /** Only `read`: no listings:write. */
  readOnly: await createKey(app, seller, 'sandbox', 'read'),
  /** Only `listings:write`: no read. */
  writeOnly: await createKey(app, seller, 'sandbox', 'listings:write'),
  rivalLive: await createKey(app, rival, 'live'),
};
const revokedKey = await app.services.keys.create({ appId: seller.appId, env: 'sandbox' });
await app.services.keys.revoke(revokedKey.id);
/** Well-formed keys that were never issued. */
const unknownLiveKey = `svc_live_${'Q'.repeat(43)}`;
const unknownSandboxKey = `svc_sandbox_${'Q'.repeat(43)}`;

/**
 * OAuth: registered apps, and a user (a seller of their own, not the keys' owner) who signs in
 * and consents in a real browser session. Access tokens are issued in the fixtures test below,
 * through POST /oauth/token.
 */
const oauth = await OAuthFixtures.create(app, contract);
const tokens = {
  /** `read listings:write`: the caller of the oauth2 security alternative. */
  full: '',
  readOnly: '',
  writeOnly: '',
  revoked: '',
  expired: '',
};
/** A well-formed access token that was never issued. */
const unknownToken = `svc_oauth_${'Q'.repeat(43)}`;
/** The scope of the documented authorization request (authorize's `scope` example). */
const documentedScope = String(
  doc.operation('authorize').parameters.find((p) => p.name === 'scope')?.example ?? 'read',
);
const past = () => new Date(Date.now() - 60_000);

const PHOTO = 'https://images.example.com/contract/cover.jpg';
const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';
const MiB = 1024 * 1024;

/** A valid create body of an active listing with a photo. */
const listingBody = (title: string, extra: Record<string, unknown> = {}) => ({
  title,
  price_cents: 2500,
  status: 'active',
  cover_image_url: PHOTO,
  ...extra,
});

async function createListing(
  t: Asserter,
  credential: string,
  body: Record<string, unknown>,
  label: string,
): Promise<string> {
  const res = await send(t, {
    op: 'createListing',
    label: `fixture: ${label}`,
    credential,
    body,
    expect: [201, 200],
  });
  return String(res.json?.data?.id);
}

const fixtures = {
  liveActive: '',
  sandboxActive: '',
  sandboxDraftNoPhoto: '',
  rivalLiveActive: '',
  rivalLiveDraft: '',
  sandboxArchived: '',
  archivedExternalId: 'contract-archived',
};

t.test('fixtures: listings created through the API', async (t) => {
  fixtures.liveActive = await createListing(
    t,
    keys.live,
    listingBody('Live active fixture'),
    'live active listing',
  );
  fixtures.sandboxActive = await createListing(
    t,
    keys.sandbox,
    listingBody('Sandbox active fixture'),
    'sandbox active listing',
  );
  fixtures.sandboxDraftNoPhoto = await createListing(
    t,
    keys.sandbox,
    { title: 'Draft without photo', price_cents: 900 },
    'draft, no photo',
  );
  fixtures.rivalLiveActive = await createListing(
    t,
    keys.rivalLive,
    listingBody('Rival active fixture'),
    "another seller's live active listing",
  );
  fixtures.rivalLiveDraft = await createListing(
    t,
    keys.rivalLive,
    { title: 'Rival draft fixture', price_cents: 900 },
    "another seller's live draft",
  );
  fixtures.sandboxArchived = await createListing(
    t,
    keys.sandbox,
    listingBody('Archived fixture', { external_id: fixtures.archivedExternalId }),
    'listing to archive',
  );
  await send(t, {
    op: 'archiveListing',
    label: 'fixture: archive it',
    credential: keys.sandbox,
    path: { id: fixtures.sandboxArchived },
    expect: 200,
  });
});

t.test('fixtures: access tokens issued through the authorization code flow', async (t) => {
  tokens.full = await oauth.token(t, 'token with read listings:write', {
    scope: 'read listings:write',
  });
  tokens.readOnly = await oauth.token(t, 'token with read', { scope: 'read' });
  tokens.writeOnly = await oauth.token(t, 'token with listings:write', { scope: 'listings:write' });
  tokens.revoked = await oauth.token(t, 'token to revoke');
  await oauth.revoke(t, tokens.revoked, 'revoke it');
  tokens.expired = await oauth.token(t, 'token to expire');
  // Thirty days cannot be waited for: the stored expiry is moved into the past.
  await app.db
    .update(oauthTokens)
    .set({ expiresAt: past() })
    .where(eq(oauthTokens.tokenHash, hashSecret(tokens.expired)));
});

// ---------------------------------------------------------------------------------------------
// 1. The documented examples, with real credentials and real ids.

interface Caller {
  name: string;
  /** The Bearer credential, if any. */
  credential: string | null;
  env: 'live' | 'sandbox';
  /** Other request headers of the caller: HTTP Basic client authentication, a session cookie. */
  headers?: Record<string, string>;
  /** client_secret_post: the client's credentials as body fields. */
  clientFields?: Record<string, string>;
}

const notReplayed: string[] = [];

/**
 * Operations that authenticate the client (client_secret_basic, or client_secret_post with no
 * scheme).
 */
const authenticatesClient = (op: DocOperation) => op.security.some((r) => 'clientBasic' in r);
/** Operations answering HTML pages to browsers, which differ with a signed-in session. */
const servesPages = (op: DocOperation) =>
  [...op.responses].some(([status, r]) => /^2\d\d$/.test(status) && r.content.has('text/html'));
const withinGrantedScopes = (scopes: string[]) =>
  scopes.every((s) => s === 'read' || s === 'listings:write');

/** One caller per security alternative the tests can satisfy for real. */
function callersFor(op: DocOperation): Caller[] {
  const callers: Caller[] = [];
  for (const requirement of op.security) {
    const schemes = Object.entries(requirement);
    if (schemes.length === 0) {
      // With no scheme, /oauth/token and /oauth/revoke authenticate the client by body fields.
      if (authenticatesClient(op))
        callers.push({
          name: 'client_secret_post',
          credential: null,
          env: 'live',
          clientFields: postAuth(oauth.client),
        });
      else callers.push({ name: 'anonymous', credential: null, env: 'live' });
      if (servesPages(op))
        callers.push({
          name: 'a signed-in browser',
          credential: null,
          env: 'live',
          headers: { cookie: oauth.sessionCookie() },
        });
    }
    for (const [scheme, scopes] of schemes) {
      if (scheme === 'apiKey' && withinGrantedScopes(scopes)) {
        callers.push({ name: 'sandbox key', credential: keys.sandbox, env: 'sandbox' });
        callers.push({ name: 'live key', credential: keys.live, env: 'live' });
      } else if (scheme === 'oauth2' && withinGrantedScopes(scopes)) {
        callers.push({ name: 'OAuth access token', credential: tokens.full, env: 'live' });
      } else if (scheme === 'clientBasic') {
        callers.push({
          name: 'client_secret_basic',
          credential: null,
          env: 'live',
          headers: basicHeader(oauth.client),
        });
      } else {
        notReplayed.push(
          `${op.operationId} as ${scheme} (${scopes.join(' ') || 'no scope'}): no such credential can be issued yet`,
        );
      }
    }
  }
  return callers;
}

interface Variant {
  name: string;
  query: Record<string, string | readonly string[]>;
  headers: Record<string, string>;
  body?: { media: string; value: unknown };
}

/** Each body example with the required parameters only, then every parameter example at once. */
function variantsOf(op: DocOperation): Variant[] {
  type Values = Record<string, string | readonly string[]>;
  const required = { query: {} as Values, headers: {} as Record<string, string> };
  const all = { query: {} as Values, headers: {} as Record<string, string> };
  let optionalExamples = 0;
  // A parameter's `example` goes with every other one; a value that only goes with some (a
  // search cursor, the owner view's seller=me) is a named `examples` entry instead.
  for (const p of op.parameters) {
    if (!p.hasExample || (p.in !== 'query' && p.in !== 'header')) continue;
    if (p.in === 'query') {
      const value = Array.isArray(p.example) ? p.example.map(String) : String(p.example);
      all.query[p.name] = value;
      if (p.required) required.query[p.name] = value;
    } else {
      all.headers[p.name] = String(p.example);
      if (p.required) required.headers[p.name] = String(p.example);
    }
    if (!p.required) optionalExamples += 1;
  }
  const bodies: { name: string; media: string; value: unknown }[] = [];
  for (const [media, definition] of op.requestBody?.content ?? []) {
    for (const example of definition.examples)
      bodies.push({ name: example.name, media, value: example.value });
  }
  const variants: Variant[] =
    bodies.length > 0
      ? bodies.map((b) => ({ name: `body example ${b.name}`, ...required, body: b }))
      : [
          {
            name: optionalExamples > 0 ? 'required parameters only' : 'as documented',
            ...required,
          },
        ];
  if (optionalExamples > 0) {
    const first = bodies[0];
    variants.push({
      name: `every parameter example${first ? ` + body example ${first.name}` : ''}`,
      ...all,
      ...(first ? { body: first } : {}),
    });
  }
  return variants;
}

/** Real values for path parameters: a listing the caller may use, a real username. */
async function pathFor(
  t: Asserter,
  op: DocOperation,
  caller: Caller,
): Promise<Record<string, string>> {
  const path: Record<string, string> = {};
  for (const p of op.parameters.filter((p) => p.in === 'path')) {
    if (p.name === 'username') path[p.name] = seller.username;
    else if (p.name === 'id') {
      if (op.method === 'GET')
        path[p.name] = caller.env === 'sandbox' ? fixtures.sandboxActive : fixtures.liveActive;
      else {
        // A write starts from a listing of its own, so examples never depend on each other.
        const credential = caller.credential ?? keys.live;
        path[p.name] = await createListing(
          t,
          credential,
          listingBody(`For ${op.operationId} example`),
          `a listing for ${op.operationId}`,
        );
      }
    } else path[p.name] = String(p.example);
  }
  return path;
}

function bodyRequest(
  body: Variant['body'],
): Pick<ContractRequest, 'body' | 'rawBody' | 'contentType'> {
  if (!body) return {};
  if (body.media === 'application/json') return { body: body.value };
  if (body.media === 'application/x-www-form-urlencoded') {
    return {
      rawBody: new URLSearchParams(body.value as Record<string, string>).toString(),
      contentType: body.media,
    };
  }
  return { rawBody: String(body.value), contentType: body.media };
}

const successStatuses = (op: DocOperation) =>
  [...op.responses.keys()].filter((k) => /^2\d\d$/.test(k)).map(Number);

type AfterReplay = (t: Asserter, res: ContractResponse) => Promise<void>;

interface Prepared {
  query: Record<string, string | readonly string[]>;
  headers: Record<string, string>;
  body: Variant['body'];
  /** Checks of what the answer did, beyond its shape (a token works, a revoked one does not...). */
  after: AfterReplay[];
}

/**
 * Real values for the example's OAuth placeholders: client_id and redirect_uri name the
 * registered app; the client's credentials are the caller's, placed as its security
 * alternative says (Basic header, or body fields); `code` is a fresh code of the documented
 * authorization request (its scope, and its PKCE challenge when the example sends the
 * code_verifier, which the document pairs with authorize's code_challenge example); `token` is
 * a fresh access token of the app.
 */
async function prepare(
  t: Asserter,
  op: DocOperation,
  caller: Caller,
  variant: Variant,
): Promise<Prepared> {
  const prepared: Prepared = {
    query: { ...variant.query },
    headers: { ...variant.headers, ...caller.headers },
    body: variant.body,
    after: [],
  };
  if ('client_id' in prepared.query) prepared.query.client_id = oauth.client.clientId;
  if ('redirect_uri' in prepared.query) prepared.query.redirect_uri = oauth.client.redirectUri;
  if (variant.body?.media !== FORM) return prepared;

  const fields = { ...(variant.body.value as Record<string, string>) };
  if (authenticatesClient(op)) {
    delete fields.client_id;
    delete fields.client_secret;
    Object.assign(fields, caller.clientFields);
  }
  if ('redirect_uri' in fields) fields.redirect_uri = oauth.client.redirectUri;
  if ('code' in fields) {
    const verifier = fields.code_verifier;
    fields.code = await oauth.code({
      scope: documentedScope,
      ...(verifier === undefined ? {} : { challenge: s256(verifier) }),
    });
    prepared.after.push(async (t, res) => {
      t.equal(res.json?.scope, documentedScope, 'the granted scope is the requested one');
      const token = res.json?.access_token;
      if (typeof token === 'string') {
        await send(t, {
          op: 'oauthUserinfo',
          label: `the token the ${variant.name} just got`,
          credential: token,
          expect: 200,
        });
      }
    });
  }
  if ('refresh_token' in fields) {
    const { refresh } = await oauth.tokens(
      t,
      `a refresh token for the ${variant.name} as ${caller.name}`,
      { scope: documentedScope },
    );
    fields.refresh_token = refresh;
    prepared.after.push(async (t, res) => {
      t.equal(
        res.json?.scope,
        fields.scope ?? documentedScope,
        'the refresh grants the scope asked for',
      );
      t.match(res.json?.refresh_token, /^svc_rt_/, 'and a new refresh token');
      t.not(res.json?.refresh_token, refresh, 'a rotated one');
    });
  }
  if ('token' in fields) {
    const token = await oauth.token(
      t,
      `a token for the ${op.operationId} ${variant.name} as ${caller.name}`,
      { scope: documentedScope },
    );
    fields.token = token;
    prepared.after.push(async (t) => {
      await send(t, {
        op: 'oauthUserinfo',
        label: `the token the ${variant.name} just revoked`,
        credential: token,
        expect: 401,
      });
    });
  }
  prepared.body = { media: FORM, value: fields };
  return prepared;
}

/** What each operation's documented example must have done, beyond a documented answer. */
const afterReplay: Record<
  string,
  (t: Asserter, res: ContractResponse, caller: Caller, sent: Prepared) => void
> = {
  // The batch example documents what each of its items gives once the createListing examples
  // ran before it: inv-000482 upserted (200), inv-000483 created (201), inv-000484 refused
  // (active without a photo, 400).
  batchCreateListings: (t, res, caller) => {
    if (res.status !== 200) return;
    const example = responseFor(doc.operation('batchCreateListings'), 200)?.content.get(
      'application/json',
    )?.examples[0]?.value as { data: { results: { ok: boolean; status: number }[] } } | undefined;
    t.strictSame(
      (res.json?.data?.results ?? []).map((r: { ok: boolean; status: number }) => [r.ok, r.status]),
      example?.data.results.map((r) => [r.ok, r.status]),
      `batch example as ${caller.name} gives the documented per-item results`,
    );
  },
  // "The sign-in form (fields username, password) when there is no session, then the consent
  // form (name="decision" value="allow" and value="deny")", posting to itself with the query
  // string and a CSRF token; framing forbidden.
  authorize: (t, res, caller, sent) => {
    const signedIn = caller.headers?.cookie !== undefined;
    if (signedIn) {
      t.match(
        res.text,
        /<button[^>]*name="decision" value="allow"/,
        `${caller.name}: the consent page, with Allow`,
      );
      t.match(
        res.text,
        /<button[^>]*name="decision" value="deny"/,
        `${caller.name}: the consent page, with Deny`,
      );
    } else {
      t.match(
        res.text,
        /<input[^>]*name="username"/,
        `${caller.name}: the sign-in page, with username`,
      );
      t.match(
        res.text,
        /<input[^>]*type="password"[^>]*name="password"|<input[^>]*name="password"[^>]*type="password"/,
        'and password',
      );
      t.notMatch(res.text, /name="decision"/, 'no consent form before sign-in');
    }
    t.match(
      res.text,
      /<input type="hidden" name="csrf_token" value="[^"]+">/,
      'a CSRF token in a hidden input',
    );
    const action = /<form method="post" action="([^"]+)"/
      .exec(res.text)?.[1]
      ?.replaceAll('&amp;', '&');
    t.strictSame(
      action === undefined ? null : Object.fromEntries(new URL(action, 'http://x').searchParams),
      sent.query,
      'the form posts to /oauth/authorize with the original query',
    );
    t.equal(header(res.headers, 'x-frame-options'), 'DENY', 'X-Frame-Options: DENY');
    t.match(
      header(res.headers, 'content-security-policy'),
      /frame-ancestors 'none'/,
      "CSP frame-ancestors 'none'",
    );
  },
  oauthUserinfo: (t, res) => {
    t.match(
      res.json?.data,
      { username: oauth.user.username, email: oauth.user.email },
      'the profile of the user who authorized the token, with email',
    );
    t.equal(res.json?.sub, res.json?.data?.id, 'sub is the user id');
  },
  // "OAuth access tokens act as the user who authorized the app" (API keys: as the app owner).
  getMe: (t, res, caller) => {
    const wanted = caller.credential === tokens.full ? oauth.user.username : seller.username;
    t.equal(res.json?.data?.username, wanted, `as ${caller.name}: the profile of ${wanted}`);
  },
};

t.test('documented examples, replayed with real credentials', async (t) => {
  for (const op of implemented) {
    for (const caller of callersFor(op)) {
      for (const variant of variantsOf(op)) {
        const sent = await prepare(t, op, caller, variant);
        const res = await send(t, {
          op: op.operationId,
          label: `${variant.name}, as ${caller.name}`,
          credential: caller.credential,
          path: await pathFor(t, op, caller),
          query: sent.query,
          headers: sent.headers,
          ...bodyRequest(sent.body),
          ...(authenticatesClient(op) ? { remoteAddress: nextAddress() } : {}),
          expect: successStatuses(op),
        });
        if (!successStatuses(op).includes(res.status)) continue;
        afterReplay[op.operationId]?.(t, res, caller, sent);
        for (const after of sent.after) await after(t, res);
      }
    }
  }
});

// ---------------------------------------------------------------------------------------------
// 2. Scenarios for every documented status that can be produced for real.

/** Invalid credentials: each must be 401 on public reads too, never silently anonymous. */
const badCredentials = () => [
  { name: 'an unknown live key', credential: unknownLiveKey },
  { name: 'an unknown sandbox key', credential: unknownSandboxKey },
  { name: 'a revoked key', credential: revokedKey.key },
  { name: 'a token of no known kind', credential: 'not_a_known_credential' },
  { name: 'an unknown access token', credential: unknownToken },
  { name: 'a revoked access token', credential: tokens.revoked },
  { name: 'an expired access token', credential: tokens.expired },
];

async function unauthorized(
  t: Asserter,
  op: string,
  path: Record<string, string> = {},
  extra: Partial<ContractRequest> = {},
) {
  for (const bad of badCredentials()) {
    await send(t, {
      op,
      label: `with ${bad.name}`,
      credential: bad.credential,
      path,
      ...extra,
      expect: 401,
    });
  }
  await send(t, {
    op,
    label: 'with a non-Bearer Authorization header',
    headers: { authorization: 'Basic dXNlcjpwYXNz' },
    path,
    ...extra,
    expect: 401,
  });
}

t.test('getHealth', async (t) => {
  const checked = await send(t, {
    op: 'getHealth',
    label: 'db=1 with a live key',
    credential: keys.live,
    query: { db: '1' },
    expect: 200,
  });
  t.equal(checked.json?.data?.db, true, 'db=1 checks the database');
  const unchecked = await send(t, {
    op: 'getHealth',
    label: 'db=0',
    query: { db: '0' },
    expect: 200,
  });
  t.equal(unchecked.json?.data?.db, null, 'db is null without db=1');
  const chosen = await send(t, {
    op: 'getHealth',
    label: 'with a client-chosen X-Request-Id',
    headers: { 'x-request-id': 'client-chosen' },
    expect: 200,
  });
  t.not(
    header(chosen.headers, 'x-request-id'),
    'client-chosen',
    'an incoming X-Request-Id is ignored',
  );
  await send(t, {
    op: 'getHealth',
    label: 'db=2 is not an allowed value',
    query: { db: '2' },
    expect: 400,
  });
  await send(t, {
    op: 'getHealth',
    label: 'db=yes is not an allowed value',
    query: { db: 'yes' },
    expect: 400,
  });
  await unauthorized(t, 'getHealth');
});

t.test('getOpenApiJson and getOpenApiYaml serve this document', async (t) => {
  const json = await send(t, { op: 'getOpenApiJson', label: 'anonymous', expect: 200 });
  t.strictSame(
    Object.keys(json.json?.paths ?? {}),
    Object.keys(doc.raw.paths as object),
    'the JSON document has the same paths',
  );
  t.equal(
    json.json?.info?.version,
    (doc.raw.info as { version: string }).version,
    'the JSON document has the same version',
  );
  const yaml = await send(t, {
    op: 'getOpenApiYaml',
    label: 'with a sandbox key',
    credential: keys.sandbox,
    expect: 200,
  });
  const served = parseYaml(yaml.text) as { paths: object; components: object };
  t.strictSame(
    Object.keys(served.paths),
    Object.keys(doc.raw.paths as object),
    'the YAML document has the same paths',
  );
  t.strictSame(served.components, doc.raw.components, 'the YAML document has the same components');
  await unauthorized(t, 'getOpenApiJson');
  await unauthorized(t, 'getOpenApiYaml');
});

t.test('getMe', async (t) => {
  const me = await send(t, {
    op: 'getMe',
    label: 'key with only read',
    credential: keys.readOnly,
    expect: 200,
  });
  t.equal(me.json?.data?.username, seller.username, 'the key acts as its app owner');
  await send(t, { op: 'getMe', label: 'no credential', expect: 401 });
  await unauthorized(t, 'getMe');
  const noRead = await send(t, {
    op: 'getMe',
    label: 'key without read',
    credential: keys.writeOnly,
    expect: 403,
  });
  t.match(
    header(noRead.headers, 'www-authenticate'),
    /error="insufficient_scope", scope="read"/,
    'a missing scope is named in WWW-Authenticate',
  );
});

t.test('getProfile', async (t) => {
  await send(t, {
    op: 'getProfile',
    label: 'with a live key',
    credential: keys.live,
    path: { username: rival.username },
    expect: 200,
  });
  await send(t, {
    op: 'getProfile',
    label: 'unknown username',
    path: { username: 'no_such_seller' },
    expect: 404,
  });
  await send(t, {
    op: 'getProfile',
    label: 'not a valid username',
    path: { username: 'Not A Username!' },
    expect: 404,
  });
  await send(t, {
    op: 'getProfile',
    label: 'username in another case',
    path: { username: seller.username.toUpperCase() },
    expect: 404,
  });
  await unauthorized(t, 'getProfile', { username: seller.username });
});

t.test('listListings', async (t) => {
  const first = await send(t, {
    op: 'listListings',
    label: 'limit=1',
    query: { limit: '1' },
    expect: 200,
  });
  const unchanged = await send(t, {
    op: 'listListings',
    label: 'limit=1, If-None-Match: the ETag of that page',
    query: { limit: '1' },
    headers: { 'if-none-match': String(first.headers.etag) },
    expect: 304,
  });
  t.equal(unchanged.text, '', '304: no body');
  t.equal(unchanged.headers.etag, first.headers.etag, '304: the same ETag');
  const cursor = first.json?.meta?.next_cursor;
  t.type(cursor, 'string', 'a full page has a next_cursor');
  if (typeof cursor === 'string')
    await send(t, {
      op: 'listListings',
      label: 'next page by cursor',
      query: { limit: '1', cursor },
      expect: 200,
    });
  const sandbox = await send(t, {
    op: 'listListings',
    label: 'sandbox key sees its drafts',
    credential: keys.sandbox,
    query: { limit: '100' },
    expect: 200,
  });
  t.ok(
    (sandbox.json?.data ?? []).some((l: { id: string }) => l.id === fixtures.sandboxDraftNoPhoto),
    "a sandbox key sees its owner's sandbox drafts",
  );
  for (const limit of ['0', '101', '2.5', 'abc', '-1']) {
    await send(t, { op: 'listListings', label: `limit=${limit}`, query: { limit }, expect: 400 });
  }
  await send(t, {
    op: 'listListings',
    label: 'cursor is not a date-time',
    query: { cursor: 'yesterday' },
    expect: 400,
  });
  await unauthorized(t, 'listListings');
});

t.test('createListing', async (t) => {
  const op = 'createListing';
  const credential = keys.sandbox;
  const created = await send(t, {
    op,
    label: 'new external_id',
    credential,
    body: listingBody('Created for upsert', { external_id: 'contract-upsert' }),
    expect: 201,
  });
  t.equal(
    header(created.headers, 'location'),
    `/api/v1/listings/${created.json?.data?.id}`,
    'Location names the new listing',
  );
  const upserted = await send(t, {
    op,
    label: 'same external_id through Idempotency-Key: upsert',
    credential,
    headers: { 'idempotency-key': 'contract-upsert' },
    body: listingBody('Upserted title'),
    expect: 200,
  });
  t.equal(upserted.json?.data?.id, created.json?.data?.id, 'the upsert answers the same listing');
  t.equal(
    upserted.json?.meta?.idempotency_key,
    'contract-upsert',
    'meta.idempotency_key echoes the header',
  );

  const invalid: [string, unknown][] = [
    ['title too short', listingBody('ab')],
    ['both prices', listingBody('Both prices', { price_dollars: 25 })],
    ['no price', { title: 'No price at all' }],
    ['unknown field', listingBody('Unknown field', { colour: 'red' })],
    ['price_cents as a string', listingBody('String price', { price_cents: '2500' })],
    ['price_dollars with three decimals', { title: 'Three decimals', price_dollars: 19.999 }],
    ['status archived', listingBody('Archived on create', { status: 'archived' })],
    ['active without a photo', { title: 'Active, no photo', price_cents: 100, status: 'active' }],
    ['a JSON array', []],
  ];
  for (const [label, body] of invalid) await send(t, { op, label, credential, body, expect: 400 });
  await send(t, {
    op,
    label: 'Idempotency-Key differs from body external_id',
    credential,
    headers: { 'idempotency-key': 'key-one' },
    body: listingBody('Mismatched keys', { external_id: 'key-two' }),
    expect: 400,
  });
  await send(t, { op, label: 'malformed JSON', credential, rawBody: '{"title": ', expect: 400 });
  await send(t, { op, label: 'empty JSON body', credential, rawBody: '', expect: 400 });

  await send(t, { op, label: 'no credential', body: listingBody('Anonymous write'), expect: 401 });
  await unauthorized(t, op, {}, { body: listingBody('Bad credential write') });
  const scope = await send(t, {
    op,
    label: 'key with only read',
    credential: keys.readOnly,
    body: listingBody('Read-only write'),
    expect: 403,
  });
  t.match(
    header(scope.headers, 'www-authenticate'),
    /error="insufficient_scope", scope="listings:write"/,
    'the missing scope is named',
  );

  await send(t, {
    op,
    label: 'external_id of an archived listing',
    credential,
    body: listingBody('Upsert archived', { external_id: fixtures.archivedExternalId }),
    expect: 409,
  });
  await send(t, {
    op,
    label: 'body over 1 MiB',
    credential,
    rawBody: JSON.stringify(listingBody('Huge', { description: 'x'.repeat(MiB) })),
    expect: 413,
  });
  await send(t, {
    op,
    label: 'text/plain body',
    credential,
    rawBody: 'title=Plain',
    contentType: 'text/plain',
    expect: 415,
  });
});

t.test('batchCreateListings', async (t) => {
  const op = 'batchCreateListings';
  const credential = keys.sandbox;
  const item = (n: number, extra: Record<string, unknown> = {}) =>
    listingBody(`Batch item ${n}`, extra);

  const allFailed = await send(t, {
    op,
    label: 'every item fails (no photo; archived external_id)',
    credential,
    body: {
      items: [
        { title: 'Active, no photo', price_cents: 100, status: 'active' },
        item(1, { external_id: fixtures.archivedExternalId }),
      ],
    },
    expect: 422,
  });
  t.strictSame(
    (allFailed.json?.data?.results ?? []).map((r: { ok: boolean; status: number }) => [
      r.ok,
      r.status,
    ]),
    [
      [false, 400],
      [false, 409],
    ],
    'each failed item has the status a single POST would have answered',
  );
  t.match(
    allFailed.json?.meta,
    { total: 2, created: 0, updated: 0, failed: 2, max_per_request: 25 },
    'meta counts the failures',
  );

  // The document: "Each entry is validated against ListingCreate on its own; an invalid entry is
  // a failed result (status: 400, details paths relative to the entry), not a request-level error."
  const mixed = await send(t, {
    op,
    label: 'one schema-invalid item among valid ones',
    credential,
    body: { items: [item(2), { title: 'ab', price_cents: 100 }] },
    expect: 200,
  });
  if (mixed.status === 200) {
    t.match(mixed.json?.data?.results?.[1], {
      index: 1,
      ok: false,
      status: 400,
      error: { code: 'validation_error', details: [{ path: '/title' }] },
    });
  }

  for (const [label, body] of [
    ['no items', { items: [] }],
    ['26 items', { items: Array.from({ length: 26 }, (_, n) => item(n)) }],
    ['a top-level field besides items', { items: [item(3)], dry_run: true }],
    ['items is not an array', { items: item(4) }],
    ['a JSON array', [item(5)]],
  ] as const) {
    await send(t, { op, label, credential, body, expect: 400 });
  }
  await send(t, { op, label: 'malformed JSON', credential, rawBody: '{"items": [', expect: 400 });

  await send(t, { op, label: 'no credential', body: { items: [item(6)] }, expect: 401 });
  await unauthorized(t, op, {}, { body: { items: [item(7)] } });
  await send(t, {
    op,
    label: 'key with only read',
    credential: keys.readOnly,
    body: { items: [item(8)] },
    expect: 403,
  });

  // The batch endpoint accepts up to 2 MiB (Errors table, PayloadTooLarge): 1.5 MiB of
  // whitespace around a valid body is within its limit.
  const padded = JSON.stringify({ items: [item(9)] }) + ' '.repeat(1.5 * MiB);
  await send(t, {
    op,
    label: 'valid body of 1.5 MiB (limit is 2 MiB on batch)',
    credential,
    rawBody: padded,
    expect: 200,
  });
  await send(t, {
    op,
    label: 'body over 2 MiB',
    credential,
    rawBody: JSON.stringify({ items: [item(10, { description: 'x'.repeat(2 * MiB) })] }),
    expect: 413,
  });
  await send(t, {
    op,
    label: 'text/plain body',
    credential,
    rawBody: 'items',
    contentType: 'text/plain',
    expect: 415,
  });
});

t.test('getListing', async (t) => {
  const op = 'getListing';
  const publicView = await send(t, {
    op,
    label: 'anonymous, live active',
    path: { id: fixtures.liveActive },
    expect: 200,
  });
  t.notOk(
    'external_id' in (publicView.json?.data ?? {}) ||
      'api_environment' in (publicView.json?.data ?? {}),
    'no owner fields for others',
  );
  const ownerView = await send(t, {
    op,
    label: 'owner live key',
    credential: keys.live,
    path: { id: fixtures.liveActive },
    expect: 200,
  });
  t.match(ownerView.json?.data, { api_environment: 'live' }, 'owner fields for the owner');
  t.not(ownerView.headers.etag, publicView.headers.etag, "the owner's view has its own ETag");
  await send(t, {
    op,
    label: 'owner live key, If-None-Match: W/ and a list holding its ETag',
    credential: keys.live,
    path: { id: fixtures.liveActive },
    headers: { 'if-none-match': `"other", W/${String(ownerView.headers.etag)}` },
    expect: 304,
  });
  await send(t, {
    op,
    label: "owner live key, If-None-Match: the public view's ETag",
    credential: keys.live,
    path: { id: fixtures.liveActive },
    headers: { 'if-none-match': String(publicView.headers.etag) },
    expect: 200,
  });
  t.ok(
    'external_id' in (ownerView.json?.data ?? {}),
    'external_id is present (null) for the owner',
  );
  await send(t, {
    op,
    label: 'rival live key, live active listing of another seller',
    credential: keys.rivalLive,
    path: { id: fixtures.liveActive },
    expect: 200,
  });

  await send(t, { op, label: 'id is not a uuid', path: { id: 'not-a-uuid' }, expect: 400 });
  await unauthorized(t, op, { id: fixtures.liveActive });
  await send(t, { op, label: 'unknown id', path: { id: UNKNOWN_ID }, expect: 404 });
  await send(t, {
    op,
    label: 'sandbox listing, live key of its owner',
    credential: keys.live,
    path: { id: fixtures.sandboxActive },
    expect: 404,
  });
  await send(t, {
    op,
    label: 'sandbox listing, anonymous',
    path: { id: fixtures.sandboxActive },
    expect: 404,
  });
  await send(t, {
    op,
    label: "another seller's live draft",
    credential: keys.live,
    path: { id: fixtures.rivalLiveDraft },
    expect: 404,
  });
});

t.test('updateListing', async (t) => {
  const op = 'updateListing';
  const credential = keys.sandbox;
  const id = fixtures.sandboxActive;
  await send(t, {
    op,
    label: 'change the title',
    credential,
    path: { id },
    body: { title: 'Renamed fixture' },
    expect: 200,
  });

  const invalid: [string, string, unknown][] = [
    ['empty body', id, {}],
    ['unknown field', id, { colour: 'red' }],
    ['status archived', id, { status: 'archived' }],
    ['both prices', id, { price_cents: 100, price_dollars: 1 }],
    ['title too short', id, { title: 'ab' }],
    ['remove the last photo of an active listing', id, { cover_image_url: null, image_urls: [] }],
    ['make active without a photo', fixtures.sandboxDraftNoPhoto, { status: 'active' }],
  ];
  for (const [label, target, body] of invalid)
    await send(t, { op, label, credential, path: { id: target }, body, expect: 400 });
  await send(t, {
    op,
    label: 'id is not a uuid',
    credential,
    path: { id: 'not-a-uuid' },
    body: { title: 'Bad id' },
    expect: 400,
  });
  await send(t, {
    op,
    label: 'malformed JSON',
    credential,
    path: { id },
    rawBody: '{"title"',
    expect: 400,
  });

  await send(t, {
    op,
    label: 'no credential',
    path: { id },
    body: { title: 'Anonymous' },
    expect: 401,
  });
  await unauthorized(t, op, { id }, { body: { title: 'Bad credential' } });
  await send(t, {
    op,
    label: 'key with only read',
    credential: keys.readOnly,
    path: { id },
    body: { title: 'Read only' },
    expect: 403,
  });
  await send(t, {
    op,
    label: "another seller's live active listing",
    credential: keys.live,
    path: { id: fixtures.rivalLiveActive },
    body: { title: 'Not mine' },
    expect: 403,
  });
  await send(t, {
    op,
    label: 'unknown id',
    credential,
    path: { id: UNKNOWN_ID },
    body: { title: 'Nobody' },
    expect: 404,
  });
  await send(t, {
    op,
    label: 'sandbox listing with a live key',
    credential: keys.live,
    path: { id },
    body: { title: 'Other env' },
    expect: 404,
  });
  await send(t, {
    op,
    label: 'archived listing',
    credential,
    path: { id: fixtures.sandboxArchived },
    body: { title: 'Revive' },
    expect: 409,
  });
  await send(t, {
    op,
    label: 'body over 1 MiB',
    credential,
    path: { id },
    rawBody: JSON.stringify({ description: 'x'.repeat(MiB) }),
    expect: 413,
  });
  await send(t, {
    op,
    label: 'text/plain body',
    credential,
    path: { id },
    rawBody: 'title=Plain',
    contentType: 'text/plain',
    expect: 415,
  });
});

t.test('archiveListing', async (t) => {
  const op = 'archiveListing';
  const id = await createListing(
    t,
    keys.sandbox,
    listingBody('To be archived twice'),
    'listing to archive twice',
  );
  const first = await send(t, {
    op,
    label: 'archive',
    credential: keys.sandbox,
    path: { id },
    expect: 200,
  });
  t.equal(first.json?.data?.status, 'archived');
  await send(t, {
    op,
    label: 'archive again returns it again',
    credential: keys.sandbox,
    path: { id },
    expect: 200,
  });

  await send(t, {
    op,
    label: 'id is not a uuid',
    credential: keys.sandbox,
    path: { id: 'not-a-uuid' },
    expect: 400,
  });
  await send(t, { op, label: 'no credential', path: { id: fixtures.liveActive }, expect: 401 });
  await unauthorized(t, op, { id: fixtures.liveActive });
  await send(t, {
    op,
    label: 'key with only read',
    credential: keys.readOnly,
    path: { id: fixtures.sandboxActive },
    expect: 403,
  });
  await send(t, {
    op,
    label: "another seller's live active listing",
    credential: keys.live,
    path: { id: fixtures.rivalLiveActive },
    expect: 403,
  });
  await send(t, {
    op,
    label: 'unknown id',
    credential: keys.sandbox,
    path: { id: UNKNOWN_ID },
    expect: 404,
  });
  await send(t, {
    op,
    label: "another seller's live draft",
    credential: keys.live,
    path: { id: fixtures.rivalLiveDraft },
    expect: 404,
  });
});

// Operations still pending get their scenarios as soon as they are bound.
t.test('listEvents', { skip: !isImplemented('listEvents') && 'pending' }, async (t) => {
  const op = 'listEvents';
  await send(t, {
    op,
    label: 'type filter',
    credential: keys.sandbox,
    query: { type: 'listing.created', limit: '5' },
    expect: 200,
  });
  await send(t, {
    op,
    label: 'limit=0',
    credential: keys.sandbox,
    query: { limit: '0' },
    expect: 400,
  });
  await send(t, {
    op,
    label: 'unknown type',
    credential: keys.sandbox,
    query: { type: 'listing.exploded' },
    expect: 400,
  });
  await send(t, {
    op,
    label: 'cursor is not a date-time',
    credential: keys.sandbox,
    query: { cursor: 'yesterday' },
    expect: 400,
  });
  await send(t, { op, label: 'no credential', expect: 401 });
  await unauthorized(t, op);
  await send(t, { op, label: 'key without read', credential: keys.writeOnly, expect: 403 });
});

// OAuth. Errors of /oauth/token and /oauth/revoke are validated against OAuthError by the
// recorder (never the envelope, Cache-Control: no-store, Basic challenge after Basic); here
// each scenario also names the RFC 6749 error code it must get.

function oauthError(t: Asserter, res: ContractResponse, error: string) {
  t.equal(res.json?.error, error, `error=${error}`, { body: res.text.slice(0, 300) });
}

t.test(
  'getAuthorizationServerMetadata',
  { skip: !isImplemented('getAuthorizationServerMetadata') && 'pending' },
  async (t) => {
    const op = doc.operation('getAuthorizationServerMetadata');
    const res = await send(t, { op: op.operationId, label: 'anonymous', expect: 200 });
    // The example is written for the default BASE_URL; every URL is built from BASE_URL.
    const example = JSON.stringify(
      responseFor(op, 200)?.content.get('application/json')?.examples[0]?.value,
    );
    t.strictSame(
      res.json,
      JSON.parse(example.replaceAll('http://127.0.0.1:3000', app.config.baseUrl)),
      'the documented metadata, for this BASE_URL',
    );
    t.equal(res.json?.issuer, app.config.baseUrl, 'issuer is BASE_URL');
    t.equal(header(res.headers, 'cache-control'), 'public, max-age=3600', 'cacheable for an hour');
    await send(t, {
      op: op.operationId,
      label: 'with an API key (no credential is needed or checked)',
      credential: keys.live,
      expect: 200,
    });
  },
);

const CHALLENGE = s256('contract-verifier-0123456789-0123456789-0123456789');
type QueryValue = string | readonly string[] | undefined;
/** An authorization request of the registered app; undefined leaves a parameter out. */
function authorizeQuery(
  extra: Record<string, QueryValue> = {},
  client = oauth.client,
): Record<string, string | readonly string[]> {
  const all: Record<string, QueryValue> = {
    response_type: 'code',
    client_id: client.clientId,
    redirect_uri: client.redirectUri,
    state: 'contract-state',
    ...extra,
  };
  return Object.fromEntries(
    Object.entries(all).filter(
      (e): e is [string, string | readonly string[]] => e[1] !== undefined,
    ),
  );
}

/** RFC 6749 §4.1.2.1: back at the registered URI (its own query kept) with the result appended. */
function redirectedTo(
  t: Asserter,
  res: ContractResponse,
  redirectUri: string,
  expected: Record<string, string | null>,
) {
  const location = header(res.headers, 'location') ?? '';
  t.ok(
    location.startsWith(`${redirectUri}${redirectUri.includes('?') ? '&' : '?'}`),
    `Location starts with the registered redirect_uri (${location})`,
  );
  const params = new URL(location, 'http://invalid').searchParams;
  for (const [name, value] of Object.entries(expected))
    t.equal(params.get(name), value, `Location ${name}=${value}`);
}

t.test('authorize', { skip: !isImplemented('authorize') && 'pending' }, async (t) => {
  const op = 'authorize';
  const session = { cookie: oauth.sessionCookie() };

  const login = await send(t, {
    op,
    label: 'no session: the sign-in page',
    query: authorizeQuery({ scope: 'read listings:write' }),
    expect: 200,
  });
  t.match(login.text, /name="password"/, 'the sign-in page');
  const consent = await send(t, {
    op,
    label: 'signed in: the consent page',
    headers: session,
    query: authorizeQuery({ scope: 'listings:write' }),
    expect: 200,
  });
  t.match(consent.text, /name="decision" value="allow"/, 'the consent page');
  await send(t, {
    op,
    label: 'signed in, with PKCE S256 and no state',
    headers: session,
    query: authorizeQuery({
      state: undefined,
      code_challenge: CHALLENGE,
      code_challenge_method: 'S256',
    }),
    expect: 200,
  });
  await send(t, {
    op,
    label: 'unknown parameters are ignored',
    headers: session,
    query: authorizeQuery({ prompt: 'consent', nonce: 'n' }),
    expect: 200,
  });

  // Step 2: once the client and redirect URI are trusted, problems go back to the client (302).
  const redirects: [string, Record<string, QueryValue>, string][] = [
    ['response_type=token', { response_type: 'token' }, 'unsupported_response_type'],
    ['no response_type', { response_type: undefined }, 'invalid_request'],
    ['response_type repeated', { response_type: ['code', 'code'] }, 'invalid_request'],
    ['an unknown scope', { scope: 'read admin' }, 'invalid_scope'],
    [
      'code_challenge_method=plain',
      { code_challenge: CHALLENGE, code_challenge_method: 'plain' },
      'invalid_request',
    ],
    [
      'a code_challenge without code_challenge_method',
      { code_challenge: CHALLENGE },
      'invalid_request',
    ],
    [
      'code_challenge_method without a code_challenge',
      { code_challenge_method: 'S256' },
      'invalid_request',
    ],
    [
      'a code_challenge that is not an S256 value',
      { code_challenge: 'too-short', code_challenge_method: 'S256' },
      'invalid_request',
    ],
  ];
  for (const [label, extra, error] of redirects) {
    const res = await send(t, { op, label, query: authorizeQuery(extra), expect: 302 });
    redirectedTo(t, res, oauth.client.redirectUri, { error, state: 'contract-state' });
    t.type(
      new URL(header(res.headers, 'location') ?? '', 'http://invalid').searchParams.get(
        'error_description',
      ),
      'string',
      'with error_description',
    );
  }
  const signedIn = await send(t, {
    op,
    label: 'an unknown scope, signed in',
    headers: session,
    query: authorizeQuery({ scope: 'admin' }),
    expect: 302,
  });
  redirectedTo(t, signedIn, oauth.client.redirectUri, {
    error: 'invalid_scope',
    state: 'contract-state',
  });
  const stateless = await send(t, {
    op,
    label: 'response_type=token without state',
    query: authorizeQuery({ response_type: 'token', state: undefined }),
    expect: 302,
  });
  redirectedTo(t, stateless, oauth.client.redirectUri, {
    error: 'unsupported_response_type',
    state: null,
  });
  const withQuery = await send(t, {
    op,
    label: 'a redirect_uri with a query of its own',
    query: authorizeQuery({ response_type: 'token' }, oauth.queryClient),
    expect: 302,
  });
  redirectedTo(t, withQuery, oauth.queryClient.redirectUri, {
    tenant: '7',
    error: 'unsupported_response_type',
    state: 'contract-state',
  });

  // Step 1: an unknown client or an unregistered redirect URI is an HTML page, never a redirect.
  const { redirectUri } = oauth.client;
  const pages: [string, Record<string, QueryValue>][] = [
    ['an unknown client_id', { client_id: UNKNOWN_ID }],
    ['a client_id that is not a UUID', { client_id: 'not-a-client' }],
    ['no client_id', { client_id: undefined }],
    [
      'a redirect_uri that is not registered',
      { redirect_uri: 'https://attacker.example.net/callback' },
    ],
    ["another app's redirect_uri", { redirect_uri: oauth.otherClient.redirectUri }],
    ['the registered redirect_uri with a trailing slash', { redirect_uri: `${redirectUri}/` }],
    [
      'the registered redirect_uri with its host in upper case',
      { redirect_uri: redirectUri.replace('client.example.com', 'CLIENT.example.com') },
    ],
    ['the registered redirect_uri with an extra query', { redirect_uri: `${redirectUri}?x=1` }],
    ['no redirect_uri', { redirect_uri: undefined }],
    ['redirect_uri repeated', { redirect_uri: [redirectUri, redirectUri] }],
    [
      'an unregistered redirect_uri and response_type=token',
      { redirect_uri: 'https://attacker.example.net/callback', response_type: 'token' },
    ],
    ['an unknown client_id and an unknown scope', { client_id: UNKNOWN_ID, scope: 'admin' }],
  ];
  for (const [label, extra] of pages) {
    for (const [who, headers] of [
      ['', {}],
      [', signed in', session],
    ] as const) {
      const res = await send(t, {
        op,
        label: `${label}${who}`,
        headers,
        query: authorizeQuery(extra),
        expect: 400,
      });
      t.equal(header(res.headers, 'location'), undefined, `${label}${who}: no redirect`);
    }
  }
});

t.test('oauthToken', { skip: !isImplemented('oauthToken') && 'pending' }, async (t) => {
  const op = 'oauthToken';
  const { client, otherClient } = oauth;
  const grant = (
    code: string | readonly string[],
    extra: Record<string, string | readonly string[] | undefined> = {},
  ) => ({
    grant_type: 'authorization_code',
    code,
    redirect_uri: client.redirectUri,
    ...extra,
  });
  const token = (
    label: string,
    fields: Record<string, string | readonly string[] | undefined>,
    expect: number,
    headers: Record<string, string> = {},
  ) => send(t, { op, label, ...form(fields), headers, remoteAddress: nextAddress(), expect });

  // 200
  const basic = await token(
    'client_secret_basic, with the same client_id in the body',
    grant(await oauth.code(), { client_id: client.clientId }),
    200,
    basicHeader(client),
  );
  t.equal(basic.json?.scope, 'read', 'no scope requested: read');
  t.equal(basic.json?.expires_in, 2592000, '30 days');
  const pkce = await oauth.pkceCode({ scope: 'read listings:write' });
  const withPkce = await token(
    'client_secret_post, PKCE',
    grant(pkce.code, { code_verifier: pkce.verifier, ...postAuth(client) }),
    200,
  );
  t.equal(withPkce.json?.scope, 'read listings:write', 'the granted scope');
  await token(
    'unknown parameters are ignored',
    grant(await oauth.code(), { ...postAuth(client), resource: 'https://api.example.com' }),
    200,
  );

  // 400 invalid_grant: the code is one use, bound to its client, redirect URI and PKCE challenge.
  const used = await oauth.code();
  const first = await token('a code, first use', grant(used, postAuth(client)), 200);
  oauthError(
    t,
    await token('the same code again', grant(used, postAuth(client)), 400),
    'invalid_grant',
  );
  if (typeof first.json?.access_token === 'string') {
    await send(t, {
      op: 'oauthUserinfo',
      label: 'the token issued from a replayed code is revoked',
      credential: first.json.access_token,
      expect: 401,
    });
  }
  oauthError(
    t,
    await token(
      "another app's code",
      grant(await oauth.code({ client: otherClient }), postAuth(client)),
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token(
      'another redirect_uri than the authorization request',
      grant(await oauth.code(), {
        ...postAuth(client),
        redirect_uri: 'https://client.example.com/other',
      }),
      400,
    ),
    'invalid_grant',
  );
  const wrong = await oauth.pkceCode();
  oauthError(
    t,
    await token(
      'PKCE: a code_verifier of another challenge',
      grant(wrong.code, { ...postAuth(client), code_verifier: 'a'.repeat(43) }),
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token(
      'PKCE: no code_verifier for a code with a challenge',
      grant((await oauth.pkceCode()).code, postAuth(client)),
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token(
      'PKCE: a code_verifier for a code without a challenge',
      grant(await oauth.code(), { ...postAuth(client), code_verifier: 'b'.repeat(43) }),
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token(
      'a code that was never issued',
      grant(`svc_ac_${'Q'.repeat(43)}`, postAuth(client)),
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token('a code of no known kind', grant('not-a-code', postAuth(client)), 400),
    'invalid_grant',
  );
  const expiring = await oauth.code();
  await app.db
    .update(oauthCodes)
    .set({ expiresAt: past() })
    .where(eq(oauthCodes.codeHash, hashSecret(expiring)));
  oauthError(
    t,
    await token(
      'an expired code (its expiry moved into the past)',
      grant(expiring, postAuth(client)),
      400,
    ),
    'invalid_grant',
  );

  // 400 unsupported_grant_type (after client authentication).
  for (const grantType of [
    'client_credentials',
    'password',
    'urn:ietf:params:oauth:grant-type:device_code',
  ]) {
    oauthError(
      t,
      await token(
        `grant_type=${grantType}`,
        {
          grant_type: grantType,
          refresh_token: 'x',
          username: 'u',
          password: 'p',
          ...postAuth(client),
        },
        400,
      ),
      'unsupported_grant_type',
    );
  }

  // Refresh tokens: rotation, reuse detection, scope narrowing only, bound to their client.
  const minted = await oauth.tokens(t, 'for the refresh scenarios', {
    scope: 'read listings:write',
  });
  const refresh = (
    label: string,
    refreshToken: string,
    extra: Record<string, string> = {},
    expect = 200,
    who = client,
  ) =>
    token(
      label,
      { grant_type: 'refresh_token', refresh_token: refreshToken, ...postAuth(who), ...extra },
      expect,
    );
  oauthError(
    t,
    await refresh(
      'a refresh asking for a scope the authorization lacks',
      minted.refresh,
      { scope: 'read admin' },
      400,
    ),
    'invalid_scope',
  );
  oauthError(
    t,
    await refresh("another client's refresh token", minted.refresh, {}, 400, otherClient),
    'invalid_grant',
  );
  const narrowed = await refresh('a refresh narrowing the scope to read', minted.refresh, {
    scope: 'read',
  });
  t.equal(narrowed.json?.scope, 'read', 'the new access token has the narrower scope');
  t.match(narrowed.json, { token_type: 'Bearer', expires_in: 2592000, refresh_token: /^svc_rt_/ });
  const again = await refresh(
    'the rotated refresh token keeps the full scope',
    narrowed.json?.refresh_token,
  );
  t.equal(
    again.json?.scope,
    'read listings:write',
    "the refresh token kept the authorization's scopes",
  );
  oauthError(
    t,
    await refresh('a refresh token used a second time (reuse)', minted.refresh, {}, 400),
    'invalid_grant',
  );
  for (const revoked of [minted.access, narrowed.json?.access_token, again.json?.access_token]) {
    await send(t, {
      op: 'oauthUserinfo',
      label: 'reuse revoked every token of the authorization',
      credential: revoked,
      expect: 401,
    });
  }
  oauthError(
    t,
    await refresh('the newest refresh token after the reuse', again.json?.refresh_token, {}, 400),
    'invalid_grant',
  );
  oauthError(
    t,
    await refresh('a refresh token that was never issued', `svc_rt_${'Q'.repeat(43)}`, {}, 400),
    'invalid_grant',
  );
  oauthError(
    t,
    await refresh(
      'an access token as the refresh token',
      (await oauth.tokens(t, 'access as refresh')).access,
      {},
      400,
    ),
    'invalid_grant',
  );
  oauthError(
    t,
    await token('refresh_token missing', { grant_type: 'refresh_token', ...postAuth(client) }, 400),
    'invalid_request',
  );

  // 400 invalid_request. None of these consumes the code.
  const kept = await oauth.code();
  const invalid: [
    string,
    Record<string, string | readonly string[] | undefined>,
    Record<string, string>,
  ][] = [
    ['no grant_type', { ...grant(kept), grant_type: undefined, ...postAuth(client) }, {}],
    ['no code', { ...grant(kept), code: undefined, ...postAuth(client) }, {}],
    ['no redirect_uri', { ...grant(kept), redirect_uri: undefined, ...postAuth(client) }, {}],
    ['an empty code', { ...grant(''), ...postAuth(client) }, {}],
    [
      'a code_verifier that is too short',
      grant(kept, { code_verifier: 'short', ...postAuth(client) }),
      {},
    ],
    ['code repeated', grant([kept, kept], postAuth(client)), {}],
    [
      'client_secret_basic and client_secret_post at once',
      grant(kept, postAuth(client)),
      basicHeader(client),
    ],
    [
      'client_secret_basic with another client_id in the body',
      grant(kept, { client_id: otherClient.clientId }),
      basicHeader(client),
    ],
  ];
  for (const [label, fields, headers] of invalid)
    oauthError(t, await token(label, fields, 400, headers), 'invalid_request');
  oauthError(
    t,
    await send(t, {
      op,
      label: 'a JSON body',
      body: grant(kept, postAuth(client)),
      remoteAddress: nextAddress(),
      expect: 400,
    }),
    'invalid_request',
  );
  oauthError(
    t,
    await send(t, {
      op,
      label: 'a text/plain body',
      rawBody: form(grant(kept, postAuth(client))).rawBody,
      contentType: 'text/plain',
      remoteAddress: nextAddress(),
      expect: 400,
    }),
    'invalid_request',
  );

  // 401 invalid_client (a Basic challenge when Basic was used: checked by the recorder).
  const rotating = await createClient(app, 'https://rotating.example.com/cb');
  const rotated = await app.services.apps.rotateClientSecret(rotating.clientId);
  const unauthenticated: [string, Record<string, string | undefined>, Record<string, string>][] = [
    [
      'a wrong client_secret',
      { client_id: client.clientId, client_secret: `${client.clientSecret}x` },
      {},
    ],
    ['a wrong client_secret (Basic)', {}, basicAuth(client.clientId, 'svc_cs_wrong')],
    ['an unknown client_id', { client_id: UNKNOWN_ID, client_secret: client.clientSecret }, {}],
    ['an unknown client_id (Basic)', {}, basicAuth(UNKNOWN_ID, client.clientSecret)],
    [
      'a client_id that is not a UUID',
      { client_id: 'not-a-client', client_secret: client.clientSecret },
      {},
    ],
    [
      "another app's client_secret",
      { client_id: client.clientId, client_secret: otherClient.clientSecret },
      {},
    ],
    [
      'a client secret replaced by a newer one',
      { client_id: rotating.clientId, client_secret: rotating.clientSecret },
      {},
    ],
    ['client_id without client_secret', { client_id: client.clientId }, {}],
    ['no client authentication', {}, {}],
    ['a malformed Basic header', {}, { authorization: 'Basic !!!' }],
    ['a Bearer Authorization header', {}, { authorization: `Bearer ${tokens.full}` }],
  ];
  for (const [label, auth, headers] of unauthenticated)
    oauthError(t, await token(label, grant(kept, auth), 401, headers), 'invalid_client');
  await token('the code refused above still works', grant(kept, postAuth(client)), 200);
  await token(
    'the newer client secret works',
    {
      ...grant(await oauth.code({ client: rotating }), {
        client_id: rotating.clientId,
        client_secret: rotated.client_secret,
      }),
      redirect_uri: rotating.redirectUri,
    },
    200,
  );

  // "No CORS" on /oauth/*: servers call the token endpoint, never browsers.
  const cors = await send(t, {
    op,
    label: 'from a browser origin',
    headers: { origin: 'https://client.example.com' },
    ...form(grant(await oauth.code(), postAuth(client))),
    remoteAddress: nextAddress(),
    expect: 200,
  });
  t.equal(
    header(cors.headers, 'access-control-allow-origin'),
    undefined,
    'no Access-Control-Allow-Origin',
  );
});

t.test('oauthUserinfo', { skip: !isImplemented('oauthUserinfo') && 'pending' }, async (t) => {
  const op = 'oauthUserinfo';
  const me = await send(t, {
    op,
    label: 'token with read listings:write',
    credential: tokens.full,
    expect: 200,
  });
  t.match(me.json?.data, { username: oauth.user.username, email: oauth.user.email });
  t.equal(me.json?.sub, oauth.user.id, 'sub: the user id, beside the envelope');
  await send(t, { op, label: 'token with read only', credential: tokens.readOnly, expect: 200 });
  await send(t, { op, label: 'no credential', expect: 401 });
  await unauthorized(t, op);
  for (const [name, credential] of [
    ['live API key', keys.live],
    ['sandbox API key', keys.sandbox],
    ['API key with only read', keys.readOnly],
  ] as const) {
    await send(t, { op, label: `an API key is refused: ${name}`, credential, expect: 403 });
  }
  const scope = await send(t, {
    op,
    label: 'token without read',
    credential: tokens.writeOnly,
    expect: 403,
  });
  t.match(
    header(scope.headers, 'www-authenticate'),
    /error="insufficient_scope", scope="read"/,
    'the missing scope is named',
  );
});

t.test('oauthRevoke', { skip: !isImplemented('oauthRevoke') && 'pending' }, async (t) => {
  const op = 'oauthRevoke';
  const { client, otherClient } = oauth;
  const revoke = (
    label: string,
    fields: Record<string, string | undefined>,
    expect: number,
    headers: Record<string, string> = {},
  ) => send(t, { op, label, ...form(fields), headers, remoteAddress: nextAddress(), expect });
  const works = (token: string, label: string, expect: 200 | 401) =>
    send(t, { op: 'oauthUserinfo', label, credential: token, expect });

  // 200, whatever the token: the answer never says whether it was valid.
  const mine = await oauth.token(t, 'a token to revoke with token_type_hint');
  const revoked = await revoke(
    'token_type_hint=refresh_token is ignored',
    { token: mine, token_type_hint: 'refresh_token', ...postAuth(client) },
    200,
  );
  t.strictSame(revoked.json, {}, 'an empty JSON object');
  await works(mine, 'the token revoked above', 401);
  await revoke('the same token again', { token: mine, ...postAuth(client) }, 200);
  await revoke('a token that was never issued', { token: unknownToken, ...postAuth(client) }, 200);
  await revoke('not a token at all', { token: 'not-a-token' }, 200, basicHeader(client));
  const foreign = await oauth.token(t, "another app's token", { client: otherClient });
  await revoke(
    "another app's token (left untouched)",
    { token: foreign, ...postAuth(client) },
    200,
  );
  await works(foreign, "another app's token after the other app tried to revoke it", 200);
  await revoke(
    'an API key (not revocable here)',
    { token: keys.readOnly, ...postAuth(client) },
    200,
  );
  await send(t, {
    op: 'getMe',
    label: 'the API key given to /oauth/revoke still works',
    credential: keys.readOnly,
    expect: 200,
  });

  // 400 invalid_request.
  const target = await oauth.token(t, 'a token the refused revocations leave working');
  oauthError(t, await revoke('no token', postAuth(client), 400), 'invalid_request');
  oauthError(
    t,
    await revoke('an empty token', { token: '', ...postAuth(client) }, 400),
    'invalid_request',
  );
  oauthError(
    t,
    await revoke(
      'client_secret_basic and client_secret_post at once',
      { token: target, ...postAuth(client) },
      400,
      basicHeader(client),
    ),
    'invalid_request',
  );
  oauthError(
    t,
    await send(t, {
      op,
      label: 'a JSON body',
      body: { token: target, ...postAuth(client) },
      remoteAddress: nextAddress(),
      expect: 400,
    }),
    'invalid_request',
  );

  // 401 invalid_client.
  const unauthenticated: [string, Record<string, string | undefined>, Record<string, string>][] = [
    [
      'a wrong client_secret',
      { client_id: client.clientId, client_secret: `${client.clientSecret}x` },
      {},
    ],
    ['a wrong client_secret (Basic)', {}, basicAuth(client.clientId, 'svc_cs_wrong')],
    ['an unknown client_id', { client_id: UNKNOWN_ID, client_secret: client.clientSecret }, {}],
    ['no client authentication', {}, {}],
  ];
  for (const [label, auth, headers] of unauthenticated)
    oauthError(t, await revoke(label, { token: target, ...auth }, 401, headers), 'invalid_client');
  await works(target, 'the token survives every refused revocation', 200);
});

t.test(
  'the oauth2 alternative on the API: the token acts in live as the user who authorized it',
  async (t) => {
    const token = tokens.full;
    const me = await send(t, { op: 'getMe', label: 'OAuth token', credential: token, expect: 200 });
    t.equal(
      me.json?.data?.username,
      oauth.user.username,
      'the authorizing user, not the app owner',
    );
    const noRead = await send(t, {
      op: 'getMe',
      label: 'OAuth token without read',
      credential: tokens.writeOnly,
      expect: 403,
    });
    t.match(header(noRead.headers, 'www-authenticate'), /error="insufficient_scope", scope="read"/);
    const noWrite = await send(t, {
      op: 'createListing',
      label: 'OAuth token without listings:write',
      credential: tokens.readOnly,
      body: listingBody('Read-only token write'),
      expect: 403,
    });
    t.match(
      header(noWrite.headers, 'www-authenticate'),
      /error="insufficient_scope", scope="listings:write"/,
    );
    await send(t, {
      op: 'listEvents',
      label: 'OAuth token without read',
      credential: tokens.writeOnly,
      expect: 403,
    });
    await send(t, {
      op: 'batchCreateListings',
      label: 'OAuth token without listings:write',
      credential: tokens.readOnly,
      body: { items: [listingBody('Batch read-only')] },
      expect: 403,
    });

    const draft = await send(t, {
      op: 'createListing',
      label: 'OAuth token: a draft',
      credential: token,
      body: { title: 'Draft through OAuth', price_cents: 1200 },
      expect: 201,
    });
    const id = String(draft.json?.data?.id);
    t.equal(draft.json?.data?.api_environment, 'live', 'created in live');
    const own = await send(t, {
      op: 'getListing',
      label: 'OAuth token: its own live draft',
      credential: token,
      path: { id },
      expect: 200,
    });
    t.ok('external_id' in (own.json?.data ?? {}), 'owner fields for the authorizing user');
    await send(t, {
      op: 'getListing',
      label: "the OAuth user's draft, anonymous",
      path: { id },
      expect: 404,
    });
    await send(t, {
      op: 'getListing',
      label: "the OAuth user's draft, the app owner's live key",
      credential: keys.live,
      path: { id },
      expect: 404,
    });
    await send(t, {
      op: 'getListing',
      label: 'OAuth token: a sandbox listing',
      credential: token,
      path: { id: fixtures.sandboxActive },
      expect: 404,
    });
    await send(t, {
      op: 'updateListing',
      label: 'OAuth token: its own draft',
      credential: token,
      path: { id },
      body: { title: 'Renamed through OAuth' },
      expect: 200,
    });
    await send(t, {
      op: 'updateListing',
      label: "OAuth token: another seller's live active listing",
      credential: token,
      path: { id: fixtures.liveActive },
      body: { title: 'Not mine' },
      expect: 403,
    });
    await send(t, {
      op: 'archiveListing',
      label: "OAuth token: another seller's live active listing",
      credential: token,
      path: { id: fixtures.liveActive },
      expect: 403,
    });
    await send(t, {
      op: 'archiveListing',
      label: 'OAuth token: its own draft',
      credential: token,
      path: { id },
      expect: 200,
    });
    const feed = await send(t, {
      op: 'listListings',
      label: 'OAuth token: the public feed',
      credential: token,
      query: { limit: '100' },
      expect: 200,
    });
    t.notOk(
      (feed.json?.data ?? []).some((l: { id: string }) => l.id === fixtures.sandboxActive),
      'no sandbox listing in the feed',
    );
    const events = await send(t, {
      op: 'listEvents',
      label: "OAuth token: the app's events",
      credential: token,
      query: { limit: '100' },
      expect: 200,
    });
    t.ok(
      (events.json?.data ?? []).some(
        (e: { data?: { listing?: { id?: string } } }) => e.data?.listing?.id === id,
      ),
      "the listing's events belong to the app the token was issued to",
    );
  },
);

// ---------------------------------------------------------------------------------------------
// 3. Answers outside any operation still use the documented error envelope.

t.test('unknown routes and methods answer the error envelope', async (t) => {
  const errorSchema = doc.schemaPointerOf('ErrorResponse');
  const cases = [
    { method: 'GET', url: '/api/v1/no-such-thing', status: 404, code: 'not_found' },
    {
      method: 'PUT',
      url: `/api/v1/listings/${UNKNOWN_ID}`,
      status: 405,
      code: 'method_not_allowed',
    },
    { method: 'DELETE', url: '/api/v1/listings', status: 405, code: 'method_not_allowed' },
  ] as const;
  for (const c of cases) {
    const res = await app.inject({ method: c.method, url: c.url, headers: bearer(keys.sandbox) });
    const body = res.json();
    t.equal(res.statusCode, c.status, `${c.method} ${c.url}`);
    t.strictSame(doc.validate(errorSchema, body), [], `${c.method} ${c.url}: ErrorResponse`);
    t.equal(body.error?.code, c.code);
    t.equal(
      body.meta?.request_id,
      res.headers['x-request-id'],
      'meta.request_id equals X-Request-Id',
    );
    if (c.status === 405) t.ok(res.headers.allow, '405 carries Allow');
  }
});

// ---------------------------------------------------------------------------------------------
// 4. The document is consistent with itself and with what was generated from it.

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
  const valid = { data: { ok: true, db: null, config_ready: true }, meta };
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
      { ...ok, json: { data: { ok: 'yes', db: null, config_ready: true }, meta } },
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

// ---------------------------------------------------------------------------------------------
// 5. "An operation without a handler fails loudly" (STYLE: contract first).

t.test('an operation without a handler stops the boot', async (t) => {
  const handlers = allHandlers(app);
  t.doesNotThrow(
    () => checkBindings(handlers, PENDING_OPERATIONS),
    'the real handlers and pending list agree with the document',
  );
  for (const op of implemented) {
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
  const victim = implemented[0]!.operationId;
  const missing: Handlers = { ...handlers };
  delete (missing as Record<string, unknown>)[victim];
  const bare = Fastify();
  t.teardown(() => bare.close());
  await t.rejects(
    bindOperations(bare, missing, PENDING_OPERATIONS),
    UnboundOperationError,
    'bindOperations refuses to bind',
  );

  const pendingOne = PENDING_OPERATIONS[0];
  if (pendingOne) {
    t.throws(
      () =>
        checkBindings(
          { ...handlers, [pendingOne]: async () => ({}) } as Handlers,
          PENDING_OPERATIONS,
        ),
      /handled but still listed as pending/,
    );
  }
  t.throws(
    () =>
      checkBindings(
        { ...handlers, noSuchOperation: async () => ({}) } as Handlers,
        PENDING_OPERATIONS,
      ),
    /matches no operation/,
  );
});

// ---------------------------------------------------------------------------------------------
// 6. Coverage: operation x documented status.

t.test('coverage of the document', async (t) => {
  const report = coverageReport(implemented, contract.coverage);
  t.comment(`Contract coverage (${contract.requests} requests):\n${report.table}`);
  t.comment(
    `Documented but not exercised (${report.notExercised.length}):\n  ${report.notExercised.join('\n  ')}`,
  );
  t.comment(
    `Pending operations (not served yet, not replayed):\n  ${served
      .filter((op) => pending.has(op.operationId))
      .map((op) => `${op.operationId} (${op.method} ${op.path})`)
      .join('\n  ')}`,
  );
  if (notReplayed.length > 0)
    t.comment(`Security alternatives not replayed:\n  ${[...new Set(notReplayed)].join('\n  ')}`);
  const deferred = [...contract.deferredMissing].map(
    ([name, n]) =>
      `${name}: missing on ${n} responses (${DEFERRED_HEADERS.get(name)}): ${[...(contract.deferredMissingAt.get(name) ?? [])].join(', ')}`,
  );
  if (deferred.length > 0)
    t.comment(`Documented required headers deferred to a later issue:\n  ${deferred.join('\n  ')}`);
  if (contract.problems.length > 0) {
    const grouped = new Map<string, string[]>();
    for (const p of contract.problems) {
      const key = p.problem.replace(/"req_[0-9a-f]+"/g, '"req_…"');
      grouped.set(key, [...(grouped.get(key) ?? []), `${p.op} ${p.status}`]);
    }
    t.comment(
      `Contract problems (${contract.problems.length}):\n  ${[...grouped].map(([k, v]) => `${k}\n      at ${[...new Set(v)].join(', ')}`).join('\n  ')}`,
    );
  }
  t.strictSame(report.without2xx, [], 'every implemented operation answered a documented 2xx');
  t.strictSame(report.undocumented, [], 'no operation answered an undocumented status');
});
