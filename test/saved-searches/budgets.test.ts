/**
 * Saved searches' budgets between tenants (OpenAPI "Saved searches", "Budgets"; issue #55's
 * match flood): one developer account's saved searches, across all its apps, match one listing
 * at most 100 times (the oldest first; the rest counted in
 * saved_search_matches_over_budget_total), while another developer's search of the same thing
 * still matches; a matcher pass takes the queue's listings only while their candidates add up to
 * its budget, leaving the rest for the next pass; and the caps on saving count per owner across
 * apps and per end user of an app, not only per app.
 */
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import {
  HEAVY,
  MATCHES_PER_OWNER,
  Matcher,
  PASS_CANDIDATES,
} from '../../src/saved-searches/matcher-worker.ts';
import { EventsRepository } from '../../src/events/events-repository.ts';
import { SAVED_SEARCH_CAPS } from '../../src/saved-searches/saved-searches-service.ts';
import { Browser } from '../helpers/browser.ts';
import { counterValue } from '../helpers/metrics.ts';
import { waitUntil } from '../helpers/wait.ts';
import { createClient, createEndUser, exchange, obtainCode } from '../oauth/support.ts';
import { api, webhooksApp, type Json } from '../webhooks/support.ts';
import { drained, drainLanes, publish, save, searcher } from './support.ts';

const app = await webhooksApp(t, { METRICS_TOKEN: 'metrics-token-for-tests' });
const seller = await searcher(app);

/** A second app of the same developer, with a live key holding every scope. */
async function secondApp(owner: { username: string }) {
  const created = await app.services.apps.create({
    ownerUsername: owner.username,
    name: `second ${Math.random()}`,
  });
  await app.services.apps.completeMilestone(created.id, 'sandbox_listing');
  await app.services.apps.approve(created.id);
  const { key } = await app.services.keys.create({
    appId: created.id,
    env: 'live',
    scopes: 'read listings:write searches',
  });
  return { appId: created.id, live: key };
}

const callerOf = (appId: string, userId: string) => ({
  kind: 'api_key' as const,
  environment: 'live' as const,
  userId,
  appId,
  appOwnerId: userId,
  credentialId: null,
  scopes: ['searches'],
});

/** The listing.matched events a key lists about one listing. */
const matchedAbout = async (key: string, listingId: string): Promise<Json[]> => {
  const found: Json[] = [];
  let cursor: string | null = null;
  do {
    const res = await api(
      app,
      'GET',
      `/api/v1/events?type=listing.matched&limit=100${cursor ? `&cursor=${cursor}` : ''}`,
      key,
    );
    found.push(...res.body.data.filter((e: Json) => e.data.listing.id === listingId));
    cursor = res.body.meta.next_cursor;
  } while (cursor);
  return found;
};

const overBudget = () => counterValue(app, 'saved_search_matches_over_budget_total');

// One developer with two apps and 60 searches for the same brand in each: 120 of one owner.
const flooder = await searcher(app);
const flooderSecond = await secondApp(flooder);
const floodIds: string[] = [];
for (const appId of [flooder.appId, flooderSecond.appId])
  for (let i = 0; i < 60; i += 1)
    floodIds.push(
      (
        await app.services.savedSearches.create(callerOf(appId, flooder.userId), {
          name: `flood ${i}`,
          brand: 'Flood',
        })
      ).id,
    );
const bystander = await searcher(app);
const bystanders = await save(app, bystander.live, { brand: 'Flood' });

t.test(`one owner's searches match one listing at most ${MATCHES_PER_OWNER} times`, async (t) => {
  const before = await overBudget();
  const { id } = await publish(app, seller.live, { title: 'Flood anorak', brand: 'Flood' });
  await drained(app);
  const first = await matchedAbout(flooder.live, id);
  const second = await matchedAbout(flooderSecond.live, id);
  t.equal(first.length + second.length, MATCHES_PER_OWNER, 'the budget, across both apps');
  const oldest = [...floodIds].sort().slice(0, MATCHES_PER_OWNER);
  t.strictSame(
    [...first, ...second].map((e) => e.data.saved_search_id).sort(),
    oldest,
    'the oldest searches first',
  );
  t.equal((await overBudget()) - before, 120 - MATCHES_PER_OWNER, 'the others counted');
  t.strictSame(
    (await matchedAbout(bystander.live, id)).map((e) => e.data.saved_search_id),
    [bystanders.id],
    "another developer's search of the same brand still matches",
  );

  // An edit that keeps it matching records nothing more: the kept matches are the same ones.
  const edited = await api(app, 'PATCH', `/api/v1/listings/${id}`, seller.live, {
    title: 'Flood anorak, size M',
  });
  t.equal(edited.status, 200);
  await drained(app);
  t.equal(
    (await matchedAbout(flooder.live, id)).length +
      (await matchedAbout(flooderSecond.live, id)).length,
    MATCHES_PER_OWNER,
    'still the budget after an edit',
  );
});

t.test('a pass takes listings only while their candidates fit its budget', async (t) => {
  const matcher = app.services.matcher!;
  await matcher.stop();
  t.teardown(() => matcher.start());
  await drained(app);
  const ids: string[] = [];
  for (let i = 0; i < 20; i += 1)
    ids.push((await publish(app, seller.live, { title: `Flood parka ${i}`, brand: 'Flood' })).id);
  const [{ candidates }] = (await queryRows<{ candidates: number }>(
    app.db,
    sql`select count(*)::int as candidates from saved_searches where brand = 'Flood'`,
  )) as [{ candidates: number }];
  const pass = await matcher.pass('light');
  const fits = Math.floor(PASS_CANDIDATES / candidates);
  t.equal(pass.listings, fits, `${fits} of 20 listings of ${candidates} candidates each`);
  t.ok(pass.examined <= PASS_CANDIDATES, `examined ${pass.examined}`);
  t.ok(pass.more, 'the rest left for the next pass');
  await drainLanes(matcher);
  for (const id of ids)
    t.equal((await matchedAbout(bystander.live, id)).length, 1, 'every listing matched in the end');
});

t.test('the caps count per owner across apps, and per end user of an app', async (t) => {
  // Per owner: the developer's apps together, in one environment.
  const owner = await searcher(app);
  const other = await secondApp(owner);
  const fill = (appId: string, n: number) =>
    queryRows(
      app.db,
      sql`insert into saved_searches (id, app_id, environment, user_id, via_token, name, q)
        select gen_random_uuid(), ${appId}, 'live', ${owner.userId}, false, 'bulk', 'bulk'
        from generate_series(1, ${n})`,
    );
  const third = await secondApp(owner);
  await fill(owner.appId, SAVED_SEARCH_CAPS.perApp);
  await fill(other.appId, 400);
  await fill(third.appId, SAVED_SEARCH_CAPS.perOwner - SAVED_SEARCH_CAPS.perApp - 400 - 1);
  const saveIn = (key: string) =>
    api(app, 'POST', '/api/v1/saved_searches', key, { name: 'one more', q: 'coat' });
  t.equal((await saveIn(third.live)).status, 201, "the last of the owner's places");
  const over = await saveIn(third.live);
  t.equal(over.status, 409, 'the owner has as many as one owner may');
  t.match(over.body.error.message, /developer has 1000 saved searches in live across their apps/);
  t.equal((await saveIn((await secondApp(owner)).live)).status, 409, 'a new app brings no more');

  // Per end user: one user's tokens take a share of the app's, not all of it.
  const client = await createClient(app);
  await app.services.apps.completeMilestone(client.clientId, 'sandbox_listing');
  await app.services.apps.approve(client.clientId);
  const tokenOf = async (user: Awaited<ReturnType<typeof createEndUser>>) => {
    const code = await obtainCode(new Browser(app), client, user, { scope: 'read searches' });
    return (await exchange(app, client, code)).json().access_token as string;
  };
  const [greedy, polite] = [await createEndUser(app), await createEndUser(app)];
  const greedyTokens = [await tokenOf(greedy), await tokenOf(greedy)];
  for (let i = 0; i < SAVED_SEARCH_CAPS.perUser; i += 1)
    await save(app, greedyTokens[i % 2]!, { name: `mine ${i}`, q: `word${i}` });
  const refused = await api(app, 'POST', '/api/v1/saved_searches', greedyTokens[0]!, {
    name: 'more',
    q: 'coat',
  });
  t.equal(refused.status, 409, 'beyond one user’s share, through any of their tokens');
  t.match(refused.body.error.message, /This user has 50 saved searches of this app in live/);
  t.equal(
    (
      await api(app, 'POST', '/api/v1/saved_searches', await tokenOf(polite), {
        name: 'p',
        q: 'coat',
      })
    ).status,
    201,
    'another user of the app still saves',
  );
  const appKey = (
    await app.services.keys.create({ appId: client.clientId, env: 'live', scopes: 'searches' })
  ).key;
  t.equal(
    (await api(app, 'POST', '/api/v1/saved_searches', appKey, { name: 'k', q: 'coat' })).status,
    201,
    "and so does the app's key",
  );
});

t.test('a listing many searches match waits in the heavy lane, delaying no other', async (t) => {
  const matcher = app.services.matcher!;
  await matcher.stop();
  t.teardown(() => matcher.start());
  await drained(app);
  for (let i = 0; i < HEAVY + 50; i += 1)
    await app.services.savedSearches.create(callerOf(flooder.appId, flooder.userId), {
      name: `heavy ${i}`,
      brand: 'Heavy',
    });
  const heavy = [];
  for (let i = 0; i < 3; i += 1)
    heavy.push((await publish(app, seller.live, { title: `Heavy coat ${i}`, brand: 'Heavy' })).id);
  const probe = (await publish(app, seller.live, { title: 'Flood smock', brand: 'Flood' })).id;
  const first = await matcher.pass('light');
  t.equal(first.listings, 1, 'the light lane matches the light write only');
  t.equal((await matchedAbout(bystander.live, probe)).length, 1, 'written after three heavy ones');
  const lanes = await queryRows<{ weight: number }>(
    app.db,
    sql`select weight from listing_match_queue order by id`,
  );
  t.strictSame(
    lanes.map((row) => row.weight > HEAVY),
    [true, true, true],
    'the heavy ones wait in their lane, weighed once',
  );
  for (let n = 3; n > 0; n -= 1) {
    const pass = await matcher.pass('heavy');
    t.equal(pass.listings, 1, 'one heavy listing a pass');
  }
  t.equal(
    (await queryRows(app.db, sql`select 1 from listing_match_queue`)).length,
    0,
    'all matched',
  );
});

t.test(
  'the lanes run beside each other: a heavy pass that does not end delays no light write',
  {
    skip: app.config.databaseUrl?.startsWith('postgres')
      ? false
      : 'PostgreSQL only: PGlite runs one transaction at a time, so no pass can be held',
  },
  async (t) => {
    const matcher = app.services.matcher!;
    await matcher.stop();
    t.teardown(() => matcher.start());
    await drained(app);
    const owner = await searcher(app);
    const stuck = [];
    for (let i = 0; i < HEAVY + 10; i += 1)
      stuck.push(
        (
          await app.services.savedSearches.create(callerOf(owner.appId, owner.userId), {
            name: `stuck ${i}`,
            brand: 'Stuck',
          })
        ).id,
      );
    const probes = await save(app, bystander.live, { brand: 'Probe' });
    await publish(app, seller.live, { title: 'Stuck coat', brand: 'Stuck' });
    // Weighed into the heavy lane; then its pass is held: another session locks the saved searches
    // it would set the last match of, until the end of this test.
    await matcher.pass('light');
    const other = postgres(app.config.databaseUrl!, { max: 1, onnotice: () => {} });
    const session = await other.reserve();
    t.teardown(async () => {
      await session`rollback`;
      session.release();
      await other.end({ timeout: 1 });
    });
    await session`begin`;
    await session`select id from saved_searches where id = any(${stuck}::uuid[]) for update`;
    const running = new Matcher(app.db, new EventsRepository(app.db));
    t.teardown(() => running.stop());
    running.start();
    await waitUntil('the heavy pass waiting on the lock', async () => {
      const [waiting] = await session<{ n: number }[]>`select count(*)::int as n
      from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
      return waiting!.n > 0;
    });
    for (const n of [1, 2, 3]) {
      const probe = await publish(app, seller.live, { title: `Probe ${n}`, brand: 'Probe' });
      running.nudge();
      await waitUntil(`light write ${n} matched`, async () =>
        (await matchedAbout(bystander.live, probe.id)).some(
          (e) => e.data.saved_search_id === probes.id,
        ),
      );
    }
    t.pass('three light writes, one after another, matched while the heavy pass waited');
    await session`rollback`;
    await running.stop();
    await drainLanes(matcher);
  },
);

t.test("one owner's new matches a minute are bounded too", async (t) => {
  await app.services.matcher!.stop();
  t.teardown(() => app.services.matcher!.start());
  await drained(app);
  const matcher = new Matcher(app.db, new EventsRepository(app.db), {
    budgets: { perListing: 10, perMinute: 25 },
  });
  const owner = await searcher(app);
  for (let i = 0; i < 12; i += 1) await save(app, owner.live, { name: `m${i}`, brand: 'Minute' });
  const matchesOf = async (listingId: string) =>
    (
      await queryRows<{ n: number }>(
        app.db,
        sql`select count(*)::int as n from saved_search_matches where listing_id = ${listingId}`,
      )
    )[0]!.n;
  const write = async () =>
    (await publish(app, seller.live, { title: 'Minute jacket', brand: 'Minute' })).id as string;
  const ids = [await write(), await write(), await write(), await write()];
  let overBudget = 0;
  for (let pass = await matcher.pass('light'); ; pass = await matcher.pass('light')) {
    overBudget += pass.overBudget;
    if (!pass.more) break;
  }
  t.strictSame(
    await Promise.all(ids.map(matchesOf)),
    [10, 10, 5, 0],
    '10 a listing, 25 in the minute, in the order written',
  );
  t.equal(overBudget, 2 * 4 + 5 + 10, 'the others counted: 2 a listing, then the minute');
  // The minute is over: the owner's next match starts a new one.
  await queryRows(
    app.db,
    sql`update saved_search_match_budgets set window_start = now() - interval '61 seconds'
      where owner_id = ${owner.userId}`,
  );
  const later = await write();
  await drainLanes(matcher);
  t.equal(await matchesOf(later), 10, 'a new minute, a new budget');
});
