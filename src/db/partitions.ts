/**
 * Tables partitioned by range of a timestamp (docs/scaling.md, partitions): partitions made
 * ahead of time and dropped behind it, never a DELETE of rows. One maintenance run lists a
 * table's partitions, makes the spans from now to `ahead` spans on that have none, and drops
 * every partition whose whole range is older than the retention: on PostgreSQL by `DETACH
 * PARTITION ... CONCURRENTLY` (inserts and reads never wait on it) then `DROP TABLE`; on PGlite,
 * one connection with nobody to wait for, by a plain DETACH.
 *
 * A partition is made as a table of its own, then attached (ATTACH takes SHARE UPDATE EXCLUSIVE
 * on the parent, which inserts and reads do not wait for; CREATE TABLE ... PARTITION OF would
 * take ACCESS EXCLUSIVE), each step under a lock_timeout so a long transaction elsewhere makes a
 * run fail and try again later rather than queue the parent's writers behind it.
 *
 * Across instances one runs it at a time: a lease row (maintenance_leases), claimed for
 * LEASE_MS, which holds through a transaction-mode pooler (an advisory lock is a session's, and
 * a pooler's session is anyone's) and lapses by itself when its holder dies.
 */
import { sql } from 'drizzle-orm';
import type { Db } from './database.ts';
import { PLANNED_PER_RUN } from './gated-client.ts';
import { queryRows } from './rows.ts';

const DAY_MS = 86_400_000;

export interface PartitionedTable {
  /** The parent table (public schema). */
  table: string;
  /** A partition's span: a UTC day or a week from a Monday (both start at 00:00 UTC). */
  span: 'day' | 'week';
  /** Spans made ahead, besides the current one. */
  ahead: number;
  /** A partition is dropped once its upper bound is this far in the past. */
  retentionMs: number;
  /**
   * Indexes each new partition gets besides its parent's: the request log's on id, which the
   * parent has not (the rows from before partitioning keep their unique one, which a parent's
   * index could not take over).
   */
  ownIndexes: (partition: string) => string[];
}

/** A database's tables partitioned by time, kept by one keeper (src/plugins/partitions.ts). */
export interface PartitionedDatabase {
  /** Which database: the `database` label of the partition gauges (docs/metrics.md). */
  database: 'primary' | 'request_log';
  db: Db;
  tables: PartitionedTable[];
}

export interface Partition {
  name: string;
  /** Null for MINVALUE (the rows from before the table was partitioned). */
  from: Date | null;
  to: Date;
  /** A DETACH ... CONCURRENTLY that was interrupted: finished by the next run. */
  detachPending: boolean;
}

/** SQL run as sent, never prepared (DDL, and texts that differ each time). */
const ddl = (db: Db, text: string) => db.execute(sql.raw(PLANNED_PER_RUN + text));

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** A bound as pg_get_expr prints it: '2026-11-28 00:00:00+00' (any session time zone offset). */
function parseBound(text: string): Date | null {
  if (text === 'MINVALUE') return null;
  const m = /^'(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)([+-]\d\d)(?::?(\d\d))?'$/.exec(text);
  if (!m) throw new Error(`unexpected partition bound ${text}`);
  return new Date(`${m[1]}T${m[2]}${m[3]}:${m[4] ?? '00'}`);
}

export async function listPartitions(db: Db, table: string): Promise<Partition[]> {
  const rows = await queryRows<{ name: string; bound: string; detach_pending: boolean }>(
    db,
    sql`select c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound,
          i.inhdetachpending as detach_pending
        from pg_inherits i join pg_class c on c.oid = i.inhrelid
        where i.inhparent = to_regclass(${`public.${table}`})`,
  );
  return rows
    .map(({ name, bound, detach_pending }) => {
      const m = /FROM \((MINVALUE|'[^']+')\) TO \(('[^']+')\)/.exec(bound);
      if (!m) throw new Error(`unexpected partition bound of ${name}: ${bound}`);
      return {
        name,
        from: parseBound(m[1]!),
        to: parseBound(m[2]!)!,
        detachPending: detach_pending,
      };
    })
    .sort((a, b) => a.to.getTime() - b.to.getTime());
}

/** The start of the span holding `at`. */
function spanStart(span: PartitionedTable['span'], at: Date): Date {
  const day = Math.floor(at.getTime() / DAY_MS) * DAY_MS;
  if (span === 'day') return new Date(day);
  const weekday = (new Date(day).getUTCDay() + 6) % 7; // Monday 0
  return new Date(day - weekday * DAY_MS);
}

const spanMs = (span: PartitionedTable['span']) => (span === 'day' ? DAY_MS : 7 * DAY_MS);

const partitionName = (table: string, from: Date) =>
  `${table}_p${from.toISOString().slice(0, 10).replace(/-/g, '')}`;

/**
 * Makes the spans from the one holding `now` to `ahead` spans on that no partition covers yet.
 * Bounded by `ahead + 1` partitions, whatever happened before: a server down for days makes the
 * current span and the next, not the days it missed (no row is written into the past).
 */
async function makeAhead(db: Db, spec: PartitionedTable, now: Date): Promise<string[]> {
  const existing = await listPartitions(db, spec.table);
  const made: string[] = [];
  const first = spanStart(spec.span, now).getTime();
  for (let i = 0; i <= spec.ahead; i += 1) {
    const from = new Date(first + i * spanMs(spec.span));
    const to = new Date(from.getTime() + spanMs(spec.span));
    // A partition overlapping the span (the one from before partitioning, reaching past
    // midnight, or one made by a pg_partman with other spans) leaves it be.
    if (existing.some((p) => (p.from === null || p.from < to) && p.to > from)) continue;
    const name = partitionName(spec.table, from);
    const table = quote(spec.table);
    await db.transaction(async (tx) => {
      await ddl(tx, `set local lock_timeout = '2s'`);
      await ddl(
        tx,
        `create table if not exists ${quote(name)} (like ${table} including defaults including constraints)`,
      );
      for (const index of spec.ownIndexes(name)) await ddl(tx, index);
      await ddl(
        tx,
        `alter table ${table} attach partition ${quote(name)}
           for values from ('${from.toISOString()}') to ('${to.toISOString()}')`,
      );
    });
    made.push(name);
  }
  return made;
}

/** Detaches and drops every partition whose range ended `retentionMs` before `now`. */
async function dropBehind(
  db: Db,
  spec: PartitionedTable,
  now: Date,
  concurrently: boolean,
): Promise<string[]> {
  const cutoff = now.getTime() - spec.retentionMs;
  const dropped: string[] = [];
  const table = quote(spec.table);
  for (const partition of await listPartitions(db, spec.table)) {
    if (partition.to.getTime() > cutoff) continue;
    const name = quote(partition.name);
    if (partition.detachPending)
      await ddl(db, `alter table ${table} detach partition ${name} finalize`);
    else
      await ddl(
        db,
        `alter table ${table} detach partition ${name}${concurrently ? ' concurrently' : ''}`,
      );
    await ddl(db, `drop table ${name}`);
    dropped.push(partition.name);
  }
  // A DETACH that went through and a DROP that did not (the connection lost between the two; a
  // CONCURRENTLY cannot share their transaction) leave a table no partition list shows.
  for (const orphan of await detachedBehind(db, spec, cutoff)) {
    await ddl(db, `drop table ${quote(orphan)}`);
    dropped.push(orphan);
  }
  return dropped;
}

/**
 * Tables of `spec` that are no partition of it: named as makeAhead names them, for a span ended by
 * `cutoff`, or the table from before partitioning (only a run detaches it, when it is past
 * retention). Anything else by a similar name is not ours to drop.
 */
async function detachedBehind(db: Db, spec: PartitionedTable, cutoff: number): Promise<string[]> {
  const prefix = `${spec.table}_`;
  const rows = await queryRows<{ name: string }>(
    db,
    sql`select relname as name from pg_class
        where relnamespace = 'public'::regnamespace and relkind = 'r' and not relispartition
          and left(relname, ${prefix.length}) = ${prefix}`,
  );
  return rows
    .map(({ name }) => name)
    .filter((name) => {
      const rest = name.slice(prefix.length);
      if (rest === 'before_partitions') return true;
      const m = /^p(\d{4})(\d\d)(\d\d)$/.exec(rest);
      if (!m) return false;
      const from = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
      return from + spanMs(spec.span) <= cutoff;
    })
    .sort();
}

/** Claims the lease `name` for `holder` until `ms` from now: true if this holder has it. */
async function claimLease(db: Db, name: string, holder: string, ms: number): Promise<boolean> {
  const rows = await queryRows<{ holder: string }>(
    db,
    sql`insert into maintenance_leases as l (name, holder, expires_at)
        values (${name}, ${holder}, now() + ${ms} * interval '1 millisecond')
        on conflict (name) do update set holder = excluded.holder, expires_at = excluded.expires_at
        where l.expires_at < now() or l.holder = excluded.holder
        returning holder`,
  );
  return rows.length === 1;
}

async function releaseLease(db: Db, name: string, holder: string): Promise<void> {
  await db.execute(
    sql`update maintenance_leases set expires_at = now() where name = ${name} and holder = ${holder}`,
  );
}

/** Where a keeper reports what it made and dropped (the app's logger). */
interface KeeperLog {
  info(fields: object, message: string): void;
}

/** Partitions' count and oldest age per table, for the metrics. */
export interface PartitionGauge {
  table: string;
  partitions: number;
  oldestAgeSeconds: number;
}

const LEASE = 'partitions';
/** Long enough for a run's DETACH ... CONCURRENTLY to wait out the transactions before it. */
const LEASE_MS = 10 * 60_000;

/**
 * Keeps the partitions of `tables`: `make()` (the current and coming spans), `run()` (make, then
 * drop behind), each under the lease; a run that finds the lease held leaves it to its holder.
 */
export class PartitionKeeper {
  private readonly holder = `${process.pid}:${crypto.randomUUID()}`;
  private gauges: PartitionGauge[] = [];

  constructor(
    private readonly db: Db,
    private readonly tables: PartitionedTable[],
    private readonly concurrently: boolean,
    private readonly log: KeeperLog,
  ) {}

  make(now = new Date()): Promise<boolean> {
    return this.leased(now, false);
  }

  run(now = new Date()): Promise<boolean> {
    return this.leased(now, true);
  }

  /** As of the last run of this process (whoever held the lease). */
  get partitions(): readonly PartitionGauge[] {
    return this.gauges;
  }

  private async leased(now: Date, drop: boolean): Promise<boolean> {
    const held = await claimLease(this.db, LEASE, this.holder, LEASE_MS);
    try {
      if (held)
        for (const spec of this.tables) {
          for (const name of await makeAhead(this.db, spec, now))
            this.log.info({ table: spec.table, partition: name }, 'partition made');
          if (drop)
            for (const name of await dropBehind(this.db, spec, now, this.concurrently))
              this.log.info({ table: spec.table, partition: name }, 'partition dropped');
        }
      this.gauges = await Promise.all(
        this.tables.map(async ({ table }) => {
          const partitions = await listPartitions(this.db, table);
          const oldest = partitions[0]?.from ?? partitions[0]?.to;
          return {
            table,
            partitions: partitions.length,
            oldestAgeSeconds: oldest ? Math.max(0, (now.getTime() - oldest.getTime()) / 1000) : 0,
          };
        }),
      );
    } finally {
      if (held) await releaseLease(this.db, LEASE, this.holder);
    }
    return held;
  }
}
