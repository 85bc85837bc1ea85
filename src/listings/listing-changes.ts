/**
 * How a listing change is recorded: by the very statement that makes it. Every create, upsert,
 * PATCH, DELETE and batch item is one statement (listings-repository.ts) whose CTE `changed`
 * holds one row per listing it changed; the recordings (the webhooks' outbox, the saved
 * searches' match queue, the apps' sandbox milestone, wired in src/services.ts) add CTEs that
 * read it. So an event exists if and only if its change committed, no write needs a
 * transaction around it (one round trip: `npm run bench`, docs/performance.md), and listings
 * never import the features that listen. A recording that queues work for a background loop
 * says so in the statement's answer (`queued_lanes`), and only then is that loop woken.
 */
import { sql, SQL } from 'drizzle-orm';
import type { Environment } from '../generated/schemas.ts';
import type { WakeUpLane } from '../lib/wake-ups.ts';
import type { ListingEventType } from './state-machine.ts';

/** The columns of `changed`, one row per listing the statement changed. */
interface ChangedRow {
  /** Their order (a batch's items in index order). */
  ord: number;
  /** The event's data as json: `{"listing": <the owner's view after the change>}`. */
  data: unknown;
  listing_id: string;
  seller_id: string;
  /** The app that created the listing (null: nobody to notify). */
  app_id: string | null;
}

type ChangedColumn = keyof ChangedRow;
const CHANGED_COLUMNS = [
  'ord',
  'data',
  'listing_id',
  'seller_id',
  'app_id',
] as const satisfies readonly ChangedColumn[];

const CHANGED = sql`${sql.identifier('changed')}`;

/** What a recording is given: the statement's changed listings and what is known before it runs. */
export interface ChangedListings {
  type: ListingEventType;
  environment: Environment;
  /** The CTE to select from. */
  table: SQL;
  /** Its columns, qualified (`"changed"."listing_id"`). */
  columns: Record<ChangedColumn, SQL>;
}

const COLUMN_REFS = Object.fromEntries(
  CHANGED_COLUMNS.map((name) => [name, sql`${CHANGED}.${sql.identifier(name)}`]),
) as Record<ChangedColumn, SQL>;

/** A recording's CTEs (comma-separated definitions, `name as (...)`). */
export interface RecordingCtes {
  ctes: SQL;
  /**
   * Whether they queued work for a background loop (src/lib/wake-ups.ts): its lane, and a
   * boolean over the CTEs, true when they did (the outbox's deliveries, the match queue's rows).
   */
  queues?: { lane: WakeUpLane; queued: SQL };
}

/** A recording's CTEs (alone: they queue no loop's work), or none. */
export type Recording = (changed: ChangedListings) => RecordingCtes | SQL | null;

const QUEUED_WORK = sql`${sql.identifier('queued_work')}`;

/**
 * The column of a statement's answer that names the lanes its recordings queued work for (from
 * the last CTE of `ctes`): one value for the whole statement, on each of its rows.
 */
export const QUEUED_LANES = sql`(select ${QUEUED_WORK}.lanes from ${QUEUED_WORK}) as queued_lanes`;

/** A row of a statement that selected QUEUED_LANES. */
export interface QueuedLanes {
  queued_lanes: WakeUpLane[];
}

/**
 * The lanes a committed statement's answer says its recordings queued work for: the loops to
 * wake, and the only ones (a write with no endpoint to deliver to, or while there is no saved
 * search, wakes nobody; polling still finds what another process queued).
 */
export function queuedLanes(rows: readonly QueuedLanes[]): WakeUpLane[] {
  return rows[0]?.queued_lanes ?? [];
}

export class ListingChanges {
  constructor(private readonly recordings: readonly Recording[]) {}

  /**
   * The CTEs of a statement that changes listings: `changed`, whose columns are the given
   * expressions over `from` (the statement's own rows), then each recording's, then the lanes
   * they queued work for (for QUEUED_LANES).
   */
  ctes(
    change: { type: ListingEventType; environment: Environment },
    columns: Record<ChangedColumn, SQL>,
    from: SQL,
  ): SQL {
    const select = CHANGED_COLUMNS.map((name) => sql`${columns[name]} as ${sql.identifier(name)}`);
    const changed: ChangedListings = { ...change, table: CHANGED, columns: COLUMN_REFS };
    const recorded = this.recordings.flatMap((record) => {
      const part = record(changed);
      return part === null ? [] : [part instanceof SQL ? { ctes: part } : part];
    });
    // A lane's name is one of WakeUpLane's: written as a literal, not sent as a parameter.
    const lanes = recorded.flatMap(({ queues }) =>
      queues ? [sql`case when ${queues.queued} then ${sql.raw(`'${queues.lane}'`)} end`] : [],
    );
    const queued = sql`array_remove(array[${sql.join(lanes, sql`, `)}]::text[], null)`;
    return sql.join(
      [
        sql`${CHANGED} as (select ${sql.join(select, sql`, `)} from ${from})`,
        ...recorded.map((part) => part.ctes),
        sql`${QUEUED_WORK} as (select ${queued} as lanes)`,
      ],
      sql`, `,
    );
  }
}
