/**
 * A light pass weighs the listings it claims by their candidates (matcher-worker.ts
 * candidateCounts) by each listing's tokens, whatever the keys' statistics (issue #55,
 * bench:noisy): one owner's 1,000 saved searches on one word make saved_search_keys look like a
 * couple of tokens of hundreds of keys each, and the join, planned from those statistics, read
 * every key once and paired it with the listings by price, then each pair with every token of its
 * listing: 260,000 rows to weigh a flood batch of 10 listings, 240-570 ms of every light pass
 * beside the flood. EXPLAIN ANALYZE of the generic plan the matcher runs (PLANNER_SETTINGS), on
 * both databases.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows, render } from '../../src/db/rows.ts';
import {
  candidateCounts,
  HEAVY,
  PLANNER_SETTINGS,
} from '../../src/saved-searches/matcher-worker.ts';
import { jsonPlan, planNodes, type PlanNode } from '../helpers/explaining.ts';
import { webhooksApp } from '../webhooks/support.ts';
import { publish, searcher } from './support.ts';

const app = await webhooksApp(t, { WEBHOOK_WORKER: 'false' });
const alerts = await searcher(app);
const seller = await searcher(app);
// Statistics of the listings before the flood's (none), as bench:noisy takes them.
await queryRows(app.db, sql`analyze listings`);
t.test(
  "a flood's keys on one token: weighing its listings reads that token's keys, by token",
  async (t) => {
    // One owner's 1,000 saved searches on one word (issue #55's flood), and one other; their
    // statistics taken: the keys look like two tokens of 500 keys each.
    const FLOOD = 1_000;
    await queryRows(
      app.db,
      sql`insert into saved_searches (id, app_id, environment, user_id, via_token, name, q)
      select gen_random_uuid(), ${alerts.appId}, 'live', ${alerts.userId}, false, 'flood', 'floodword'
      from generate_series(1, ${FLOOD}) i`,
    );
    await queryRows(
      app.db,
      sql`insert into saved_search_keys (token, saved_search_id)
      select s.q, s.id from saved_searches s where s.name = 'flood'`,
    );
    await queryRows(
      app.db,
      sql`insert into saved_search_keys (token, saved_search_id)
      select 'otherword', s.id from saved_searches s where s.name = 'flood' limit 1`,
    );
    await queryRows(app.db, sql`analyze saved_search_keys`);
    const ids: string[] = [];
    for (let i = 0; i < 10; i += 1)
      ids.push((await publish(app, seller.live, { title: `Floodword coat ${i}` })).id as string);
    let nodes: PlanNode[] = [];
    let counts: { n: number }[] = [];
    await app.db
      .transaction(async (tx) => {
        await queryRows(tx, PLANNER_SETTINGS);
        // The matcher's plan: the prepared statement's generic one (PLANNER_SETTINGS).
        const { sql: text, params } = render(candidateCounts(ids));
        await queryRows(tx, sql.raw(`prepare weighing as ${text}`));
        const values = params.map((value) => `'${String(value)}'`).join(', ');
        const [prepared] = await queryRows<Record<string, unknown>>(
          tx,
          sql.raw(`explain (analyze, format json) execute weighing(${values})`),
        );
        nodes = planNodes(jsonPlan([prepared]));
        await queryRows(tx, sql`deallocate weighing`);
        counts = await queryRows<{ n: number }>(tx, candidateCounts(ids));
        throw new Error('rolled back');
      })
      .catch((err: Error) => {
        if (err.message !== 'rolled back') throw err;
      });
    t.equal(counts.length, 10, 'each listing weighed');
    t.ok(
      counts.every((row) => row.n > HEAVY),
      `each one heavy (${counts.map((row) => row.n).join(', ')})`,
    );
    const functionRows = nodes
      .filter((node) => node['Node Type'] === 'Function Scan')
      .reduce((sum, node) => sum + Math.round(node['Actual Rows'] * node['Actual Loops']), 0);
    const keysRead = nodes
      .filter((node) => node['Relation Name'] === 'saved_search_keys')
      .reduce((sum, node) => sum + Math.round(node['Actual Rows'] * node['Actual Loops']), 0);
    const thrownAway = nodes.reduce(
      (sum, node) =>
        sum +
        ((node as { 'Rows Removed by Join Filter'?: number })['Rows Removed by Join Filter'] ?? 0) +
        (node['Rows Removed by Filter'] ?? 0),
      0,
    );
    // A token's keys counted up to HEAVY + 1 for each listing, not every key once per listing
    // token (before: the keys read whole and 250,000 pairs thrown away in bench:noisy).
    t.ok(keysRead <= 10 * (HEAVY + 1) + 100, `${keysRead} keys read for 10 listings`);
    t.ok(thrownAway <= 1_000, `${thrownAway} rows read and thrown away`);
    t.ok(functionRows <= 1_000, `${functionRows} tokens unnested (each listing's once)`);
  },
);
