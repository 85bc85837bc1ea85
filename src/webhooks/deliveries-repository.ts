/**
 * Deliveries: the worker's claims and outcomes, and what operators see of them. Every
 * statement is short (one statement, or one small transaction): nothing is held open while a
 * request goes out, which matters on PGlite (one connection) and for several workers on one
 * PostgreSQL.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { isoColumn, ISO_MICROSECONDS, queryRows } from '../db/rows.ts';
import { unindexed } from '../db/unique-lookups.ts';
import type { EventType } from '../generated/schemas.ts';
import type { DeliveryRow } from './endpoint-views.ts';
import { sellerGrantsApp } from '../events/events-repository.ts';
import { idTime } from '../events/outbox-partitions.ts';

export type { DeliveryRow, DeliveryStatus } from './endpoint-views.ts';

/** A claimed attempt, with what is needed to send it. */
export interface ClaimedDelivery {
  id: string;
  event_id: string;
  endpoint_id: string;
  /** This attempt's number (1 for the first); the claim is only valid while it is unchanged. */
  attempts: number;
  type: EventType;
  data: string;
  event_created_at: string;
  /** The W3C trace id of the request that recorded the event, if it had one. */
  trace_id: string | null;
  url: string;
  secret: string;
  /** The secret replaced by a rotation, while its 24 hours of overlap last (docs/webhooks.md). */
  previous_secret: string | null;
  /**
   * The event's seller no longer grants the app access (sellerGrantsApp): the delivery is
   * withdrawn, not sent.
   */
  withdrawn: boolean;
}

const millis = (ms: number) => sql`(${Math.max(0, Math.round(ms))} * interval '1 millisecond')`;

/**
 * A claimed delivery is updated by its partition's index on id alone (its event_created_at names
 * the partition), its status checked `unindexed`
 * (src/db/unique-lookups.ts): a plain `status = 'pending'` would let the partial indexes of
 * pending deliveries be scanned whole instead.
 */
const PENDING = sql`${unindexed('status')} = 'pending'`;

export interface Outcome {
  responseCode: number | null;
  error: string | null;
  /** How long the attempt took, connection included. */
  durationMs: number;
}

/**
 * An endpoint whose attempts have all failed for this long is disabled (docs/webhooks.md,
 * endpoint recovery): a success at any time resets the clock.
 */
const FAILING_DISABLES_AFTER = '3 days';
const FAILING_REASON = 'Every delivery failed for 3 days.';
const GONE_REASON = 'The endpoint answered 410 Gone.';
const WITHDRAWN_REASON = "not sent: the listing's seller removed this app's access (or it expired)";
const FAILING_TOO_LONG = sql.raw(
  `coalesce(ep.failing_since <= now() - interval '${FAILING_DISABLES_AFTER}', false)`,
);

/**
 * What the worker knows of its own attempts in flight: each busy (or recently busy) endpoint's
 * room (how many more it may get now) and attempts in flight; any other endpoint has
 * `defaultRoom` and none in flight.
 */
export interface ClaimFairness {
  defaultRoom: number;
  endpointRoom: { endpoint_id: string; room: number; in_flight: number }[];
}

export class DeliveriesRepository {
  constructor(private readonly db: Db) {}

  /**
   * Claims up to `limit` due attempts in one statement, fairly to owners first, then to their
   * endpoints: every active endpoint with room offers its oldest due attempts (at most its room:
   * the one listed in `endpointRoom`, else `defaultRoom`), and they are taken in turns. An
   * owner's (a developer's, across all its apps) n-th attempt of the claim counts as its
   * attempts in flight plus n, and the claim takes the lowest counts first: a developer with one
   * delivery due gets the next free slot even beside another's hundreds of endpoints with
   * backlogs, older or not. Within an owner, likewise by endpoint (its attempts in flight plus
   * its round), then the oldest. The rows are locked with FOR UPDATE SKIP LOCKED as each
   * endpoint's are offered (a concurrent worker skips them, and is offered the endpoint's next
   * ones instead of waiting or coming back short), their attempt counter goes up and their
   * next_attempt_at moves a lease into the future, so once this statement commits no other
   * worker sees them as due. If this process dies mid-send, the lease expires and the delivery
   * is attempted again (at-least-once).
   */
  async claim(limit: number, leaseMs: number, fairness: ClaimFairness): Promise<ClaimedDelivery[]> {
    // Each endpoint's due attempts are read from every live partition (a week each: a handful,
    // docs/scaling.md) in the order of their partial index (endpoint_id, next_attempt_at), merged:
    // its first `room` rows, however many are due. A partition's statistics lag its inserts
    // (this week's is written all the time), and with a partition believed nearly empty the
    // planner would rather sort all of an endpoint's due rows than merge the index scans: sorting
    // is ruled out for this statement (its other sorts are of a few rows and stay).
    // And it is planned at every run, never from a generic plan (the prepared statement's, which
    // PostgreSQL makes once per connection and keeps until the tables' statistics change): made
    // while the outbox was nearly empty, the generic plan read every due delivery of the
    // partition for each endpoint (the due index on next_attempt_at alone, the endpoint
    // filtered) and the partition whole for the update, and kept doing so once a flood had filled
    // it: 1.2-1.6 s a claim behind 40,000 deliveries, 23-59 ms planned at each run (bench:noisy,
    // docs/performance.md). A plan made at each run reads the partitions' current size.
    return this.db.transaction(async (tx) => {
      // (The penalty that rules a sort out makes the plan's cost huge: not worth compiling.)
      // One statement for the three settings: a pass is begin, this, the claim and commit.
      await tx.execute(
        sql`select set_config('enable_sort', 'off', true), set_config('jit', 'off', true),
              set_config('plan_cache_mode', 'force_custom_plan', true)`,
      );
      return this.claimIn(tx, limit, leaseMs, fairness);
    });
  }

  private claimIn(
    tx: Db,
    limit: number,
    leaseMs: number,
    fairness: ClaimFairness,
  ): Promise<ClaimedDelivery[]> {
    return queryRows<ClaimedDelivery>(
      tx,
      sql`with busy as (
            select * from jsonb_to_recordset(${JSON.stringify(fairness.endpointRoom)}::jsonb)
              as b(endpoint_id uuid, room int, in_flight int)
          ), room as (
            select ep.id as endpoint_id, a.owner_id,
              coalesce(b.room, ${fairness.defaultRoom}) as room,
              coalesce(b.in_flight, 0) as in_flight,
              sum(coalesce(b.in_flight, 0)) over (partition by a.owner_id) as owner_in_flight
            from webhook_endpoints ep
            join apps a on a.id = ep.app_id
            left join busy b on b.endpoint_id = ep.id
            where ep.active
          ), offered as (
            -- Each endpoint's oldest due attempts, locked here: a row another worker is claiming
            -- right now is skipped and the next one offered instead, so concurrent workers
            -- claim different rows rather than the same oldest ones (and come back short).
            select o.id, o.endpoint_id, r.owner_id, r.in_flight, r.owner_in_flight,
              o.next_attempt_at, o.event_created_at
            from room r cross join lateral (
              select d.id, d.endpoint_id, d.next_attempt_at, d.event_created_at
              from webhook_deliveries d
              where d.endpoint_id = r.endpoint_id and d.status = 'pending' and d.next_attempt_at <= now()
              order by d.next_attempt_at
              limit r.room
              for update of d skip locked
            ) o
            where r.room > 0
          ), by_endpoint as (
            -- an endpoint's n-th attempt here comes after its attempts in flight
            select *, in_flight + row_number() over (
                partition by endpoint_id order by next_attempt_at) as endpoint_turn
            from offered
          ), by_owner as (
            -- and an owner's n-th after all of its own in flight, whatever its endpoints
            select *, owner_in_flight + row_number() over (
                partition by owner_id order by endpoint_turn, next_attempt_at) as owner_turn
            from by_endpoint
          ), due as (
            select id, event_created_at from by_owner
            order by owner_turn, endpoint_turn, next_attempt_at
            limit ${limit}
          ), claimed as (
            update webhook_deliveries d
            set attempts = d.attempts + 1, last_attempt_at = now(), next_attempt_at = now() + ${millis(leaseMs)}
            -- by id (an array: each partition's index on id), however many attempts are pending
            from due where d.id = any(array(select id from due)) and d.id = due.id
              -- the partitions holding them alone (pruned when the statement runs)
              and d.event_created_at = any(array(select event_created_at from due))
            returning d.id, d.event_id, d.endpoint_id, d.attempts, d.event_created_at
          )
          select c.id, c.event_id, c.endpoint_id, c.attempts, e.type, e.data,
            ${isoColumn('e.created_at', 'event_created_at')}, e.trace_id, ep.url, ep.secret,
            case when ep.previous_secret_expires_at > now() then ep.previous_secret end as previous_secret,
            not ${sellerGrantsApp(sql`e.app_id`, sql`e.seller_id`)} as withdrawn
          from claimed c
          -- the event's partition alone: its created_at is the delivery's partition key
          join webhook_events e on e.id = c.event_id and e.created_at = c.event_created_at
          join webhook_endpoints ep on ep.id = c.endpoint_id`,
    );
  }

  /**
   * Milliseconds until the earliest pending attempt is due (0 if overdue), or null when none is
   * pending. The clamp is JavaScript's: SQL's greatest(0, null) is 0, which read "due now" for an
   * empty outbox and had an idle worker claim every 25 ms instead of every poll interval.
   */
  async nextDueInMs(): Promise<number | null> {
    const [row] = await queryRows<{ ms: number | null }>(
      this.db,
      sql`select ceil(extract(epoch from (min(d.next_attempt_at) - now())) * 1000)::int as ms
          from webhook_deliveries d join webhook_endpoints ep on ep.id = d.endpoint_id
          where d.status = 'pending' and ep.active`,
    );
    const ms = row?.ms ?? null;
    return ms === null ? null : Math.max(0, ms);
  }

  /**
   * The outbox as an operator watches it: deliveries waiting (pending on an active endpoint),
   * the age of the oldest of them, and the endpoints that are disabled.
   */
  async backlog(): Promise<{ pending: number; oldestAgeSeconds: number; disabled: number }> {
    const [row] = await queryRows<{ pending: number; oldest: number | null; disabled: number }>(
      this.db,
      sql`select
            (select count(*)::int from webhook_deliveries d
              join webhook_endpoints ep on ep.id = d.endpoint_id
              where d.status = 'pending' and ep.active) as pending,
            (select extract(epoch from (now() - min(d.created_at)))::float8 from webhook_deliveries d
              join webhook_endpoints ep on ep.id = d.endpoint_id
              where d.status = 'pending' and ep.active) as oldest,
            (select count(*)::int from webhook_endpoints where not active and deleted_at is null) as disabled`,
    );
    return {
      pending: row?.pending ?? 0,
      oldestAgeSeconds: Math.max(0, row?.oldest ?? 0),
      disabled: row?.disabled ?? 0,
    };
  }

  /**
   * Several attempts succeeded: one statement for all of them (the worker batches the successes
   * that finish together). A claim lost meanwhile (redelivered) is left alone.
   */
  async succeedMany(
    items: readonly {
      id: string;
      attempts: number;
      responseCode: number | null;
      durationMs: number;
    }[],
  ): Promise<void> {
    if (items.length === 0) return;
    // One statement: the deliveries, their attempts' history and the endpoints' failure clocks.
    await this.db.execute(
      sql`with v as (
            select * from jsonb_to_recordset(${JSON.stringify(
              items.map((item) => ({
                id: item.id,
                attempts: item.attempts,
                code: item.responseCode,
                ms: Math.round(item.durationMs),
              })),
            )}::jsonb) as v(id text, attempts int, code int, ms int)
          ), done as (
            update webhook_deliveries d
            set status = 'succeeded', last_response_code = v.code, last_error = null
            -- Looked up by id (an array; each live partition's index on id once), whatever the
            -- backlog. Not "status = 'pending'": that matches the due index's predicate, and with
            -- the statistics of a smaller outbox the planner ANDed the whole index (every pending
            -- row) with the key.
            from v where d.id = any(array(select id from v))
              and d.id = v.id and d.attempts = v.attempts and d.status not in ('succeeded', 'failed')
            returning d.id, d.endpoint_id
          ), history as (
            insert into webhook_delivery_attempts (delivery_id, attempt, attempted_at, response_code, duration_ms)
            select v.id, v.attempts, clock_timestamp(), v.code, v.ms from v join done on done.id = v.id
          )
          -- The endpoints' rows after the deliveries' here, the other way round from every
          -- transaction that writes both (fail, a delete, a disable): rows another one holds are
          -- skipped rather than waited for, or the two could deadlock. That one is deactivating
          -- the endpoint or recording a failure of it, and its next success clears the clock.
          update webhook_endpoints set failing_since = null
          where id in (
            select id from webhook_endpoints
            where id in (select endpoint_id from done) and failing_since is not null
            for no key update skip locked)`,
    );
  }

  /**
   * The attempt failed: retry after `retryInMs`, or (null) give up. The endpoint records the
   * error either way (docs/webhooks.md: last_error, last_failure_at) and starts its failure clock;
   * when it has only failed for FAILING_DISABLES_AFTER it is disabled, and its other pending
   * deliveries fail. Returns whether the claim still held.
   */
  async fail(claim: ClaimedDelivery, outcome: Outcome, retryInMs: number | null): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      // The endpoint's row first, then its deliveries': the order of every transaction that
      // writes both (a delete, a disable, a 410, an app's deletion), or two of them deadlock.
      const [endpoint] = await queryRows<{ disabled: boolean }>(
        tx,
        sql`update webhook_endpoints ep
            set last_error = ${outcome.error}, last_failure_at = now(),
                failing_since = coalesce(ep.failing_since, now()),
                active = ep.active and not ${FAILING_TOO_LONG},
                disabled_reason = case when ep.active and ${FAILING_TOO_LONG}
                  then ${FAILING_REASON} else ep.disabled_reason end,
                disabled_at = case when ep.active and ${FAILING_TOO_LONG}
                  then now() else ep.disabled_at end
            where ep.id = ${claim.endpoint_id}
            returning (ep.disabled_at = now() and not ep.active) as disabled`,
      );
      const rows = await queryRows<{ id: string }>(
        tx,
        sql`update webhook_deliveries
            set status = ${retryInMs === null ? 'failed' : 'pending'},
                next_attempt_at = ${retryInMs === null ? sql`next_attempt_at` : sql`now() + ${millis(retryInMs)}`},
                last_response_code = ${outcome.responseCode}, last_error = ${outcome.error}
            where ${claimed(claim)} and ${PENDING}
            returning id`,
      );
      if (rows.length > 0) await this.recordAttempt(tx, claim, outcome);
      if (endpoint?.disabled)
        await this.failPending(tx, claim.endpoint_id, 'endpoint disabled (failing for 3 days)');
      return rows.length > 0;
    });
  }

  /**
   * 410 Gone: the attempt fails for good, the endpoint is disabled and its other pending deliveries
   * fail.
   */
  async gone(claim: ClaimedDelivery, outcome: Outcome): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.execute(
        sql`update webhook_endpoints set active = false, last_error = ${outcome.error}, last_failure_at = now(),
              disabled_reason = ${GONE_REASON}, disabled_at = now()
            where id = ${claim.endpoint_id}`,
      );
      const [held] = await queryRows<{ id: string }>(
        tx,
        sql`update webhook_deliveries set status = 'failed', last_response_code = ${outcome.responseCode}, last_error = ${outcome.error}
            where ${claimed(claim)} and ${PENDING} returning id`,
      );
      if (held) await this.recordAttempt(tx, claim, outcome);
      await this.failPending(tx, claim.endpoint_id, 'endpoint disabled (410 Gone)', claim.id);
    });
  }

  /**
   * The event's seller removed the app (or its grant was revoked) after the event was recorded:
   * the delivery fails without being sent. Neither an attempt of the endpoint nor a failure of
   * it: its failure clock and history are untouched.
   */
  async withdraw(claim: ClaimedDelivery): Promise<void> {
    await this.db.execute(
      // The claim counted an attempt that is not made: attempts go back to those sent.
      sql`update webhook_deliveries
          set status = 'failed', attempts = attempts - 1, last_response_code = null, last_error = ${WITHDRAWN_REASON}
          where ${claimed(claim)} and ${PENDING}`,
    );
  }

  private async recordAttempt(tx: Db, claim: ClaimedDelivery, outcome: Outcome): Promise<void> {
    await tx.execute(
      sql`insert into webhook_delivery_attempts (delivery_id, attempt, attempted_at, response_code, error, duration_ms)
          values (${claim.id}, ${claim.attempts}, clock_timestamp(), ${outcome.responseCode}, ${outcome.error}, ${Math.round(outcome.durationMs)})`,
    );
  }

  /** A disabled endpoint's pending deliveries fail (a re-enable does not resend them). */
  async failPending(tx: Db, endpointId: string, error: string, except = ''): Promise<void> {
    await tx.execute(
      sql`update webhook_deliveries set status = 'failed', last_error = ${error}
          where endpoint_id = ${endpointId} and status = 'pending' and id <> ${except}`,
    );
  }

  /** An endpoint's most recent deliveries, newest first. */
  async recent(endpointId: string, limit: number): Promise<DeliveryRow[]> {
    return queryRows<DeliveryRow>(
      this.db,
      sql`select ${DELIVERY_COLUMNS} from webhook_deliveries d
          join webhook_events e on e.id = d.event_id and e.created_at = d.event_created_at
          where d.endpoint_id = ${endpointId}
          order by d.created_at desc, e.created_at desc limit ${limit}`,
    );
  }

  /**
   * Where a delivery is: its event_created_at, the partition key. A time-ordered id (every id
   * since drizzle/0016: src/events/outbox-partitions.ts) bounds it to the millisecond of its
   * first 12 hex characters, so one partition's index on id is read; an id from before (or not
   * found there) reads each partition's index on id once.
   */
  private async locate(id: string): Promise<string | undefined> {
    const lookup = async (bound: SQL) => {
      const [row] = await queryRows<{ at: string }>(
        this.db,
        sql`select ${isoColumn('d.event_created_at', 'at')} from webhook_deliveries d
            where d.id = ${id} and ${bound}`,
      );
      return row?.at;
    };
    const ms = idTime(id);
    const found =
      ms === undefined
        ? undefined
        : await lookup(
            sql`d.event_created_at >= ${new Date(ms).toISOString()}::timestamptz
              and d.event_created_at < ${new Date(ms + 1).toISOString()}::timestamptz`,
          );
    return found ?? (await lookup(sql`true`));
  }

  /** The delivery and its event, each read in its one partition, by its index on id. */
  async find(id: string): Promise<DeliveryRow | undefined> {
    const at = await this.locate(id);
    if (at === undefined) return undefined;
    const [row] = await queryRows<DeliveryRow>(
      this.db,
      sql`select ${DELIVERY_COLUMNS} from webhook_deliveries d
          join webhook_events e on e.id = ${unindexed('d.event_id')} and e.created_at = ${at}::timestamptz
          where d.id = ${id} and d.event_created_at = ${at}::timestamptz`,
    );
    return row;
  }

  /** Schedules a finished delivery again, now, with the same id and a fresh retry schedule. */
  async redeliver(id: string): Promise<DeliveryRow | undefined> {
    const at = await this.locate(id);
    if (at === undefined) return undefined;
    await this.db.execute(
      sql`update webhook_deliveries set status = 'pending', attempts = 0, next_attempt_at = now()
          where id = ${id} and event_created_at = ${at}::timestamptz and status <> 'pending'`,
    );
    return this.find(id);
  }
}

/** A claim's delivery, in its one partition, while its attempt counter is the claim's. */
const claimed = (claim: ClaimedDelivery) =>
  sql`id = ${claim.id} and event_created_at = ${claim.event_created_at}::timestamptz
    and attempts = ${claim.attempts}`;

const DELIVERY_COLUMNS = sql.join(
  [
    sql.raw(
      'd.id, d.event_id, d.endpoint_id, e.type, e.environment, d.status, d.attempts, d.last_response_code, d.last_error',
    ),
    isoColumn('d.last_attempt_at', 'last_attempt_at'),
    sql.raw(
      `case when d.status = 'pending' then to_char(d.next_attempt_at at time zone 'UTC', ${ISO_MICROSECONDS}) end as next_attempt_at`,
    ),
    isoColumn('d.created_at', 'created_at'),
  ],
  sql.raw(', '),
);
