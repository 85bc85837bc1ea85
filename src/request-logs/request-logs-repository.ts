/**
 * Request logs (docs/portal.md, request logs): rows written in batches, one statement each, by
 * the buffer; read per app and environment, newest first, keyset-paged on (created_at, id).
 *
 * With REQUEST_LOG_DATABASE_URL the rows and the drop counts are on a database of their own
 * (`log`), while the usage rollup and the keys and users a row names stay on the primary (`db`):
 * a batch is then two statements, one on each, and a page is read from the log, then labelled
 * from the primary with one statement per table.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import type { PartitionedTable } from '../db/partitions.ts';
import { isoColumn, queryRows } from '../db/rows.ts';
import { unindexed } from '../db/unique-lookups.ts';
import { uuidV7Time } from '../lib/uuid-v7.ts';
import type { Environment } from '../generated/schemas.ts';
import type { Outcome } from './usage.ts';

/** One request as recorded: its JSON bodies' first 8 KB redacted, no header, no credential. */
export interface RequestLogEntry {
  /** A UUIDv7 of created_at (src/lib/uuid-v7.ts): the partition a lookup by id reads. */
  id: string;
  app_id: string;
  environment: Environment;
  /** ISO 8601, when the request arrived. */
  created_at: string;
  method: string;
  path: string;
  status: number;
  error_code: string | null;
  error_message: string | null;
  /** The error's `details` as JSON text. */
  error_details: string | null;
  latency_ms: number;
  request_id: string;
  key_id: string | null;
  user_id: string | null;
  /** { limit, remaining, reset } as JSON text, when the response carried them. */
  rate_limit: string | null;
  /**
   * The bodies as logged-body.ts keeps them, and their whole sizes: null (or absent) when there
   * was none, or it was not JSON.
   */
  request_body?: string | null;
  request_body_size?: number | null;
  response_body?: string | null;
  response_body_size?: number | null;
}

type BodyColumn = 'request_body' | 'request_body_size' | 'response_body' | 'response_body_size';

/**
 * A row of a page as the portal and the CLI list it: the key's prefix and name, or the token's
 * user; no bodies (one request's page shows them: RequestLogDetail).
 */
export interface RequestLogRow extends Omit<RequestLogEntry, BodyColumn> {
  key_prefix: string | null;
  key_name: string | null;
  username: string | null;
}

type LabelColumns = Omit<RequestLogRow, keyof RequestLogEntry>;

/** One logged request with its bodies. */
export type RequestLogDetail = RequestLogRow & {
  [Column in BodyColumn]-?: NonNullable<RequestLogEntry[Column]> | null;
};

export interface RequestLogFilter {
  appId: string;
  environment: Environment;
  /** Statuses from `from` up to (not including) `to`, but `except`. */
  status?: { from: number; to: number; except?: number | undefined } | undefined;
  /** Requests that arrived at or after `since` and before `until` (ISO 8601). */
  since?: string | undefined;
  until?: string | undefined;
  method?: string | undefined;
  pathPrefix?: string | undefined;
  keyId?: string | undefined;
  /** Only requests made with OAuth tokens. */
  oauthOnly?: boolean | undefined;
}

/** How long a request's log is kept. */
const RETENTION_DAYS = 14;
const RETENTION = sql.raw(`interval '${RETENTION_DAYS} days'`);

/**
 * The log's partitions (src/db/partitions.ts): a UTC day each (about 30 million rows, 10 GB, at
 * 1,000 logged requests a second: docs/scaling.md), three days made ahead, a day dropped once its
 * last request is 14 days old. Each has its own index on id (the parent cannot hold one unique).
 */
export const REQUEST_LOG_PARTITIONS: PartitionedTable = {
  table: 'request_logs',
  span: 'day',
  ahead: 3,
  retentionMs: RETENTION_DAYS * 86_400_000,
  ownIndexes: (partition) => [
    `create index if not exists "${partition}_id_idx" on "${partition}" (id)`,
  ],
};

const LOG_COLUMNS =
  sql.raw(`l.id, l.app_id, l.environment, to_char(l.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at,
  l.method, l.path, l.status, l.error_code, l.error_message, l.error_details, l.latency_ms, l.request_id,
  l.key_id, l.user_id, l.rate_limit`);
/** Read for one request only: a page of 100 would carry up to 1.6 MB of them. */
const BODY_COLUMNS = sql.raw(
  `l.request_body, l.request_body_size, l.response_body, l.response_body_size`,
);
/** The log's columns and the labels of its credential, joined on one database. */
const COLUMNS = sql`${LOG_COLUMNS}, k.prefix as key_prefix, k.name as key_name, u.username`;
const LABELS = sql.raw(`left join api_keys k on k.id = l.key_id
          left join users u on u.id = l.user_id`);

/** The rows' set of `column`'s values, as a PostgreSQL array's text ({a,b}): ids, never quoted. */
function idArray(
  rows: readonly Omit<RequestLogEntry, BodyColumn>[],
  column: 'key_id' | 'user_id',
): string | null {
  const ids = new Set<string>();
  for (const row of rows) if (row[column] !== null) ids.add(row[column]);
  return ids.size === 0 ? null : `{${[...ids].join(',')}}`;
}

/** A batch's rows into the log, after BEST_EFFORT. */
const insertRows = (entries: string) =>
  sql`insert into request_logs (id, app_id, environment, created_at, method, path, status,
              error_code, error_message, error_details, latency_ms, request_id, key_id, user_id,
              rate_limit, request_body, request_body_size, response_body, response_body_size)
            select id, app_id, environment, created_at, method, path, status, error_code,
              error_message, error_details, latency_ms, request_id, key_id, user_id, rate_limit,
              request_body, request_body_size, response_body, response_body_size
            from best_effort, jsonb_to_recordset(${entries}::jsonb) as r(id uuid, app_id uuid, environment text,
              created_at timestamptz, method text, path text, status int, error_code text,
              error_message text, error_details text, latency_ms int, request_id text, key_id uuid,
              user_id uuid, rate_limit text, request_body text, request_body_size int,
              response_body text, response_body_size int)`;

/** A batch's sums added to the rollup; `from`: what its records are joined to, if anything. */
const addUsage = (usage: string, from: SQL) =>
  sql`insert into request_usage as u (app_id, environment, hour, outcome, requests, long_polls,
            latency_buckets)
          select app_id, environment, hour, outcome, requests, long_polls, latency_buckets
          from ${from}jsonb_to_recordset(${usage}::jsonb) as r(app_id uuid, environment text,
            hour timestamptz, outcome text, requests int, long_polls int, latency_buckets int[])
          on conflict (app_id, environment, hour, outcome) do update
          set requests = u.requests + excluded.requests,
            long_polls = u.long_polls + excluded.long_polls,
            latency_buckets = array(
              select a + b from unnest(u.latency_buckets, excluded.latency_buckets)
                with ordinality as t(a, b, i) order by i)`;

/**
 * Committed without waiting for its WAL flush: set_config(..., true) in a statement run alone
 * holds until that statement's own transaction commits. Referenced by what follows, so it runs.
 */
const BEST_EFFORT = sql.raw(
  `with best_effort as materialized (select set_config('synchronous_commit', 'off', true))`,
);

/**
 * The rollup was not added to, though the log's rows were written (REQUEST_LOG_DATABASE_URL: the
 * two are on different databases): the buffer reports it without counting the rows as dropped.
 */
export class RollupNotWrittenError extends Error {
  constructor(cause: unknown) {
    super('the usage rollup was not written', { cause });
  }
}

const likePrefix = (prefix: string) => `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export class RequestLogsRepository {
  /** Whether the log is on a database of its own. */
  private readonly apart: boolean;

  constructor(
    /** The primary: the rollup, and the keys and users the log's rows name. */
    private readonly db: Db,
    /** Where the log's rows and drop counts are (REQUEST_LOG_DATABASE_URL); `db` if absent. */
    private readonly log: Db = db,
  ) {
    this.apart = log !== db;
  }

  /**
   * A write of the log, committed without waiting for its WAL flush (synchronous_commit off: the
   * log is best effort, and a crash of PostgreSQL may lose its last half second). SET LOCAL in a
   * transaction of its own rather than a setting of the connection: behind a transaction-mode
   * pooler (docs/operations.md) a session setting would be refused at connect, or land on
   * whichever server connection ran it. The extra round trips are on the log's own connection.
   */
  private bestEffort(write: (tx: Db) => Promise<unknown>): Promise<void> {
    return this.log.transaction(async (tx) => {
      await tx.execute(sql`set local synchronous_commit = off`);
      await write(tx);
    });
  }

  /**
   * One statement for the whole batch: `entries` is a JSON array of RequestLogEntry, `usage` a
   * JSON array of UsageRow (usage.ts: the batch summed per app, environment, hour and outcome),
   * added to the rollup in the same statement. Best effort as bestEffort's writes, without its
   * transaction: run alone, the statement is its own transaction, and set_config(..., true) in it
   * holds until that transaction's commit. One round trip where BEGIN, SET LOCAL, the statement
   * and COMMIT were four; behind a transaction-mode pooler it is one transaction as before. With
   * the log on a database of its own, two statements, one on each database, sent together.
   */
  async insertMany(entries: string, usage = '[]'): Promise<void> {
    if (entries === '[]') return;
    if (!this.apart) {
      await this.db.execute(
        sql`${BEST_EFFORT}, logged as (${insertRows(entries)}) ${addUsage(usage, sql``)}`,
      );
      return;
    }
    // Apart: a statement on each database, at once. The rollup counts requests, not rows
    // logged: it is added to while the log's database is down, and the chart stays whole.
    const [logged, counted] = await Promise.allSettled([
      this.log.execute(sql`${BEST_EFFORT} ${insertRows(entries)}`),
      this.db.execute(sql`${BEST_EFFORT} ${addUsage(usage, sql`best_effort, `)}`),
    ]);
    if (logged.status === 'rejected') throw logged.reason;
    if (counted.status === 'rejected') throw new RollupNotWrittenError(counted.reason);
  }

  /** The rollup's rows of an app and environment from `from` (an ISO time) on. */
  async usage(
    appId: string,
    environment: Environment,
    from: string,
  ): Promise<
    {
      hour: string;
      outcome: Outcome;
      requests: number;
      long_polls: number;
      latency_buckets: number[];
    }[]
  > {
    return queryRows(
      this.db,
      sql`select ${isoColumn('hour', 'hour')}, outcome, requests, long_polls, latency_buckets
          from request_usage
          where app_id = ${appId} and environment = ${environment} and hour >= ${from}::timestamptz`,
    );
  }

  /** Adds requests that could not be logged (the buffer was full) to the counts shown. */
  async addDrops(drops: readonly { app_id: string; environment: string; dropped: number }[]) {
    if (drops.length === 0) return;
    await this.bestEffort((tx) =>
      tx.execute(
        sql`insert into request_log_drops (app_id, environment, dropped)
            select app_id, environment, dropped
            from jsonb_to_recordset(${JSON.stringify(drops)}::jsonb) as r(app_id uuid, environment text, dropped int)
            on conflict (app_id, environment) do update
            set dropped = request_log_drops.dropped + excluded.dropped, last_dropped_at = now()`,
      ),
    );
  }

  async drops(
    appId: string,
    environment: Environment,
  ): Promise<{ dropped: number; last_dropped_at: string } | undefined> {
    const [row] = await queryRows<{ dropped: number; last_dropped_at: string }>(
      this.log,
      sql`select dropped, ${isoColumn('last_dropped_at', 'last_dropped_at')} from request_log_drops
          where app_id = ${appId} and environment = ${environment}`,
    );
    return row;
  }

  /** Newest first; `cursor` is the last row's (created_at, id). Returns up to limit + 1 rows. */
  async page(
    filter: RequestLogFilter,
    limit: number,
    cursor?: { createdAt: string; id: string },
  ): Promise<RequestLogRow[]> {
    const where: SQL[] = [
      sql`l.app_id = ${filter.appId}`,
      sql`l.environment = ${filter.environment}`,
      sql`l.created_at > now() - ${RETENTION}`,
    ];
    if (filter.status) {
      where.push(sql`l.status >= ${filter.status.from} and l.status < ${filter.status.to}`);
      if (filter.status.except !== undefined) where.push(sql`l.status <> ${filter.status.except}`);
    }
    if (filter.since !== undefined) where.push(sql`l.created_at >= ${filter.since}::timestamptz`);
    if (filter.until !== undefined) where.push(sql`l.created_at < ${filter.until}::timestamptz`);
    if (filter.method !== undefined) where.push(sql`l.method = ${filter.method}`);
    if (filter.pathPrefix !== undefined)
      where.push(sql`l.path like ${likePrefix(filter.pathPrefix)}`);
    if (filter.keyId !== undefined) where.push(sql`l.key_id = ${filter.keyId}`);
    if (filter.oauthOnly) where.push(sql`l.key_id is null`);
    // The plain bound on created_at lets PostgreSQL leave out the newer days' partitions; the
    // row comparison alone would not.
    if (cursor)
      where.push(
        sql`l.created_at <= ${cursor.createdAt}::timestamptz
          and (l.created_at, l.id) < (${cursor.createdAt}::timestamptz, ${cursor.id}::uuid)`,
      );
    // The page is taken from the log alone, in the order of its partitions' feed index
    // (created_at desc nulls last; the rows of the last instant all in: WITH TIES), then ordered
    // by id within an instant. Nothing to sort before the limit, so whatever the estimates (an
    // unanalyzed day's are tiny) PostgreSQL merges the partitions' index scans: the page's rows,
    // and one index entry of each older day (test/db/partitions.test.ts).
    const page = sql`from (
            select * from request_logs l where ${sql.join(where, sql` and `)}
            order by l.created_at desc nulls last fetch first ${limit + 1} rows with ties) l`;
    const order = sql`order by l.created_at desc, l.id desc limit ${limit + 1}`;
    if (!this.apart)
      return queryRows<RequestLogRow>(this.db, sql`select ${COLUMNS} ${page} ${LABELS} ${order}`);
    return this.labelled(
      await queryRows<Omit<RequestLogEntry, BodyColumn>>(
        this.log,
        sql`select ${LOG_COLUMNS} ${page} ${order}`,
      ),
    );
  }

  /**
   * The log's rows (from its own database) with their credentials' labels from the primary: one
   * statement for the keys and one for the users, of the ids the rows name (a page's at most).
   * An id the primary no longer has (a deleted key or user) is labelled null, as the join does.
   */
  private async labelled<Row extends Omit<RequestLogEntry, BodyColumn>>(
    rows: Row[],
  ): Promise<(Row & LabelColumns)[]> {
    const keyIds = idArray(rows, 'key_id');
    const userIds = idArray(rows, 'user_id');
    const [keys, users] = await Promise.all([
      keyIds === null
        ? []
        : queryRows<{ id: string; prefix: string; name: string | null }>(
            this.db,
            sql`select id, prefix, name from api_keys where id = any(${keyIds}::uuid[])`,
          ),
      userIds === null
        ? []
        : queryRows<{ id: string; username: string }>(
            this.db,
            sql`select id, username from users where id = any(${userIds}::uuid[])`,
          ),
    ]);
    const keyById = new Map(keys.map((k) => [k.id, k]));
    const userById = new Map(users.map((u) => [u.id, u]));
    return rows.map((row) => {
      const key = row.key_id === null ? undefined : keyById.get(row.key_id);
      return {
        ...row,
        key_prefix: key?.prefix ?? null,
        key_name: key?.name ?? null,
        username: (row.user_id === null ? undefined : userById.get(row.user_id))?.username ?? null,
      };
    });
  }

  /**
   * One entry of the app, by its partition's index on id, app and age checked `unindexed`
   * (src/db/unique-lookups.ts), so neither the app's feed index nor another partition's is
   * chosen: a UUIDv7 id (every id since partitioning) bounds created_at to its millisecond, so
   * the statement reads one partition; an id from before reads each partition's index once.
   */
  async find(appId: string, id: string): Promise<RequestLogDetail | undefined> {
    const ms = uuidV7Time(id);
    const made =
      ms === undefined
        ? sql`true`
        : sql`l.created_at >= ${new Date(ms).toISOString()}::timestamptz
            and l.created_at < ${new Date(ms + 1).toISOString()}::timestamptz`;
    const where = sql`where l.id = ${id} and ${made} and ${unindexed('l.app_id')} = ${appId}
            and ${unindexed('l.created_at')} > now() - ${RETENTION}`;
    if (!this.apart) {
      const [row] = await queryRows<RequestLogDetail>(
        this.db,
        sql`select ${COLUMNS}, ${BODY_COLUMNS} from request_logs l ${LABELS} ${where}`,
      );
      return row;
    }
    const rows = await queryRows<Omit<RequestLogDetail, keyof LabelColumns>>(
      this.log,
      sql`select ${LOG_COLUMNS}, ${BODY_COLUMNS} from request_logs l ${where}`,
    );
    return rows.length === 0 ? undefined : (await this.labelled(rows))[0];
  }

  /**
   * Deletes the rollup's hours that ended before the log's 14 days (the hour the boundary falls
   * in stays while any of its requests may); returns how many rows went.
   */
  async pruneUsage(): Promise<number> {
    const rows = await queryRows<{ hour: string }>(
      this.db,
      sql`delete from request_usage where hour < now() - ${RETENTION} - interval '1 hour'
          returning hour`,
    );
    return rows.length;
  }
}
