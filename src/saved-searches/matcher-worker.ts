/**
 * Matches written listings against the saved searches (OpenAPI "Saved searches"), after their
 * write commits, never inside it. Every listing write while there is a saved search leaves a
 * row in listing_match_queue in its own statement (enqueueMatches); a pass claims a batch of
 * them (FOR UPDATE SKIP LOCKED, so any number of processes share the queue), finds each
 * listing's candidate saved searches by its tokens (saved_search_keys: the few that could
 * match, however many there are), checks those with the one definition of "matches"
 * (search-filters.ts savedSearchMatches), records one listing.matched per new match in the
 * outbox and forgets the matches that no longer hold, and deletes the claimed rows, all in one
 * transaction: a crash before its commit leaves the rows to be claimed again, and a match is
 * recorded at most once (saved_search_matches' key).
 *
 * Bounded between tenants (OpenAPI "Saved searches", "Budgets"):
 * - per listing and owner: at most MATCHES_PER_OWNER of one developer account's saved searches
 *   (across all its apps and environments) match one listing, the oldest first;
 * - per owner and minute: at most MATCHES_PER_OWNER_PER_MINUTE new matches (listing.matched
 *   events) for one developer account, counted in saved_search_match_budgets, so one account's
 *   searches cannot make the outbox and the delivery worker everyone's bottleneck;
 *   the matches over either are not made and are counted (MatchPass.overBudget:
 *   saved_search_matches_over_budget_total), so a flood of identical searches costs its owner's
 *   searches, not anyone else's events;
 * - in two lanes, each with passes of its own running beside the other's: a light pass weighs
 *   the listings it claims by their candidates (counted once, from the keys' index alone, and
 *   kept in the queue row's weight) and takes them while their candidates add up to
 *   PASS_CANDIDATES; those over HEAVY move to the heavy lane, whose passes match one listing
 *   each. So a backlog of listings that many saved searches match (one owner's flood) delays
 *   only those listings, never a light write's alerts (not even by one heavy pass), and each
 *   pass's transaction stays short: only a transaction that records events holds back GET
 *   /events (EventsRepository.horizon), so a long pass would hold back every app's events.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { queryRows, sqlArray } from '../db/rows.ts';
import type { Environment } from '../generated/schemas.ts';
import { outsideRequestScope } from '../lib/request-scope.ts';
import type { ChangedListings, RecordingCtes } from '../listings/listing-changes.ts';
import { COLUMNS, type ListingRow } from '../listings/listings-repository.ts';
import { listingView } from '../listings/listing-view.ts';
import { savedSearchMatches } from '../listings/search-filters.ts';
import { grantInUse } from '../oauth/oauth-repository.ts';
import type { EventsRepository, NewEvent } from '../events/events-repository.ts';

/** Listings a pass takes from the queue at most. */
const BATCH = 100;

/**
 * Candidates (saved searches found by a listing's tokens) a pass examines at most, beyond its
 * first listing: about 50 ms of the matching statement on this project's machine.
 */
export const PASS_CANDIDATES = 2000;

/** One owner's saved searches that may match one listing (OpenAPI "Saved searches"). */
export const MATCHES_PER_OWNER = 100;

/** New matches (listing.matched events) one owner gets per minute at most. */
const MATCHES_PER_OWNER_PER_MINUTE = 1000;

/**
 * Candidates over which a listing is matched in the heavy lane, one a pass (the queue's partial
 * indexes, drizzle/0020, say the same number).
 */
export const HEAVY = 200;

export interface MatcherOptions {
  /** How often the queue is looked at when nothing hinted (another process's writes). */
  pollIntervalMs?: number;
  log?: {
    error(details: object, message: string): void;
    info(details: object, message: string): void;
  };
  /** Told what each pass examined and matched, after its commit (metrics; the delivery hint). */
  onPass?: (pass: MatchPass) => void;
  /** The per-owner budgets (default: the documented ones, MATCHES_PER_OWNER and per minute). */
  budgets?: MatchBudgets;
}

export interface MatchPass {
  listings: number;
  /** (saved search, listing) pairs found by key and checked. */
  examined: number;
  /** New matches: listing.matched events recorded. */
  matched: number;
  /** Matches not made: beyond their owner's budget for a listing or for the minute. */
  overBudget: number;
}

/**
 * The queue's rows of a write, as a CTE of the statement that makes it (a recording of
 * src/listings/listing-changes.ts): one per changed listing, while there is any saved search
 * (with none, a pass could match nothing, nor forget a match: they go with their saved search).
 * The matcher has work when a row was queued.
 */
export function enqueueMatches(changed: ChangedListings): RecordingCtes {
  return {
    ctes: sql`listing_match_enqueued as (
      insert into listing_match_queue (listing_id) select ${changed.columns.listing_id} from ${changed.table}
      where exists (select 1 from saved_searches)
      returning listing_id
    )`,
    queues: { lane: 'matching', queued: sql`exists (select 1 from listing_match_enqueued)` },
  };
}

/** A new match: the saved search's app, environment and user, and the listing's row. */
type MatchRow = ListingRow & {
  saved_search_id: string;
  match_app_id: string;
  match_environment: Environment;
  match_user_id: string;
  /** The developer who owns the saved search's app: whom its API keys act for. */
  match_owner_id: string;
};

/**
 * For the matcher's candidate count and matching statement only (SET LOCAL, so through a
 * transaction-mode pooler too, and undone by RESTORE_PLANNER before anything else runs in the
 * pass: the outbox's recording joins thousands of rows, which nested loops alone would make
 * quadratic): nested loops over index lookups, never a scan of saved_search_keys,
 * saved_searches or saved_search_matches (test/saved-searches/matching-plan.test.ts). And the
 * generic plan of the prepared statement (postgres.js prepares each text once per connection; a
 * pooler's connections do not): planning the matching statement anew took 2.2 ms of
 * PostgreSQL's CPU a pass with 100,000 saved searches, more than running it (bench:alerts), and
 * with the settings above the generic plan is the same nested loops.
 */
export const PLANNER_SETTINGS = sql`select set_config('enable_seqscan', 'off', true),
  set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
  set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)`;

/** PLANNER_SETTINGS undone for the rest of the transaction: each back to its session's value. */
const RESTORE_PLANNER = sql`select set_config(name, reset_val, true) from pg_settings
  where name in ('enable_seqscan', 'enable_hashjoin', 'enable_mergejoin', 'jit', 'plan_cache_mode')`;

/**
 * Each listing's tokens joined with the saved search keys they find: `c` the listing. The keys
 * are looked up for each token, in a subquery the planner keeps as written (`bound` is its
 * OFFSET 0 or LIMIT), so the join runs from the listings whatever the keys' statistics say.
 * Joined plainly, one owner's 1,000 saved searches on one token made the keys look like a few
 * tokens of hundreds of rows each: the planner then read every key once and matched the listings
 * to it by price (250,000 pairs thrown away by the join filter to weigh a flood batch of 10
 * listings: 240-570 ms of each light pass of the matcher in bench:noisy, 488 ms against 48 ms
 * by token on that database), where each token's lookup reads its own keys only.
 */
function candidateKeys(bound: SQL): SQL {
  return sql`listings c
      cross join lateral unnest(tsvector_to_array(c.match)) as t(token)
      cross join lateral (
        select k.saved_search_id from saved_search_keys k
        where k.token = t.token
          and k.max_price_cents >= c.price_cents and k.min_price_cents <= c.price_cents
        ${bound}) k`;
}

/**
 * How many candidates each of the listings `ids` has (an upper bound: a search found by two
 * tokens counts twice), from saved_search_keys_price_idx alone: what a pass weighs its
 * listings by before it matches them. A token's keys are counted up to HEAVY + 1: past that the
 * listing is heavy whatever its other tokens find, and a flood listing costs its pass that many,
 * not its thousand.
 */
export function candidateCounts(ids: string[]): SQL {
  return sql`select c.id::text as listing_id, count(*)::int as n
    from ${candidateKeys(sql`limit ${sql.raw(String(HEAVY + 1))}`)}
    where c.id = any(${sqlArray(ids, 'uuid')}) group by c.id`;
}

/** The budgets of one matching statement (the defaults: OpenAPI "Saved searches", "Budgets"). */
export interface MatchBudgets {
  perListing: number;
  perMinute: number;
}

const BUDGETS: MatchBudgets = {
  perListing: MATCHES_PER_OWNER,
  perMinute: MATCHES_PER_OWNER_PER_MINUTE,
};

/**
 * The matches of the listings `ids` (in their queue order) in one statement: the candidates
 * found by key, checked by savedSearchMatches (and, for a search made through a token, that the
 * user grants the app `searches` now; an app deleted matches nothing); for one listing at most
 * `perListing` of one owner's saved searches, the oldest first (ids are UUIDv7), and of those
 * the new ones within what is left of the owner's `perMinute` (in the listings' order); the
 * matches no longer holding forgotten, the new ones kept, their owner's minute charged and their
 * saved searches' last match set. Answers the number of candidates examined and of matches over
 * a budget, with one row per new match, its saved search's owner and its listing's row (none:
 * one row of the counts alone).
 */
export function matchingStatement(ids: string[], budgets: MatchBudgets = BUDGETS): SQL {
  const idArray = sqlArray(ids, 'uuid');
  const minute = sql`now() - interval '1 minute'`;
  return sql`with candidates as materialized (
      select distinct k.saved_search_id, c.id as listing_id from ${candidateKeys(sql`offset 0`)}
      where c.id = any(${idArray})
    ), holding as (
      select s.id as saved_search_id, l.id as listing_id, a.owner_id, o.ord,
        row_number() over (partition by l.id, a.owner_id order by s.id) as rank,
        exists (select 1 from saved_search_matches m
          where m.saved_search_id = s.id and m.listing_id = l.id) as known
      from candidates c
      join saved_searches s on s.id = c.saved_search_id
      join apps a on a.id = s.app_id and a.deleted_at is null
      join listings l on l.id = c.listing_id
      join unnest(${idArray}) with ordinality as o(id, ord) on o.id = l.id
      where ${savedSearchMatches('s')}
        and (not s.via_token or exists (select 1 from oauth_grants g
          where g.user_id = s.user_id and g.app_id = s.app_id and 'searches' = any(g.scopes)
            and ${grantInUse(sql.raw('g'))}))
    ), fresh as (
      select h.saved_search_id, h.listing_id, h.owner_id,
        row_number() over (partition by h.owner_id order by h.ord, h.saved_search_id) as spend
      from holding h where h.rank <= ${budgets.perListing} and not h.known
    ), room as (
      select f.owner_id, ${budgets.perMinute}
          - coalesce((select b.used from saved_search_match_budgets b
            where b.owner_id = f.owner_id and b.window_start > ${minute}), 0) as room
      from (select distinct owner_id from fresh) f
    ), matched as (
      select saved_search_id, listing_id from holding
      where rank <= ${budgets.perListing} and known
      union all
      select f.saved_search_id, f.listing_id from fresh f join room r on r.owner_id = f.owner_id
      where f.spend <= r.room
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
    ), spent as (
      insert into saved_search_match_budgets as b (owner_id, window_start, used)
      select f.owner_id, now(), count(*)::int from added a
      join fresh f on f.saved_search_id = a.saved_search_id and f.listing_id = a.listing_id
      group by f.owner_id
      on conflict (owner_id) do update set
        used = case when b.window_start > ${minute} then b.used + excluded.used else excluded.used end,
        window_start = case when b.window_start > ${minute} then b.window_start else now() end
    ), touched as (
      update saved_searches set last_matched_at = now()
      where id in (select saved_search_id from added)
      returning id, app_id, environment, user_id
    )
    select (select count(*)::int from candidates) as examined,
      ((select count(*) from holding where rank > ${budgets.perListing})
        + (select count(*) from fresh f join room r on r.owner_id = f.owner_id
          where f.spend > r.room))::int as over_budget,
      a.saved_search_id::text as saved_search_id, s.app_id::text as match_app_id,
      s.environment as match_environment, s.user_id::text as match_user_id,
      o.owner_id::text as match_owner_id, ${COLUMNS}
    from (select 1) as one
    left join (added a join touched s on s.id = a.saved_search_id join apps o on o.id = s.app_id
      join listings l on l.id = a.listing_id join users u on u.id = l.seller_id) on true`;
}

/** A claimed row of the queue. */
interface QueueRow {
  id: string;
  listing_id: string;
  weight: number | null;
}

/**
 * What a light pass matches of what it claimed: its listings in queue order as their weights
 * add up to `budget` (the first one whatever its weight), none over HEAVY (those are left for
 * the heavy lane). The others stay queued.
 */
export function planPass(
  light: QueueRow[],
  weights: Map<string, number>,
  budget: number,
): string[] {
  const taken: string[] = [];
  let total = 0;
  for (const id of new Set(light.map((row) => row.listing_id))) {
    const weight = weights.get(id) ?? 0;
    if (weight <= HEAVY && (taken.length === 0 || total + weight <= budget)) {
      taken.push(id);
      total += weight;
    }
  }
  return taken;
}

/** The matcher's two lanes (the module's comment): each runs its own passes. */
export type Lane = 'light' | 'heavy';
const LANES: readonly Lane[] = ['light', 'heavy'];

/** Which rows of the queue are a lane's (the queue's partial indexes, drizzle/0020). */
const IN_LANE: Record<Lane, SQL> = {
  light: sql`coalesce(weight, 0) <= ${sql.raw(String(HEAVY))}`,
  heavy: sql`weight > ${sql.raw(String(HEAVY))}`,
};

/**
 * A pass that PostgreSQL chose to end because it deadlocked with the other lane's (both may
 * set the same saved searches' last match, or charge the same owner, in their own order): it
 * wrote nothing, and runs again at once.
 */
const DEADLOCK = '40P01';
const PASS_ATTEMPTS = 3;

function isDeadlock(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause)
    if ((e as { code?: unknown }).code === DEADLOCK) return true;
  return false;
}

/**
 * One lane's passes: one at a time, the next at once while the last found work (or a write
 * hinted meanwhile), else after the poll interval.
 */
class LaneLoop {
  private timer: NodeJS.Timeout | undefined;
  private passing: Promise<void> | undefined;
  private again = false;
  private stopped = true;
  /** The last pass failed: the failure is logged once, until a pass works again. */
  private failing = false;

  constructor(
    private readonly lane: Lane,
    private readonly run: () => Promise<{ more: boolean }>,
    private readonly pollIntervalMs: number,
    private readonly log: MatcherOptions['log'],
  ) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0);
  }

  nudge(): void {
    if (this.stopped) return;
    if (this.passing) this.again = true;
    else this.schedule(0);
  }

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
      this.passing = outsideRequestScope(() => this.loop()).finally(
        () => (this.passing = undefined),
      );
    }, ms);
    this.timer.unref();
  }

  private async loop(): Promise<void> {
    let more = false;
    try {
      more = (await this.run()).more;
      if (this.failing) this.log?.info({ lane: this.lane }, 'saved search matching works again');
      this.failing = false;
    } catch (err) {
      // Once per outage (the database down): the queue keeps every write until it is back.
      if (!this.failing)
        this.log?.error(
          { err, lane: this.lane },
          'saved search matching failed (retried every poll)',
        );
      this.failing = true;
    }
    if (this.stopped) return;
    const soon = more || this.again;
    this.again = false;
    this.schedule(soon ? 0 : this.pollIntervalMs);
  }
}

export class Matcher {
  private readonly loops: LaneLoop[];

  constructor(
    private readonly db: Db,
    private readonly events: EventsRepository,
    private readonly options: MatcherOptions = {},
  ) {
    const every = options.pollIntervalMs ?? 1000;
    this.loops = LANES.map((lane) => new LaneLoop(lane, () => this.pass(lane), every, options.log));
  }

  start(): void {
    for (const loop of this.loops) loop.start();
  }

  /** Something may be queued: both lanes look now instead of at their next poll. */
  nudge(): void {
    for (const loop of this.loops) loop.nudge();
  }

  /** Resolves once the passes under way, if any, have ended (committed and reported). */
  async settled(): Promise<void> {
    await Promise.all(this.loops.map((loop) => loop.settled()));
  }

  async stop(): Promise<void> {
    await Promise.all(this.loops.map((loop) => loop.stop()));
  }

  /**
   * One pass of `lane`, matched and recorded in one transaction (a deadlock with the other
   * lane's pass is run again); `more` when the lane may hold more.
   */
  async pass(lane: Lane): Promise<MatchPass & { more: boolean }> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const pass = await this.db.transaction((tx) => this.passIn(tx, lane));
        this.options.onPass?.(pass);
        return pass;
      } catch (err) {
        if (attempt >= PASS_ATTEMPTS || !isDeadlock(err)) throw err;
      }
    }
  }

  /**
   * The light lane's listings within the pass's budget of candidates (planPass), or the heavy
   * lane's oldest.
   */
  private async passIn(tx: Db, lane: Lane): Promise<MatchPass & { more: boolean }> {
    const claimed = await queryRows<QueueRow>(
      tx,
      sql`select id::text, listing_id::text, weight from listing_match_queue
        where ${IN_LANE[lane]}
        order by id limit ${sql.raw(String(lane === 'light' ? BATCH : 1))} for update skip locked`,
    );
    if (claimed.length === 0)
      return { listings: 0, examined: 0, matched: 0, overBudget: 0, more: false };
    // Index lookups only, whatever the statistics say (autovacuum may not have analyzed the
    // keys yet): a scan of every key would make a write's cost grow with the saved searches.
    await queryRows(tx, PLANNER_SETTINGS);
    const weights = new Map(claimed.map((row) => [row.listing_id, row.weight ?? 0]));
    const uncounted = [
      ...new Set(claimed.filter((r) => r.weight === null).map((r) => r.listing_id)),
    ];
    if (uncounted.length > 0)
      for (const row of await queryRows<{ listing_id: string; n: number }>(
        tx,
        candidateCounts(uncounted),
      ))
        weights.set(row.listing_id, row.n);
    const taken =
      lane === 'light' ? planPass(claimed, weights, PASS_CANDIDATES) : [claimed[0]!.listing_id];
    const done = new Set(taken);
    const finished = claimed.filter((row) => done.has(row.listing_id));
    await queryRows(
      tx,
      sql`delete from listing_match_queue
        where id = any(${sqlArray(
          finished.map((row) => row.id),
          'int8',
        )})`,
    );
    // The weights counted now stay with the rows left, so a heavy one moves to its lane.
    const weighed = claimed
      .filter((row) => row.weight === null && !done.has(row.listing_id))
      .map((row) => ({ id: row.id, weight: weights.get(row.listing_id) ?? 0 }));
    if (weighed.length > 0)
      await queryRows(
        tx,
        sql`update listing_match_queue q set weight = w.weight
          from jsonb_to_recordset(${JSON.stringify(weighed)}::jsonb) as w(id bigint, weight int)
          where q.id = w.id`,
      );
    const rows = await queryRows<MatchRow & { examined: number; over_budget: number }>(
      tx,
      matchingStatement(taken, this.options.budgets),
    );
    await queryRows(tx, RESTORE_PLANNER);
    const added = rows.filter((row) => row.saved_search_id !== null);
    await this.record(tx, added);
    return {
      listings: finished.length,
      examined: rows[0]?.examined ?? 0,
      matched: added.length,
      overBudget: rows[0]?.over_budget ?? 0,
      // The lane may hold more: the next pass looks at once (an empty one ends the run).
      more: true,
    };
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
        // The app's keys (acting for its developer) and the search's user's tokens see it: the
        // view GET /listings/{id} shows every one of them, so the owner's only when the seller
        // is both.
        data: {
          saved_search_id: match.saved_search_id,
          listing: listingView(
            match,
            match.seller_id === match.match_user_id && match.seller_id === match.match_owner_id,
          ),
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
