/**
 * How a listing change is recorded: by the very statement that makes it. Every create, upsert,
 * PATCH, DELETE and batch item is one statement (listings-repository.ts) whose CTE `changed`
 * holds one row per listing it changed; the recordings (the webhooks' outbox, the saved
 * searches' match queue, the apps' sandbox milestone, wired in src/services.ts) add CTEs that
 * read it. So an event exists if and only if its change committed, no write needs a
 * transaction around it (one round trip: `npm run bench`, docs/performance.md), and listings
 * never import the features that listen.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Environment } from '../generated/schemas.ts';
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

/** A recording's CTEs (comma-separated definitions, `name as (...)`), or none. */
export type Recording = (changed: ChangedListings) => SQL | null;

export class ListingChanges {
  constructor(private readonly recordings: readonly Recording[]) {}

  /**
   * The CTEs of a statement that changes listings: `changed`, whose columns are the given
   * expressions over `from` (the statement's own rows), then each recording's.
   */
  ctes(
    change: { type: ListingEventType; environment: Environment },
    columns: Record<ChangedColumn, SQL>,
    from: SQL,
  ): SQL {
    const select = CHANGED_COLUMNS.map((name) => sql`${columns[name]} as ${sql.identifier(name)}`);
    const changed: ChangedListings = { ...change, table: CHANGED, columns: COLUMN_REFS };
    return sql.join(
      [
        sql`${CHANGED} as (select ${sql.join(select, sql`, `)} from ${from})`,
        ...this.recordings.flatMap((record) => record(changed) ?? []),
      ],
      sql`, `,
    );
  }
}
