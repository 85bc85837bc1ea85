/**
 * Bounded work per write (OpenAPI "Saved searches"): the matcher's statement reads the keys of
 * its listing's own tokens through their index and nothing else of the saved searches, with
 * 20,000 of them never analyzed (autovacuum may not have run): no scan of saved_search_keys,
 * saved_searches or saved_search_matches, and as many keys read as match the listing's tokens.
 * EXPLAIN ANALYZE of the statement the matcher runs, under its planner settings, on both
 * databases.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows, render } from '../../src/db/rows.ts';
import { matchingStatement, PLANNER_SETTINGS } from '../../src/saved-searches/matcher-worker.ts';
import { jsonPlan, planNodes, type PlanNode } from '../helpers/explaining.ts';
import { webhooksApp } from '../webhooks/support.ts';
import { publish, save, searcher } from './support.ts';

const app = await webhooksApp(t, { WEBHOOK_WORKER: 'false', SAVED_SEARCH_MATCHER: 'false' });
const alerts = await searcher(app);
const seller = await searcher(app);
// A price range the listing below is in: its key is read (saved_search_keys_price_idx).
await save(app, alerts.live, { q: 'teapot', max_price_cents: 1_000_000 });
const MANY = 20_000;
await queryRows(
  app.db,
  sql`insert into saved_searches (id, app_id, environment, user_id, via_token, name, q)
    select gen_random_uuid(), ${alerts.appId}, 'live', ${alerts.userId}, false, 'bulk', 'kw' || i
    from generate_series(1, ${MANY}) i`,
);
await queryRows(
  app.db,
  sql`insert into saved_search_keys (token, saved_search_id)
    select s.q, s.id from saved_searches s where s.name = 'bulk'`,
);

t.test('a write reads the keys of its own tokens only, by index', async (t) => {
  const id = (await publish(app, seller.live, { title: 'Teapot kw7 in cast iron' })).id as string;
  let plan: PlanNode | undefined;
  let generic: PlanNode | undefined;
  let genericPlans = -1;
  let examined = -1;
  await app.db
    .transaction(async (tx) => {
      await queryRows(tx, PLANNER_SETTINGS);
      const [row] = await queryRows<Record<string, unknown>>(
        tx,
        sql`explain (analyze, format json) ${matchingStatement([id])}`,
      );
      plan = jsonPlan([row]);
      // The plan the matcher runs: its prepared statement's generic plan (plan_cache_mode).
      const { sql: text, params } = render(matchingStatement([id]));
      await queryRows(tx, sql.raw(`prepare matching as ${text}`));
      const values = params.map((value) => `'${String(value)}'`).join(', ');
      const [prepared] = await queryRows<Record<string, unknown>>(
        tx,
        sql.raw(`explain (analyze, format json) execute matching(${values})`),
      );
      generic = jsonPlan([prepared]);
      const [count] = await queryRows<{ n: number }>(
        tx,
        sql`select generic_plans::int as n from pg_prepared_statements where name = 'matching'`,
      );
      genericPlans = count!.n;
      await queryRows(tx, sql`deallocate matching`);
      const [first] = await queryRows<{ examined: number }>(tx, matchingStatement([id]));
      examined = first!.examined;
      throw new Error('rolled back');
    })
    .catch((err: Error) => {
      if (err.message !== 'rolled back') throw err;
    });
  t.equal(examined, 2, 'two saved searches examined: those keyed by teapot and kw7');
  t.ok(genericPlans >= 1, 'the prepared statement ran its generic plan');
  for (const [name, tree] of [
    ['custom', plan!],
    ['generic', generic!],
  ] as const) {
    const nodes = planNodes(tree);
    const tables = ['saved_search_keys', 'saved_searches', 'saved_search_matches'];
    for (const node of nodes)
      if (node['Relation Name'] && tables.includes(node['Relation Name']))
        t.not(
          node['Node Type'],
          'Seq Scan',
          `${name}: ${node['Relation Name']}: ${node['Node Type']}`,
        );
    // Per loop, one lookup of one of the listing's tokens: EXPLAIN shows rows per loop, rounded.
    const keyLookups = nodes.filter((node) => node['Relation Name'] === 'saved_search_keys');
    t.ok(keyLookups.length > 0, `${name}: the keys are read`);
    for (const node of keyLookups) {
      t.ok(
        node['Actual Rows'] <= 1,
        `${name}: about a key per token read (${node['Actual Rows']} a loop)`,
      );
      t.ok(
        node['Actual Loops'] <= 20,
        `${name}: a lookup per token (${node['Actual Loops']}), not per key`,
      );
    }
  }
});
