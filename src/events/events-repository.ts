/**
 * The event outbox: webhook_events rows and, in the same statement, one pending delivery per
 * active endpoint subscribed to the event's type (enabled_events). Raw SQL for microsecond
 * timestamps formatted by PostgreSQL (created_at is the /events cursor, unique within an
 * environment, like listings' published_at).
 */
import { randomUUID } from 'node:crypto';
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { orderingKeys } from '../db/ordering-key.ts';
import { isoColumn, ISO_MICROSECONDS, queryRows } from '../db/rows.ts';
import { unindexed } from '../db/unique-lookups.ts';
import type { Environment, EventType } from '../generated/schemas.ts';
import type { ChangedListings, RecordingCtes } from '../listings/listing-changes.ts';
import { currentTraceId } from '../lib/trace.ts';
import { grantInUse } from '../oauth/oauth-repository.ts';
import { EVENT_RETENTION, idTime, timeOrderedId } from './outbox-partitions.ts';

export interface EventRow {
  id: string;
  app_id: string;
  environment: Environment;
  type: EventType;
  /** The event's `data` as JSON text. */
  data: string;
  created_at: string;
}

/** A delivery of an event to one endpoint, as the portal's Events pages show it. */
export interface EventDeliveryRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  url: string;
  endpoint_active: boolean;
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  last_response_code: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
  /** Pending deliveries only: when the next attempt is due. */
  next_attempt_at: string | null;
}

/** One attempt of a delivery. */
export interface AttemptRow {
  delivery_id: string;
  attempt: number;
  attempted_at: string;
  response_code: number | null;
  error: string | null;
  duration_ms: number;
}

export interface RecordedEvent {
  id: string;
  created_at: string;
  /** One per endpoint the event goes to. */
  deliveries: { id: string; endpoint_id: string }[];
}

export interface NewEvent {
  appId: string;
  environment: Environment;
  type: EventType;
  data: unknown;
  /**
   * Deliver to this endpoint only (ping), whatever its enabled_events; default: every active
   * endpoint of the app and environment whose enabled_events hold the type or `*`.
   */
  endpointId?: string;
  /**
   * A listing event's listing and its seller (GET /api/v1/events filters an OAuth token's view by
   * seller).
   */
  listingId?: string;
  sellerId?: string;
}

/**
 * A random UUID without its dashes: a given event's key within recordMany's statement, which
 * makes its id from it and its created_at (timeOrderedId keeps its variant).
 */
const newKey = () => randomUUID().replace(/-/g, '');

/**
 * Whether the seller of a listing event still lets its app hear about their listings
 * (docs/webhooks.md, "When a user removes an app"): the seller is the app's own developer (a
 * listing made with the app's API key) and the app is not deleted, or has an OAuth grant for the
 * app in use (oauth-repository.ts grantInUse: unrevoked, with a token that still works; deleting
 * an app revokes its grants, and a grant whose tokens all expired is over). Events
 * without a seller (pings) always pass. Checked where events are recorded, in the recording
 * statement, and again when a delivery is claimed, so a grant revoked between the two (or an
 * event recorded before it) sends nothing. The app is read by apps_pkey alone, its owner checked
 * `unindexed` (src/db/unique-lookups.ts), so apps_owner_idx is never chosen instead.
 */
export function sellerGrantsApp(appId: SQL, sellerId: SQL): SQL {
  return sql`(${sellerId} is null
    or exists (select 1 from apps a
      where a.id = ${appId} and ${unindexed('a.owner_id')} = ${sellerId} and a.deleted_at is null)
    or exists (select 1 from oauth_grants g
      where g.user_id = ${sellerId} and g.app_id = ${appId} and ${grantInUse(sql.raw('g'))}))`;
}

/**
 * The outbox as part of the statement that makes the changes (a listing insert or update,
 * src/listings/listing-changes.ts): CTEs that record one event of `changed.type` per changed
 * listing, in `ord` order (rows without an app have nobody to notify, nor rows whose seller no
 * longer grants the app access) and one pending delivery per active endpoint subscribed to the
 * type, exactly as recordMany does. created_at are ordering keys that cannot clash
 * (src/db/ordering-key.ts); were one ever taken, the unique index
 * (webhook_events_environment_created_at_key) would fail the whole statement, nothing written,
 * and the caller would run it again. The delivery worker has work when a delivery was queued:
 * a change of an app with no endpoint subscribed to it leaves an event to read and none to send.
 */
export function recordEventsInStatement(changed: ChangedListings): RecordingCtes {
  const { table, columns: c, environment, type } = changed;
  const ctes = sql`event_sources as (
      select ${c.data} as data, ${c.listing_id} as listing_id, ${c.seller_id} as seller_id,
        ${c.app_id} as app_id, (row_number() over (order by ${c.ord}) - 1)::int as k
      from ${table}
      where ${c.app_id} is not null and ${sellerGrantsApp(c.app_id, c.seller_id)}
    ), ${orderingKeys('event_keys', 'webhook_events_created_seq', sql`(select count(*)::int from event_sources)`)},
    event_rows as (
      insert into webhook_events (id, app_id, environment, type, data, listing_id, seller_id, trace_id, created_at)
      select ${timeOrderedId(sql`event_keys.at`)}, s.app_id, ${environment}, ${type}, s.data::text,
        s.listing_id, s.seller_id, ${currentTraceId()}::text, event_keys.at
      from event_sources s join event_keys on event_keys.k = s.k
      order by s.k
      returning id, app_id, created_at
    ), event_deliveries as (
      insert into webhook_deliveries (id, event_id, endpoint_id, event_created_at)
      select ${timeOrderedId(sql`e.created_at`)}, e.id, ep.id, e.created_at
      from event_rows e
      join webhook_endpoints ep on ep.app_id = e.app_id and ep.environment = ${environment} and ep.active
        and ep.enabled_events && array['*', ${type}]::text[]
      returning id
    )`;
  return {
    ctes,
    queues: { lane: 'deliveries', queued: sql`exists (select 1 from event_deliveries)` },
  };
}

/** Whose events a page lists: an app's in one environment, maybe one seller's, one type. */
interface EventScope {
  appId: string;
  environment: Environment;
  /** An OAuth token's view: only the events about that seller's listings. */
  sellerId?: string | undefined;
  type?: EventType | undefined;
}

/** The scope as conditions, within the retention window. */
function scopeConditions(scope: EventScope): SQL[] {
  const where = [
    sql`app_id = ${scope.appId}`,
    sql`environment = ${scope.environment}`,
    sql`created_at > now() - ${EVENT_RETENTION}`,
  ];
  if (scope.sellerId !== undefined) where.push(sql`seller_id = ${scope.sellerId}`);
  if (scope.type !== undefined) where.push(sql`type = ${scope.type}`);
  return where;
}

export class EventsRepository {
  constructor(private readonly db: Db) {}

  transaction<T>(work: (tx: Db) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /** Records one event and its deliveries in the caller's transaction (see recordMany). */
  async record(event: NewEvent, tx: Db): Promise<RecordedEvent> {
    const [recorded] = await this.recordMany([event], tx);
    return recorded!;
  }

  /**
   * Records events of one environment and their deliveries in the caller's transaction, in one
   * statement whatever their number (a 25-item batch announces 25 changes), in the given order.
   * created_at are ordering keys that cannot clash (src/db/ordering-key.ts), rising in the
   * given order. Should one ever be taken all the same, ON CONFLICT DO NOTHING skips that event
   * and it is recorded again with a new key: the surrounding listing change never fails on it.
   * An event whose seller no longer grants its app access (sellerGrantsApp) is not recorded and
   * is left out of the result.
   */
  async recordMany(events: NewEvent[], tx: Db): Promise<RecordedEvent[]> {
    if (events.length === 0) return [];
    const environment = events[0]!.environment;
    if (events.some((e) => e.environment !== environment))
      throw new Error('recordMany: events of one environment at a time');
    const items = events.map((event) => ({
      id: newKey(),
      app_id: event.appId,
      type: event.type,
      data: JSON.stringify(event.data),
      endpoint_id: event.endpointId ?? null,
      listing_id: event.listingId ?? null,
      seller_id: event.sellerId ?? null,
    }));
    const recorded = new Map<string, RecordedEvent>();
    const withheld = new Set<string>();
    let pending = items;
    for (let attempt = 1; pending.length > 0; attempt += 1) {
      if (attempt > 5)
        throw new Error(
          `could not record ${pending.length} event(s): created_at kept colliding with concurrent writers`,
        );
      const records = JSON.stringify(pending.map((item, ord) => ({ ord, ...item })));
      const rows = await queryRows<{
        key: string;
        id: string | null;
        created_at: string | null;
        deliveries: string | null;
      }>(
        tx,
        sql`with given as (
              select * from jsonb_to_recordset(${records}::jsonb)
                as x(ord int, id text, app_id uuid, type text, data text, endpoint_id uuid, listing_id uuid, seller_id uuid)
            ), x as (
              select given.*, (row_number() over (order by given.ord) - 1)::int as k from given
              where ${sellerGrantsApp(sql`given.app_id`, sql`given.seller_id`)}
            ), ${orderingKeys('keys', 'webhook_events_created_seq', sql`(select count(*)::int from x)`)}, xk as (
              select x.*, keys.at, ${timeOrderedId(sql`keys.at`, sql`x.id`)} as event_id
              from x join keys on keys.k = x.k
            ), ev as (
              insert into webhook_events (id, app_id, environment, type, data, listing_id, seller_id, trace_id, created_at)
              select xk.event_id, xk.app_id, ${environment}, xk.type, xk.data, xk.listing_id, xk.seller_id, ${currentTraceId()}::text,
                xk.at
              from xk
              order by xk.k
              on conflict (environment, created_at) do nothing
              returning id, app_id, created_at
            ), dl as (
              insert into webhook_deliveries (id, event_id, endpoint_id, event_created_at)
              select ${timeOrderedId(sql`ev.created_at`)}, ev.id, ep.id, ev.created_at
              from ev join xk on xk.event_id = ev.id
              join webhook_endpoints ep on ep.app_id = ev.app_id and ep.environment = ${environment} and ep.active
                -- A ping goes to its endpoint; any other event to the endpoints subscribed to its type.
                and (ep.id = xk.endpoint_id or (xk.endpoint_id is null and ep.enabled_events && array['*', xk.type]))
              returning id, event_id, endpoint_id
            )
            select xk.id as key, ev.id, ${isoColumn('ev.created_at', 'created_at')},
              coalesce((select json_agg(json_build_object('id', dl.id, 'endpoint_id', dl.endpoint_id)) from dl where dl.event_id = ev.id),
                '[]')::text as deliveries
            from ev join xk on xk.event_id = ev.id
            union all
            select given.id, null, null, null from given where given.id not in (select id from x)`,
      );
      for (const row of rows)
        if (row.deliveries === null) withheld.add(row.key);
        else
          recorded.set(row.key, {
            id: row.id!,
            created_at: row.created_at!,
            deliveries: JSON.parse(row.deliveries),
          });
      pending = pending.filter((item) => !recorded.has(item.id) && !withheld.has(item.id));
    }
    return items.flatMap((item) => recorded.get(item.id) ?? []);
  }

  /**
   * One keyset page of an app's events in one environment, newest first, within the retention
   * window; with `sellerId`, only the events about that seller's listings (an OAuth token's view).
   */
  async page(
    scope: EventScope,
    limit: number,
    cursor: string | undefined,
    tx: Db = this.db,
  ): Promise<EventRow[]> {
    const where = scopeConditions(scope);
    if (cursor !== undefined) where.push(sql`created_at < ${cursor}::timestamptz`);
    return queryRows<EventRow>(
      tx,
      sql`select id, app_id, environment, type, data, ${isoColumn('created_at', 'created_at')}
          from webhook_events where ${sql.join(where, sql` and `)}
          order by webhook_events.created_at desc limit ${limit + 1}`,
    );
  }

  /**
   * The instant before which forward pages (pageAfter) may list events: no event with an earlier
   * created_at can still commit. A key is the clock's millisecond when its statement took it
   * (src/db/ordering-key.ts) or later, and a statement that records events holds its lock on
   * webhook_events (ROW EXCLUSIVE, taken when the statement is parsed or its plan checked, before
   * it runs, so before its keys) until its transaction ends. So the horizon is the current
   * millisecond, held back to the start of the oldest transaction that holds such a lock now:
   * a transaction that writes no events (an idle psql session, a pg_dump, a long report, a
   * slow write of another table) holds nothing back, and one that has not locked the table yet
   * will take its keys after this millisecond. The clock is read first (least's first argument),
   * the locks after it. Its own statement, read BEFORE the page's: the page's snapshot, taken
   * later, sees every transaction that ended meanwhile. The service's own event-writing
   * transactions are one statement or a matcher pass (bounded, well under a second:
   * matcher-worker.ts), so an event reaches a forward page within about that of its commit
   * (OpenAPI listEvents).
   * (Sessions of another role show no xact_start without pg_read_all_stats: the server, its
   * instances and the admin CLI use one role. PGlite runs one transaction at a time.)
   */
  async horizon(tx: Db = this.db): Promise<string> {
    const [row] = await queryRows<{ horizon: string }>(
      tx,
      sql`select ${sql.raw(`to_char(least(date_trunc('milliseconds', clock_timestamp()), (
            select date_trunc('milliseconds', min(a.xact_start))
            from pg_locks l join pg_stat_activity a on a.pid = l.pid
            where l.locktype = 'relation' and l.relation = 'webhook_events'::regclass
              and l.database = (select oid from pg_database where datname = current_database())
              and l.mode = 'RowExclusiveLock' and l.pid <> pg_backend_pid()
              and a.xact_start is not null
          )) at time zone 'UTC', ${ISO_MICROSECONDS})`)} as horizon`,
    );
    return row!.horizon;
  }

  /**
   * The events after `cursor` (exclusive), oldest first, at most `limit + 1` of them, split at
   * `horizon` (see horizon()): those before it may be listed; `heldBack` says an event after the
   * cursor exists but may not be listed yet (a write that started earlier is still open).
   */
  async pageAfter(
    scope: EventScope,
    limit: number,
    cursor: string,
    horizon: string,
    tx: Db = this.db,
  ): Promise<{ rows: EventRow[]; heldBack: boolean }> {
    const where = [...scopeConditions(scope), sql`created_at > ${cursor}::timestamptz`];
    const rows = await queryRows<EventRow>(
      tx,
      sql`select id, app_id, environment, type, data, ${isoColumn('created_at', 'created_at')}
          from webhook_events where ${sql.join(where, sql` and `)}
          order by webhook_events.created_at limit ${limit + 1}`,
    );
    // Both are ISO_MICROSECONDS text in UTC: they compare as strings.
    const listable = rows.filter((row) => row.created_at < horizon);
    return { rows: listable, heldBack: listable.length < rows.length };
  }

  /**
   * One event, within the retention window, by its partition's index on id, created_at checked
   * `unindexed` (src/db/unique-lookups.ts), so no index on created_at is chosen instead. A
   * time-ordered id (src/events/outbox-partitions.ts) bounds created_at to its millisecond: one
   * partition read. Not found there, or an id from before partitioning: every partition's index on
   * id, once each.
   */
  async findById(eventId: string, tx: Db = this.db): Promise<EventRow | undefined> {
    const ms = idTime(eventId);
    const lookup = async (bound: SQL) => {
      const [row] = await queryRows<EventRow>(
        tx,
        sql`select id, app_id, environment, type, data, ${isoColumn('created_at', 'created_at')}
            from webhook_events
            where id = ${eventId} and ${bound} and ${unindexed('created_at')} > now() - ${EVENT_RETENTION}`,
      );
      return row;
    };
    const found =
      ms === undefined
        ? undefined
        : await lookup(
            sql`created_at >= ${new Date(ms).toISOString()}::timestamptz
              and created_at < ${new Date(ms + 1).toISOString()}::timestamptz`,
          );
    return found ?? (await lookup(sql`true`));
  }

  /**
   * The deliveries of these events, one per endpoint, with the endpoint's URL: the partitions of
   * the events' weeks only (a delivery's event_created_at is its event's created_at).
   */
  async deliveriesOf(
    events: readonly { id: string; created_at: string }[],
    tx: Db = this.db,
  ): Promise<EventDeliveryRow[]> {
    if (events.length === 0) return [];
    const times = events.map((e) => e.created_at).sort();
    return queryRows<EventDeliveryRow>(
      tx,
      sql`select d.id, d.event_id, d.endpoint_id, ep.url, ep.active as endpoint_active, d.status,
            d.attempts, d.last_response_code, d.last_error,
            ${isoColumn('d.last_attempt_at', 'last_attempt_at')},
            ${sql.raw(`case when d.status = 'pending' then to_char(d.next_attempt_at at time zone 'UTC', ${ISO_MICROSECONDS}) end`)} as next_attempt_at
          from webhook_deliveries d join webhook_endpoints ep on ep.id = d.endpoint_id
          where d.event_id in (select jsonb_array_elements_text(${JSON.stringify(events.map((e) => e.id))}::jsonb))
            and d.event_created_at >= ${times[0]}::timestamptz
            and d.event_created_at <= ${times[times.length - 1]}::timestamptz
          order by ep.created_at`,
    );
  }

  /**
   * Every attempt of these deliveries, oldest first: the partitions from the week of `since` (the
   * earliest of their events' created_at: no attempt is made before its event) on. An attempt
   * whose delivery is gone (a week's attempts outlive it) is simply not asked for.
   */
  async attemptsOf(
    deliveryIds: readonly string[],
    since: string,
    tx: Db = this.db,
  ): Promise<AttemptRow[]> {
    if (deliveryIds.length === 0) return [];
    return queryRows<AttemptRow>(
      tx,
      sql`select delivery_id, attempt, ${isoColumn('attempted_at', 'attempted_at')}, response_code,
            error, duration_ms
          from webhook_delivery_attempts
          where delivery_id in (select jsonb_array_elements_text(${JSON.stringify(deliveryIds)}::jsonb))
            and attempted_at >= ${since}::timestamptz
          order by attempted_at`,
    );
  }
}
