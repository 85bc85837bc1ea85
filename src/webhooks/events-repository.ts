/**
 * The event outbox: webhook_events rows and, in the same statement, one pending delivery per
 * active endpoint. Raw SQL for microsecond timestamps formatted by PostgreSQL (created_at is
 * the /events cursor, unique within an environment, like listings' published_at).
 */
import { randomBytes } from 'node:crypto';
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { queryRows } from '../db/rows.ts';
import type { Environment, EventType } from '../generated/schemas.ts';

export interface EventRow {
  id: string;
  app_id: string;
  environment: Environment;
  type: EventType;
  /** The event's `data` as JSON text. */
  data: string;
  created_at: string;
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
  /** Deliver to this endpoint only (ping); default: every active endpoint of the app and environment. */
  endpointId?: string;
}

const CREATED_AT_KEY = 'webhook_events_environment_created_at_key';
const ISO_FORMAT = `'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'`;
const iso = (column: string, as: string) => sql.raw(`to_char(${column} at time zone 'UTC', ${ISO_FORMAT}) as ${as}`);

/** 32 hex characters (128 random bits): event and delivery ids. */
export const newId = () => randomBytes(16).toString('hex');

/** How long events are kept and listed (GET /api/v1/events). */
export const EVENT_RETENTION = sql.raw(`interval '30 days'`);

export class EventsRepository {
  constructor(private readonly db: Db) {}

  transaction<T>(work: (tx: Db) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /**
   * Records an event and its deliveries in the caller's transaction. created_at is the clock,
   * or one microsecond after the environment's newest event; a concurrent writer that took
   * the same instant makes the statement fail on the unique index, and it is retried in a
   * savepoint so the surrounding listing change never fails for it.
   */
  async record(event: NewEvent, tx: Db): Promise<RecordedEvent> {
    const id = newId();
    const data = JSON.stringify(event.data);
    const endpoints = event.endpointId === undefined ? sql`` : sql`and ep.id = ${event.endpointId}`;
    const statement = sql`
      with ev as (
        insert into webhook_events (id, app_id, environment, type, data, created_at)
        select ${id}, ${event.appId}, ${event.environment}, ${event.type}, ${data},
          greatest(clock_timestamp(),
            (select max(created_at) from webhook_events where environment = ${event.environment}) + interval '1 microsecond')
        returning id, created_at
      ), dl as (
        insert into webhook_deliveries (id, event_id, endpoint_id)
        select replace(gen_random_uuid()::text, '-', ''), ev.id, ep.id
        from ev cross join webhook_endpoints ep
        where ep.app_id = ${event.appId} and ep.environment = ${event.environment} and ep.active ${endpoints}
        returning id, endpoint_id
      )
      select ev.id, ${iso('ev.created_at', 'created_at')},
        coalesce((select json_agg(json_build_object('id', dl.id, 'endpoint_id', dl.endpoint_id)) from dl), '[]')::text as deliveries
      from ev`;
    for (let attempt = 1; ; attempt += 1) {
      try {
        const [row] = await tx.transaction((sp) => queryRows<{ id: string; created_at: string; deliveries: string }>(sp, statement));
        return { id: row!.id, created_at: row!.created_at, deliveries: JSON.parse(row!.deliveries) };
      } catch (err) {
        if (attempt >= 5 || !isUniqueViolation(err, CREATED_AT_KEY)) throw err;
      }
    }
  }

  /** One keyset page of an app's events in one environment, newest first, within the retention window. */
  async page(
    scope: { appId: string; environment: Environment; type?: EventType | undefined },
    limit: number,
    cursor: string | undefined,
    tx: Db = this.db,
  ): Promise<EventRow[]> {
    const where: SQL[] = [
      sql`app_id = ${scope.appId}`,
      sql`environment = ${scope.environment}`,
      sql`created_at > now() - ${EVENT_RETENTION}`,
    ];
    if (scope.type !== undefined) where.push(sql`type = ${scope.type}`);
    if (cursor !== undefined) where.push(sql`created_at < ${cursor}::timestamptz`);
    return queryRows<EventRow>(
      tx,
      sql`select id, app_id, environment, type, data, ${iso('created_at', 'created_at')}
          from webhook_events where ${sql.join(where, sql` and `)}
          order by created_at desc limit ${limit + 1}`,
    );
  }

  /** Deletes events (and their deliveries) past the retention window, a bounded batch at a time. */
  async prune(batch = 1000, tx: Db = this.db): Promise<number> {
    const rows = await queryRows<{ id: string }>(
      tx,
      sql`delete from webhook_events where id in (
            select id from webhook_events where created_at < now() - ${EVENT_RETENTION} limit ${batch})
          returning id`,
    );
    return rows.length;
  }
}
