/**
 * Issue #18 item 1: a create, a PATCH, an upsert, a DELETE and a no-op replay are each one
 * statement (the listing, its webhook event and deliveries together: no BEGIN, no SELECT ...
 * FOR UPDATE first), and every rule still holds: ownership, archived -> 409, an active listing
 * needs a photo, the event goes to the app that created the listing. Counted on the service
 * over the real database: statements (`execute` calls, and `rendered` ones: the statements
 * rendered once, src/db/rows.ts RenderedSql) and `transaction` calls.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import type { Caller } from '../../src/access.ts';
import type { Db } from '../../src/db/client.ts';
import { queryRows } from '../../src/db/rows.ts';
import { ApiError } from '../../src/errors.ts';
import { createServices } from '../../src/services.ts';
import { listingsApp } from './support.ts';

const app = await listingsApp(t);
const counts = { statements: 0, transactions: 0 };
const counting = new Proxy(app.db, {
  get(target, property, receiver) {
    const value = Reflect.get(target, property, receiver);
    if (property === 'execute' || property === 'rendered')
      return (...args: unknown[]) => {
        counts.statements += 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    if (property === 'transaction')
      return (...args: unknown[]) => {
        counts.transactions += 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    return value;
  },
}) as Db;
const services = createServices(counting);

async function seller(username: string) {
  const user = await services.users.create({
    username,
    password: 'single-statement-password',
    displayName: username,
  });
  const created = await services.apps.create({
    ownerUsername: username,
    name: `${username} app`,
    redirectUris: [],
  });
  const other = await services.apps.create({
    ownerUsername: username,
    name: `${username} second app`,
    redirectUris: [],
  });
  const caller = (appId: string): Caller => ({
    kind: 'api_key',
    environment: 'sandbox',
    userId: user.id,
    appId,
    appOwnerId: user.id,
    credentialId: null,
    scopes: ['listings:read', 'listings:write'],
  });
  return { caller: caller(created.id), second: caller(other.id), appId: created.id };
}

const alice = await seller('single_alice');
const bob = await seller('single_bob');
const photo = 'https://img.example.com/single/0.jpg';
// Each seller's first listing (whose statement also records the app's go-live milestone).
await services.listingWrites.create(alice.caller, { title: 'First', price_cents: 100 }, undefined);
await services.listingWrites.create(bob.caller, { title: 'First', price_cents: 100 }, undefined);

/** Runs `work` and returns what it ran: statements and transactions. */
async function measure<T>(work: () => Promise<T>): Promise<{ result: T; ran: typeof counts }> {
  counts.statements = 0;
  counts.transactions = 0;
  const result = await work();
  return { result, ran: { ...counts } };
}

async function refusal(work: () => Promise<unknown>): Promise<{ status: number; code: string }> {
  try {
    await work();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.statusCode, code: err.code };
    throw err;
  }
  throw new Error('expected a refusal');
}

async function eventsOf(listingId: string) {
  return queryRows<{ type: string; app_id: string; title: string }>(
    app.db,
    sql`select type, app_id, data::json->'listing'->>'title' as title from webhook_events
        where listing_id = ${listingId} order by created_at`,
  );
}

async function stored(listingId: string) {
  const [row] = await queryRows<{ title: string; status: string; updated_at: string }>(
    app.db,
    sql`select title, status, updated_at::text from listings where id = ${listingId}`,
  );
  return row!;
}

t.test('a create, a PATCH and a DELETE are one statement each, with their events', async (t) => {
  const created = await measure(() =>
    services.listingWrites.create(alice.caller, { title: 'Coat', price_cents: 4900 }, undefined),
  );
  t.same(created.ran, { statements: 1, transactions: 0 }, 'create: one statement');
  const id = created.result.listing.id;

  const patched = await measure(() =>
    services.listingWrites.update(alice.caller, id, { title: 'Wool coat', price_cents: 5100 }),
  );
  t.same(patched.ran, { statements: 1, transactions: 0 }, 'PATCH: one statement');
  t.equal(patched.result.title, 'Wool coat');
  t.equal(patched.result.price_cents, 5100);
  t.equal(patched.result.external_id, null, 'the owner view');

  const archived = await measure(() => services.listingWrites.archive(alice.caller, id));
  t.same(archived.ran, { statements: 1, transactions: 0 }, 'DELETE: one statement');
  t.equal(archived.result.status, 'archived');

  t.same(
    (await eventsOf(id)).map((e) => [e.type, e.title, e.app_id]),
    [
      ['listing.created', 'Coat', alice.appId],
      ['listing.updated', 'Wool coat', alice.appId],
      ['listing.archived', 'Wool coat', alice.appId],
    ],
    'each change recorded once, in order, for the creating app',
  );

  const again = await measure(() => services.listingWrites.archive(alice.caller, id));
  t.equal(again.result.status, 'archived', 'DELETE again answers the archived listing');
  t.equal(again.ran.transactions, 0);
  t.equal((await eventsOf(id)).length, 3, 'and records no second archived event');
  t.same(
    await refusal(() => services.listingWrites.update(alice.caller, id, { title: 'Back' })),
    { status: 409, code: 'conflict' },
    'PATCH of an archived listing: 409',
  );
  t.equal((await stored(id)).title, 'Wool coat', 'nothing written');
});

t.test('the event goes to the creating app whichever app of the seller changes it', async (t) => {
  const { listing } = await services.listingWrites.create(
    alice.caller,
    { title: 'Boots', price_cents: 9000 },
    undefined,
  );
  const patched = await measure(() =>
    services.listingWrites.update(alice.second, listing.id, { title: 'Leather boots' }),
  );
  t.same(patched.ran, { statements: 1, transactions: 0 });
  t.same(
    (await eventsOf(listing.id)).map((e) => [e.type, e.app_id]),
    [
      ['listing.created', alice.appId],
      ['listing.updated', alice.appId],
    ],
  );
});

t.test('the rules hold in the statement; a refusal writes nothing', async (t) => {
  const { listing } = await services.listingWrites.create(
    alice.caller,
    { title: 'Scarf', price_cents: 1500 },
    undefined,
  );
  const before = await stored(listing.id);

  t.same(
    await refusal(() =>
      services.listingWrites.update(bob.caller, listing.id, { title: 'Mine now' }),
    ),
    { status: 404, code: 'not_found' },
    "another seller's sandbox listing is not theirs to see: 404",
  );
  t.same(
    await refusal(() =>
      services.listingWrites.update(alice.caller, listing.id, { status: 'active' }),
    ),
    { status: 400, code: 'validation_error' },
    'active without a photo: 400',
  );
  t.same(
    await refusal(() =>
      services.listingWrites.update(alice.caller, listing.id, { status: 'active', image_urls: [] }),
    ),
    { status: 400, code: 'validation_error' },
    'active with an empty image list: 400',
  );
  t.same(
    // The document's ListingUpdate has no 'archived' (the route refuses it first): the service
    // refuses it too.
    await refusal(() =>
      services.listingWrites.update(alice.caller, listing.id, { status: 'archived' as 'draft' }),
    ),
    { status: 400, code: 'validation_error' },
    'PATCH cannot archive: 400',
  );
  t.same(await stored(listing.id), before, 'the listing is as it was');
  t.equal((await eventsOf(listing.id)).length, 1, 'no event but the creation');

  const activated = await measure(() =>
    services.listingWrites.update(alice.caller, listing.id, {
      status: 'active',
      image_urls: [photo],
    }),
  );
  t.same(activated.ran, { statements: 1, transactions: 0 }, 'a photo and active: one statement');
  t.equal(activated.result.status, 'active');
  t.same(
    await refusal(() =>
      services.listingWrites.update(alice.caller, listing.id, {
        image_urls: [],
        cover_image_url: null,
      }),
    ),
    { status: 400, code: 'validation_error' },
    'removing the last photo of an active listing: 400',
  );
  t.equal((await stored(listing.id)).status, 'active');
});

t.test('an external_id another listing uses: 409, nothing written', async (t) => {
  await services.listingWrites.create(alice.caller, { title: 'A', price_cents: 1 }, 'ext-taken');
  const { listing } = await services.listingWrites.create(
    alice.caller,
    { title: 'B', price_cents: 2 },
    'ext-free',
  );
  t.same(
    await refusal(() =>
      services.listingWrites.update(alice.caller, listing.id, {
        title: 'B2',
        external_id: 'ext-taken',
      }),
    ),
    { status: 409, code: 'conflict' },
  );
  t.equal((await stored(listing.id)).title, 'B');
});

t.test('an upsert is a lookup and one update; a no-op replay is the lookup alone', async (t) => {
  const body = { title: 'Linen shirt', price_cents: 3000, cover_image_url: photo };
  const first = await measure(() => services.listingWrites.create(alice.caller, body, 'shirt-1'));
  t.equal(first.result.created, true);
  t.same(first.ran, { statements: 2, transactions: 0 }, 'a new external_id: lookup, insert');
  const id = first.result.listing.id;
  const updatedAt = (await stored(id)).updated_at;

  const replay = await measure(() => services.listingWrites.create(alice.caller, body, 'shirt-1'));
  t.equal(replay.result.created, false);
  t.same(replay.ran, { statements: 1, transactions: 0 }, 'a no-op replay: one read');
  t.equal((await stored(id)).updated_at, updatedAt, 'nothing written');

  const upsert = await measure(() =>
    services.listingWrites.create(alice.caller, { ...body, price_cents: 3200 }, 'shirt-1'),
  );
  t.equal(upsert.result.created, false);
  t.equal(upsert.result.listing.price_cents, 3200);
  t.same(upsert.ran, { statements: 2, transactions: 0 }, 'an upsert: lookup, update');
  t.same(
    (await eventsOf(id)).map((e) => e.type),
    ['listing.created', 'listing.updated'],
    'the replay recorded nothing, the upsert one update',
  );

  // Bob's same external_id is his own listing: never Alice's.
  const bobs = await services.listingWrites.create(bob.caller, body, 'shirt-1');
  t.equal(bobs.created, true);
  t.not(bobs.listing.id, id);
});

t.test('a replay from an app this process has not seen create: still the one read', async (t) => {
  // Carol's listing was created by another process (another services instance): what this one
  // runs does not depend on what it has seen.
  const carol = await seller('single_carol');
  const body = { title: 'Silk scarf', price_cents: 2500 };
  const elsewhere = createServices(app.db);
  const first = await elsewhere.listingWrites.create(carol.caller, body, 'scarf-1');
  t.equal(first.created, true);
  const replay = await measure(() => services.listingWrites.create(carol.caller, body, 'scarf-1'));
  t.equal(replay.result.listing.id, first.listing.id);
  t.same(replay.ran, { statements: 1, transactions: 0 }, 'the lookup alone');
  const upsert = await measure(() =>
    services.listingWrites.create(carol.caller, { ...body, price_cents: 2600 }, 'scarf-1'),
  );
  t.same(upsert.ran, { statements: 2, transactions: 0 }, 'an upsert: lookup, update');
  const created = await measure(() =>
    services.listingWrites.create(carol.caller, { title: 'New', price_cents: 1 }, 'scarf-2'),
  );
  t.equal(created.result.created, true);
  t.same(created.ran, { statements: 2, transactions: 0 }, 'a new listing: lookup, insert');
  const [milestone] = await queryRows<{ n: number }>(
    app.db,
    sql`select count(*)::int as n from app_milestones where app_id = ${carol.caller.appId}`,
  );
  t.equal(milestone!.n, 1, 'the go-live milestone, recorded by the first create and kept');
});

t.test('concurrent creates: one statement each, never retried on the ordering keys', async (t) => {
  const { result, ran } = await measure(() =>
    Promise.all(
      Array.from({ length: 30 }, (_, n) =>
        services.listingWrites.create(
          alice.caller,
          { title: `Rush ${n}`, price_cents: 100 + n },
          undefined,
        ),
      ),
    ),
  );
  t.same(ran, { statements: 30, transactions: 0 }, '30 creates, 30 statements');
  const published = result.map((r) => r.listing.published_at);
  t.equal(new Set(published).size, 30, 'each its own published_at');
});

t.test('concurrent PATCHes of one listing: every one applied, one event each', async (t) => {
  const { listing } = await services.listingWrites.create(
    alice.caller,
    { title: 'Counter', price_cents: 1 },
    undefined,
  );
  await Promise.all(
    Array.from({ length: 8 }, (_, n) =>
      services.listingWrites.update(alice.caller, listing.id, { price_cents: 100 + n }),
    ),
  );
  const events = await eventsOf(listing.id);
  t.equal(events.length, 9, 'created + 8 updates');
});
