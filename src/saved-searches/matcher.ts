/**
 * Matches written listings against the saved searches (OpenAPI "Saved searches"), after their
 * write commits, never inside it. Every listing write leaves a row in listing_match_queue in
 * its own transaction (or statement: enqueueInStatement); a pass claims a batch of them (FOR
 * UPDATE SKIP LOCKED, so any number of processes share the queue), finds each listing's
 * candidate saved searches by its tokens (saved_search_keys: the few that could match, however
 * many there are), checks those with the one definition of "matches" (search-filters.ts
 * savedSearchMatches), records one listing.matched per new match in the outbox and forgets
 * the matches that no longer hold, and deletes the claimed rows, all in one transaction: a
 * crash before its commit leaves the rows to be claimed again, and a match is recorded at most
 * once (saved_search_matches' key).
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { queryRows, sqlArray } from '../db/rows.ts';
import type { Environment } from '../generated/schemas.ts';
import { PendingNudge } from '../lib/pending-nudge.ts';
import { COLUMNS, type ListingRow } from '../listings/listings-repository.ts';
import { listingView } from '../listings/listing-view.ts';
import { savedSearchMatches } from '../listings/search-filters.ts';
import { grantInUse } from '../oauth/oauth-repository.ts';
import type { EventsRepository, NewEvent } from '../webhooks/events-repository.ts';

/** Listings a pass takes from the queue at most. */
const BATCH = 100;

export interface MatcherOptions {
  /** How often the queue is looked at when nothing hinted (another process's writes). */
  pollIntervalMs?: number;
  log?: {
    error(details: object, message: string): void;
    info(details: object, message: string): void;
  };
  /** Told what each pass examined and matched, after its commit (metrics; the delivery hint). */
  onPass?: (pass: MatchPass) => void;
}

export interface MatchPass {
  listings: number;
  /** (saved search, listing) pairs found by key and checked. */
  examined: number;
  /** New matches: listing.matched events recorded. */
  matched: number;
}

/**
 * The queue's rows of a write, as CTEs of its statement (ListingChangesStatementListener):
 * `source` is the CTE of changed listings (`listing_id`).
 */
export function enqueueInStatement(source: string): SQL {
  return sql`, listing_match_enqueued as (
      insert into listing_match_queue (listing_id) select listing_id from ${sql.identifier(source)}
    )`;
}

export async function enqueue(tx: Db, listingIds: string[]): Promise<void> {
  if (listingIds.length === 0) return;
  await queryRows(
    tx,
    sql`insert into listing_match_queue (listing_id)
      select unnest(${sqlArray(listingIds, 'uuid')})`,
  );
}

/** A new match: the saved search's app, environment and user, and the listing's row. */
type MatchRow = ListingRow & {
  saved_search_id: string;
  match_app_id: string;
  match_environment: Environment;
  match_user_id: string;
};

/**
 * For the matcher's transaction only (SET LOCAL, so through a transaction-mode pooler too):
 * nested loops over index lookups, never a scan of saved_search_keys, saved_searches or
 * saved_search_matches (test/saved-searches/matching-plan.test.ts). And the generic plan of
 * the prepared statement (postgres.js prepares each text once per connection; a pooler's
 * connections do not): planning the matching statement anew took 2.2 ms of PostgreSQL's CPU a
 * pass with 100,000 saved searches, more than running it (bench:alerts), and with the settings
 * above the generic plan is the same nested loops.
 */
export const PLANNER_SETTINGS = sql`select set_config('enable_seqscan', 'off', true),
  set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
  set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)`;

/**
 * The matches of the listings `ids` in one statement: the candidates found by key, checked by
 * savedSearchMatches (and, for a search made through a token, the user's grant); the matches no
 * longer holding forgotten, the new ones kept and their saved searches' last match set. Answers
 * the number of candidates examined, with one row per new match, its saved search's owner and
 * its listing's row (none: one row of the count alone).
 */
export function matchingStatement(ids: string[]): SQL {
  const idArray = sqlArray(ids, 'uuid');
  return sql`with candidates as materialized (
      select distinct k.saved_search_id, c.id as listing_id
      from listings c
      cross join lateral unnest(tsvector_to_array(c.match)) as t(token)
      join saved_search_keys k on k.token = t.token
        and k.max_price_cents >= c.price_cents and k.min_price_cents <= c.price_cents
      where c.id = any(${idArray})
    ), matched as (
      select s.id as saved_search_id, l.id as listing_id
      from candidates c
      join saved_searches s on s.id = c.saved_search_id
      join listings l on l.id = c.listing_id
      where ${savedSearchMatches('s')}
        and (not s.via_token or exists (select 1 from oauth_grants g
          where g.user_id = s.user_id and g.app_id = s.app_id and ${grantInUse(sql.raw('g'))}))
    ), gone as (
      delete from saved_search_matches m
      where m.listing_id = any(${idArray})
        and not exists (select 1 from matched
          where matched.saved_search_id = m.saved_search_id and matched.listing_id = m.listing_id)
    ), added as (
      insert into saved_search_matches (saved_search_id, listing_id)
      select saved_search_id, listing_id from matched
      on conflict do nothing
      returning saved_search_id, listing_id
    ), touched as (
      update saved_searches set last_matched_at = now()
      where id in (select saved_search_id from added)
      returning id, app_id, environment, user_id
    )
    select (select count(*)::int from candidates) as examined,
      a.saved_search_id::text as saved_search_id, s.app_id::text as match_app_id,
      s.environment as match_environment, s.user_id::text as match_user_id, ${COLUMNS}
    from (select 1) as one
    left join (added a join touched s on s.id = a.saved_search_id
      join listings l on l.id = a.listing_id join users u on u.id = l.seller_id) on true`;
}

export class Matcher {
  private timer: NodeJS.Timeout | undefined;
  private passing: Promise<void> | undefined;
  private again = false;
  private stopped = true;
  /** The last pass failed: the failure is logged once, until a pass works again. */
  private failing = false;
  private readonly pollIntervalMs: number;

  constructor(
    private readonly db: Db,
    private readonly events: EventsRepository,
    private readonly options: MatcherOptions = {},
  ) {
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0);
  }

  /**
   * A listing write left a row in the queue, inside its transaction: noted there, released
   * once the request is answered, when the write has committed.
   */
  readonly afterWrite = new PendingNudge(() => this.nudge());

  /** Something may be queued: look now instead of at the next poll. */
  nudge(): void {
    if (this.stopped) return;
    if (this.passing) this.again = true;
    else this.schedule(0);
  }

  /** Resolves once the pass under way, if any, has ended (committed and reported). */
  async settled(): Promise<void> {
    await this.passing;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.passing;
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.passing = this.loop().finally(() => (this.passing = undefined));
    }, ms);
    this.timer.unref();
  }

  private async loop(): Promise<void> {
    let full = false;
    try {
      full = (await this.pass()).listings === BATCH;
      if (this.failing) this.options.log?.info({}, 'saved search matching works again');
      this.failing = false;
    } catch (err) {
      // Once per outage (the database down): the queue keeps every write until it is back.
      if (!this.failing)
        this.options.log?.error({ err }, 'saved search matching failed (retried every poll)');
      this.failing = true;
    }
    if (this.stopped) return;
    const soon = full || this.again;
    this.again = false;
    this.schedule(soon ? 0 : this.pollIntervalMs);
  }

  /** One batch of the queue, matched and recorded in one transaction. */
  async pass(): Promise<MatchPass> {
    const pass = await this.db.transaction(async (tx) => {
      const claimed = await queryRows<{ listing_id: string }>(
        tx,
        sql`delete from listing_match_queue where id in (
            select id from listing_match_queue order by id limit ${sql.raw(String(BATCH))}
            for update skip locked)
          returning listing_id::text`,
      );
      const ids = [...new Set(claimed.map((row) => row.listing_id))];
      if (ids.length === 0) return { listings: claimed.length, examined: 0, matched: 0 };
      // Index lookups only, whatever the statistics say (autovacuum may not have analyzed the
      // keys yet): a scan of every key would make a write's cost grow with the saved searches.
      await queryRows(tx, PLANNER_SETTINGS);
      const rows = await queryRows<MatchRow & { examined: number }>(tx, matchingStatement(ids));
      const examined = rows[0]?.examined ?? 0;
      const added = rows.filter((row) => row.saved_search_id !== null);
      await this.record(tx, added);
      return { listings: claimed.length, examined, matched: added.length };
    });
    this.options.onPass?.(pass);
    return pass;
  }

  /** One listing.matched per new match, in the outbox. */
  private async record(tx: Db, added: MatchRow[]): Promise<void> {
    const byEnvironment = new Map<Environment, NewEvent[]>();
    for (const match of added) {
      const events = byEnvironment.get(match.match_environment) ?? [];
      events.push({
        appId: match.match_app_id,
        environment: match.match_environment,
        type: 'listing.matched',
        // As GET /listings/{id} shows it to the saved search's credential: its own, the owner's.
        data: {
          saved_search_id: match.saved_search_id,
          listing: listingView(match, match.seller_id === match.match_user_id),
        },
        listingId: match.id,
        // Who the event is about (its visibility to tokens, and the grant it needs): the user
        // the saved search acts for.
        sellerId: match.match_user_id,
      });
      byEnvironment.set(match.match_environment, events);
    }
    for (const events of byEnvironment.values()) await this.events.recordMany(events, tx);
  }
}
