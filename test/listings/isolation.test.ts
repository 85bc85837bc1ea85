/**
 * Environment isolation and authorization (OpenAPI "Environments and isolation", "Authentication",
 * "Errors"): the matrix of caller (anonymous / sandbox key / live key, own or another seller's) x
 * listing (draft / active / archived, sandbox / live), for reads, the feed and writes.
 */
import t from 'tap';
import { listingBody } from '../helpers/listings.ts';
import {
  call,
  createSeller,
  expectError,
  expectOk,
  listingsApp,
  PHOTO,
  type Asserts,
  type Json,
  type Seller,
} from './support.ts';

const app = await listingsApp(t);

type Env = 'sandbox' | 'live';
type Status = 'draft' | 'active' | 'archived';
type Who = 'alice' | 'bob';
const ENVS: Env[] = ['sandbox', 'live'];
const STATUSES: Status[] = ['draft', 'active', 'archived'];

const sellers: Record<Who, Seller> = {
  alice: await createSeller(app),
  bob: await createSeller(app),
};

interface Fixture {
  id: string;
  owner: Who;
  env: Env;
  status: Status;
  externalId: string;
  label: string;
}

/** Every seller x environment x status, created through the API with the seller's key. */
const fixtures: Fixture[] = [];
for (const owner of ['alice', 'bob'] as const) {
  for (const env of ENVS) {
    for (const status of STATUSES) {
      const key = sellers[owner][env];
      const externalId = `${owner}-${env}-${status}`;
      const created = await call(app, 'POST', '/api/v1/listings', {
        key,
        body: listingBody({
          external_id: externalId,
          status: status === 'active' ? 'active' : 'draft',
          cover_image_url: PHOTO,
        }),
      });
      if (created.status !== 201)
        throw new Error(`setup: ${created.status} ${JSON.stringify(created.body)}`);
      const id: string = created.body.data.id;
      if (status === 'archived') {
        const archived = await call(app, 'DELETE', `/api/v1/listings/${id}`, { key });
        if (archived.status !== 200) throw new Error(`setup archive: ${archived.status}`);
      }
      fixtures.push({ id, owner, env, status, externalId, label: `${owner}'s ${env} ${status}` });
    }
  }
}

interface Caller {
  label: string;
  key?: string;
  env: Env;
  who?: Who;
}

const callers: Caller[] = [
  { label: 'anonymous', env: 'live' },
  ...(['alice', 'bob'] as const).flatMap((who) =>
    ENVS.map((env) => ({ label: `${who}'s ${env} key`, key: sellers[who][env], env, who })),
  ),
];

/**
 * OpenAPI "Environments and isolation", written out on its own (not derived from the code under
 * test).
 */
function visible(caller: Caller, listing: Fixture): boolean {
  if (!caller.who) return listing.env === 'live' && listing.status === 'active';
  if (caller.env === 'sandbox') return listing.env === 'sandbox' && listing.owner === caller.who;
  return listing.env === 'live' && (listing.status === 'active' || listing.owner === caller.who);
}
const owns = (caller: Caller, listing: Fixture) =>
  caller.who === listing.owner && caller.env === listing.env;

function checkOwnerFields(t: Asserts, data: Json, caller: Caller, listing: Fixture) {
  if (owns(caller, listing)) {
    t.equal(data.external_id, listing.externalId, 'owner sees external_id');
    t.equal(data.api_environment, listing.env, 'owner sees api_environment');
  } else {
    t.notOk('external_id' in data, 'no external_id for a non-owner (not even null)');
    t.notOk('api_environment' in data, 'no api_environment for a non-owner');
  }
}

t.test(
  'GET /listings/{id}: 200 when visible, 404 otherwise; owner fields only for the owner',
  async (t) => {
    for (const caller of callers) {
      for (const listing of fixtures) {
        const res = await call(
          app,
          'GET',
          `/api/v1/listings/${listing.id}`,
          caller.key ? { key: caller.key } : {},
        );
        const expectation = visible(caller, listing) ? 200 : 404;
        t.test(`${caller.label} -> ${listing.label}: ${expectation}`, async (t) => {
          if (expectation === 200) {
            const data = expectOk(t, res, 200, caller.env);
            t.equal(data.id, listing.id);
            t.equal(data.status, listing.status);
            checkOwnerFields(t, data, caller, listing);
          } else {
            expectError(t, res, 404, 'not_found');
            t.equal(res.body.meta.environment, caller.env);
          }
        });
      }
    }
  },
);

t.test('GET /listings: the feed each caller gets', async (t) => {
  const page = async (caller: Caller) => {
    const res = await call(
      app,
      'GET',
      '/api/v1/listings?limit=100',
      caller.key ? { key: caller.key } : {},
    );
    expectOk(t, res, 200, caller.env);
    t.equal(res.body.meta.next_cursor, null, 'one page holds everything');
    return res.body.data as Json[];
  };
  const ids = (items: Json[]) => items.map((l) => l.id).sort();
  const expected = (filter: (f: Fixture) => boolean) =>
    fixtures
      .filter(filter)
      .map((f) => f.id)
      .sort();

  const publicFeed = expected((f) => f.env === 'live' && f.status === 'active');
  t.equal(publicFeed.length, 2, 'alice and bob each have one live active listing');
  for (const caller of callers) {
    const items = await page(caller);
    if (caller.env === 'sandbox') {
      t.same(
        ids(items),
        expected((f) => f.env === 'sandbox' && f.owner === caller.who),
        `${caller.label}: its owner's sandbox listings, every status`,
      );
      t.same(items.map((l) => l.status).sort(), ['active', 'archived', 'draft']);
    } else {
      t.same(ids(items), publicFeed, `${caller.label}: the public feed (live active only)`);
    }
    for (const item of items) {
      checkOwnerFields(
        t,
        item,
        caller,
        fixtures.find((f) => f.id === item.id)!,
      );
    }
  }
  t.ok(
    (await page(callers[0]!)).every((l) => fixtures.find((f) => f.id === l.id)!.env === 'live'),
    'sandbox listings never appear in the public feed',
  );
});

/**
 * A write's answer before the state machine has its say (OpenAPI "Environments and isolation": 404,
 * then 403).
 */
function writeExpectation(caller: Caller, listing: Fixture): 404 | 403 | 200 {
  if (!visible(caller, listing)) return 404;
  if (!owns(caller, listing)) return 403;
  return 200;
}

t.test(
  'PATCH /listings/{id}: 404 not visible, 403 visible but not owned, owner 200 (409 archived)',
  async (t) => {
    for (const caller of callers.filter((c) => c.key)) {
      for (const listing of fixtures) {
        let expectation: number = writeExpectation(caller, listing);
        if (expectation === 200 && listing.status === 'archived') expectation = 409;
        const res = await call(app, 'PATCH', `/api/v1/listings/${listing.id}`, {
          key: caller.key!,
          body: { title: `Patched by ${caller.label}` },
        });
        if (expectation === 200) {
          t.equal(
            expectOk(t, res, 200, caller.env).title,
            `Patched by ${caller.label}`,
            `${caller.label} -> ${listing.label}: 200`,
          );
        } else {
          const code = { 404: 'not_found', 403: 'forbidden', 409: 'conflict' }[
            expectation as 404 | 403 | 409
          ];
          expectError(t, res, expectation, code);
          t.pass(`${caller.label} -> ${listing.label}: ${expectation}`);
        }
      }
    }
    // Nothing a refused PATCH sent was written.
    for (const listing of fixtures) {
      const owner = sellers[listing.owner][listing.env];
      const stored = expectOk(
        t,
        await call(app, 'GET', `/api/v1/listings/${listing.id}`, { key: owner }),
        200,
      );
      const ownerLabel = `${listing.owner}'s ${listing.env} key`;
      if (listing.status !== 'archived')
        t.equal(
          stored.title,
          `Patched by ${ownerLabel}`,
          `${listing.label}: only its owner's PATCH applied`,
        );
      else t.notMatch(stored.title, /^Patched/, `${listing.label}: untouched`);
      t.equal(stored.status, listing.status);
    }
  },
);

t.test(
  'scope: a key without listings:write gets 403 on every write, before visibility',
  async (t) => {
    const readOnly = (
      await app.services.keys.create({ appId: sellers.alice.appId, env: 'live', scopes: 'read' })
    ).key;
    const own = fixtures.find(
      (f) => f.owner === 'alice' && f.env === 'live' && f.status === 'draft',
    )!;
    const unknownId = '00000000-0000-4000-8000-000000000000';

    const checks: [string, Promise<Json>][] = [
      ['POST', call(app, 'POST', '/api/v1/listings', { key: readOnly, body: listingBody() })],
      [
        'batch',
        call(app, 'POST', '/api/v1/listings/batch', {
          key: readOnly,
          body: { items: [listingBody()] },
        }),
      ],
      [
        'PATCH own',
        call(app, 'PATCH', `/api/v1/listings/${own.id}`, {
          key: readOnly,
          body: { title: 'No scope' },
        }),
      ],
      ['DELETE own', call(app, 'DELETE', `/api/v1/listings/${own.id}`, { key: readOnly })],
      [
        'PATCH unknown',
        call(app, 'PATCH', `/api/v1/listings/${unknownId}`, {
          key: readOnly,
          body: { title: 'No scope' },
        }),
      ],
    ];
    for (const [label, pending] of checks) {
      const res = await pending;
      expectError(t, res, 403, 'forbidden');
      t.match(
        res.headers['www-authenticate'],
        /insufficient_scope/,
        `${label}: WWW-Authenticate names insufficient_scope`,
      );
      t.match(res.headers['www-authenticate'], /listings:write/);
    }
    // Public reads need no scope: the read-only key sees its owner's active listing, with the
    // owner's fields. Its draft is unpublished: listings:write only (owner-view-scope.test.ts).
    const active = fixtures.find(
      (f) => f.owner === 'alice' && f.env === 'live' && f.status === 'active',
    )!;
    const read = expectOk(
      t,
      await call(app, 'GET', `/api/v1/listings/${active.id}`, { key: readOnly }),
      200,
      'live',
    );
    t.equal(read.status, 'active');
    t.equal(read.external_id, active.externalId, 'owner view for the owner, whatever the scopes');
    expectError(
      t,
      await call(app, 'GET', `/api/v1/listings/${own.id}`, { key: readOnly }),
      404,
      'not_found',
    );
  },
);

t.test(
  '401: missing, malformed, invalid or revoked credentials, on writes and on public reads',
  async (t) => {
    const created = await app.services.keys.create({ appId: sellers.alice.appId, env: 'live' });
    await app.services.keys.revoke(created.id);
    const revoked = created.key;
    const publicListing = fixtures.find(
      (f) => f.owner === 'alice' && f.env === 'live' && f.status === 'active',
    )!;
    const target = `/api/v1/listings/${publicListing.id}`;

    const credentials: [string, Record<string, string>][] = [
      [
        'invalid live key',
        { authorization: 'Bearer svc_live_doesnotexist0000000000000000000000000000000' },
      ],
      [
        'invalid sandbox key',
        { authorization: 'Bearer svc_sandbox_doesnotexist000000000000000000000000000000' },
      ],
      ['unknown prefix', { authorization: 'Bearer sk_test_123' }],
      ['revoked key', { authorization: `Bearer ${revoked}` }],
      [
        'not a Bearer header',
        { authorization: `Basic ${Buffer.from('alice:pw').toString('base64')}` },
      ],
      ['empty Bearer', { authorization: 'Bearer ' }],
    ];
    for (const [label, headers] of credentials) {
      for (const [method, url, body] of [
        ['GET', '/api/v1/listings', undefined],
        ['GET', target, undefined],
        ['POST', '/api/v1/listings', listingBody()],
        ['PATCH', target, { title: 'Hijacked' }],
        ['DELETE', target, undefined],
      ] as const) {
        const res = await call(app, method, url, { headers, ...(body ? { body } : {}) });
        expectError(t, res, 401, 'unauthorized');
        t.match(
          res.headers['www-authenticate'],
          /^Bearer/,
          `${label}, ${method} ${url}: 401 with WWW-Authenticate`,
        );
      }
    }
    for (const [method, url, body] of [
      ['POST', '/api/v1/listings', listingBody()],
      ['POST', '/api/v1/listings/batch', { items: [listingBody()] }],
      ['PATCH', target, { title: 'Hijacked' }],
      ['DELETE', target, undefined],
    ] as const) {
      const res = await call(app, method, url, body ? { body } : {});
      expectError(t, res, 401, 'unauthorized');
      t.match(res.headers['www-authenticate'], /^Bearer/, `no credential, ${method} ${url}: 401`);
    }
    const stored = expectOk(t, await call(app, 'GET', target), 200, 'live');
    t.equal(stored.status, 'active', 'nothing changed');
    t.notMatch(stored.title, /Hijacked/);
  },
);

t.test(
  'DELETE /listings/{id}: 404 not visible, 403 visible but not owned, owner 200',
  async (t) => {
    const keyed = callers.filter((c) => c.key);
    // Callers that do not own a listing first: an owner's DELETE changes what others can see.
    for (const pass of ['others', 'owners'] as const) {
      for (const caller of keyed) {
        for (const listing of fixtures) {
          const expectation = writeExpectation(caller, listing);
          if ((pass === 'owners') !== (expectation === 200)) continue;
          const res = await call(app, 'DELETE', `/api/v1/listings/${listing.id}`, {
            key: caller.key!,
          });
          if (expectation === 200) {
            const data = expectOk(t, res, 200, caller.env);
            t.equal(data.id, listing.id);
            t.equal(data.status, 'archived', `${caller.label} -> ${listing.label}: 200 archived`);
            t.equal(data.external_id, listing.externalId, 'owner view');
          } else {
            expectError(t, res, expectation, expectation === 404 ? 'not_found' : 'forbidden');
            t.pass(`${caller.label} -> ${listing.label}: ${expectation}`);
          }
        }
      }
      if (pass === 'others') {
        for (const listing of fixtures) {
          const stored = await call(app, 'GET', `/api/v1/listings/${listing.id}`, {
            key: sellers[listing.owner][listing.env],
          });
          t.equal(
            stored.body.data.status,
            listing.status,
            `${listing.label}: not archived by another caller`,
          );
        }
      }
    }
    const unknown = await call(
      app,
      'DELETE',
      '/api/v1/listings/00000000-0000-4000-8000-000000000000',
      { key: sellers.alice.live },
    );
    expectError(t, unknown, 404, 'not_found');
    const malformed = await call(app, 'DELETE', '/api/v1/listings/not-a-uuid', {
      key: sellers.alice.live,
    });
    expectError(t, malformed, 400, 'validation_error', '/path/id');
  },
);

t.test('writes land in the credential environment only', async (t) => {
  const sandboxCreated = expectOk(
    t,
    await call(app, 'POST', '/api/v1/listings', {
      key: sellers.alice.sandbox,
      body: listingBody({ status: 'active', cover_image_url: PHOTO }),
    }),
    201,
    'sandbox',
  );
  t.equal(sandboxCreated.api_environment, 'sandbox');
  const liveCreated = expectOk(
    t,
    await call(app, 'POST', '/api/v1/listings', {
      key: sellers.alice.live,
      body: listingBody({ status: 'active', cover_image_url: PHOTO }),
    }),
    201,
    'live',
  );
  t.equal(liveCreated.api_environment, 'live');

  const anonymous = await call(app, 'GET', '/api/v1/listings?limit=100');
  const feedIds = anonymous.body.data.map((l: Json) => l.id);
  t.ok(feedIds.includes(liveCreated.id), 'a new live active listing is public');
  t.notOk(feedIds.includes(sandboxCreated.id), 'a sandbox active listing is not');
  expectError(t, await call(app, 'GET', `/api/v1/listings/${sandboxCreated.id}`), 404, 'not_found');
  expectError(
    t,
    await call(app, 'GET', `/api/v1/listings/${sandboxCreated.id}`, { key: sellers.alice.live }),
    404,
    'not_found',
  );
  expectError(
    t,
    await call(app, 'PATCH', `/api/v1/listings/${sandboxCreated.id}`, {
      key: sellers.alice.live,
      body: { title: 'Cross env' },
    }),
    404,
    'not_found',
  );
  expectError(
    t,
    await call(app, 'PATCH', `/api/v1/listings/${liveCreated.id}`, {
      key: sellers.alice.sandbox,
      body: { title: 'Cross env' },
    }),
    404,
    'not_found',
  );
});
