/**
 * The worker's outcomes and an endpoint's delete (or disable) never deadlock: every transaction
 * that writes an endpoint's row and its deliveries' takes the endpoint's first, and a batch of
 * successes, which cannot, skips an endpoint row another holds. Found by
 * test/webhooks/endpoints-api.test.ts, whose DELETE met the worker's failed attempt and lost one
 * CI run in four to "deadlock detected". Reproduced here in a fixed order, on PostgreSQL (PGlite
 * runs one transaction at a time): a second session holds the endpoint's row as a delete does,
 * the worker's statement starts, and the second session then writes the delivery.
 */
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import {
  DeliveriesRepository,
  type ClaimedDelivery,
} from '../../src/webhooks/deliveries-repository.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { listingBody } from '../helpers/listings.ts';
import { buildTestApp, freshDatabaseEnv } from '../helpers/app.ts';
import { waitUntil } from '../helpers/wait.ts';
import { api } from './support.ts';

const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;
if (!onPostgres) t.plan(0, 'PostgreSQL only (DATABASE_URL): PGlite runs one transaction at a time');
else {
  const database = await freshDatabaseEnv(t);
  const app = await buildTestApp(t, {
    ...database,
    WEBHOOK_WORKER: 'false',
    SAVED_SEARCH_MATCHER: 'false',
  });
  const deliveries = new DeliveriesRepository(app.db);
  const dev = await createDeveloper(app);
  const key = await createKey(app, dev, 'sandbox');
  const other = postgres(database.DATABASE_DIRECT_URL ?? database.DATABASE_URL, {
    max: 1,
    onnotice: () => {},
  });
  t.teardown(() => other.end({ timeout: 5 }));

  /** A new endpoint with one delivery due, claimed as the worker claims it. */
  const claimedDelivery = async (): Promise<ClaimedDelivery> => {
    // Failing since a minute ago: a success clears its clock.
    const [endpoint] = await queryRows<{ id: string }>(
      app.db,
      sql`insert into webhook_endpoints (app_id, environment, url, secret, failing_since)
          values (${dev.appId}::uuid, 'sandbox', 'https://hooks.example.com/x', 'svc_whsec_test',
                  now() - interval '1 minute')
          returning id`,
    );
    // The endpoints of the earlier tests are deactivated: this one's delivery alone is recorded.
    // Its event and delivery, recorded as a write records them.
    const created = await api(app, 'POST', '/api/v1/listings', key, listingBody());
    if (created.status !== 201) throw new Error(`listing not created: ${created.status}`);
    const claims = await deliveries.claim(10, 60_000, { defaultRoom: 4, endpointRoom: [] });
    const claim = claims.find((c) => c.endpoint_id === endpoint!.id);
    if (!claim) throw new Error('the delivery was not claimed');
    return claim;
  };

  /** Whether a session of this database waits for a row lock. */
  const someoneWaits = async () => {
    const [row] = await queryRows<{ n: number }>(
      app.db,
      sql`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'`,
    );
    return row!.n > 0;
  };

  t.test('a failed attempt waits for the endpoint, holding none of its deliveries', async (t) => {
    const claim = await claimedDelivery();
    let failed: Promise<boolean> | undefined;
    await other.begin(async (tx) => {
      // As a delete does: the endpoint's row, then its pending deliveries.
      await tx`update webhook_endpoints set active = false where id = ${claim.endpoint_id}`;
      failed = deliveries.fail(
        claim,
        { responseCode: 500, error: 'HTTP 500', durationMs: 5 },
        1000,
      );
      await waitUntil('the failure to wait for the endpoint', someoneWaits);
      // Had the worker's transaction taken the delivery first, this would wait for it while it
      // waits for us: deadlock, and one of the two rolled back a second later.
      await tx`set local lock_timeout = '5s'`;
      const updated = await tx`
        update webhook_deliveries set status = 'failed', last_error = 'endpoint deleted'
        where endpoint_id = ${claim.endpoint_id} and status = 'pending' returning id`;
      t.equal(updated.length, 1, 'the delete fails the delivery at once');
    });
    t.equal(await failed, false, 'the failure then finds its claim gone, and records nothing');
    const [row] = await queryRows<{ status: string; last_error: string }>(
      app.db,
      sql`select status, last_error from webhook_deliveries where id = ${claim.id}`,
    );
    t.same({ ...row }, { status: 'failed', last_error: 'endpoint deleted' });
  });

  t.test('a batch of successes does not wait for an endpoint another holds', async (t) => {
    const claim = await claimedDelivery();
    await other.begin(async (tx) => {
      await tx`update webhook_endpoints set active = false where id = ${claim.endpoint_id}`;
      await deliveries.succeedMany([
        { id: claim.id, attempts: claim.attempts, responseCode: 200, durationMs: 5 },
      ]);
      t.pass('done while the endpoint is held');
    });
    const [row] = await queryRows<{ status: string; failing: boolean }>(
      app.db,
      sql`select d.status, ep.failing_since is not null as failing
          from webhook_deliveries d join webhook_endpoints ep on ep.id = d.endpoint_id
          where d.id = ${claim.id}`,
    );
    t.same({ ...row }, { status: 'succeeded', failing: true }, "the endpoint's clock left to it");
  });

  t.test("a success clears the endpoint's failure clock when nobody holds it", async (t) => {
    const claim = await claimedDelivery();
    await deliveries.succeedMany([
      { id: claim.id, attempts: claim.attempts, responseCode: 200, durationMs: 5 },
    ]);
    const [row] = await queryRows<{ failing: boolean }>(
      app.db,
      sql`select failing_since is not null as failing from webhook_endpoints where id = ${claim.endpoint_id}`,
    );
    t.equal(row!.failing, false);
  });
}
