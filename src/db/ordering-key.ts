/**
 * Ordering keys that cannot clash: listings' published_at (the feed's cursor) and webhook events'
 * created_at (the events' cursor), each unique within an environment (CONTRACT.md, section 2).
 *
 * They used to be the clock, or one microsecond after the environment's newest key, plus the
 * item's position: two writers reading the same clock or the same newest key picked the same
 * instant, and the loser's statement failed on the unique index and ran again (1-2% of creates
 * under load: one more round trip, at the tail). Now each key takes a value of a sequence
 * (nextval: no lock, never the same value twice) and is the millisecond of the clock at which
 * the statement took it, plus that value's distance, in microseconds, from the thousand it
 * started in:
 *
 *   key = trunc_ms(clock) + (v - floor(v0 / 1000) * 1000) µs     (v0: the statement's first value)
 *
 * Two keys are equal only if their values are equal modulo 1,000 and their milliseconds match,
 * which needs 1,000 other keys taken in about a millisecond: a million a second, hundreds of
 * times what one PostgreSQL writes here. The unique indexes stay, as the guard. A statement's
 * keys rise with its values, so a batch's items keep their order; keys of one millisecond are
 * ordered by value, not by the microsecond of the clock (which the old keys had to give up as
 * soon as two writers met anyway).
 */
import { sql, type SQL } from 'drizzle-orm';

export type OrderingSequence = 'listings_published_seq' | 'webhook_events_created_seq';

/**
 * A CTE `name as (...)` of `count` fresh keys: `at` (timestamptz) and `k` (0, 1, ...: the order
 * to give them out in, rising with `at`).
 */
export function orderingKeys(name: string, sequence: OrderingSequence, count: SQL): SQL {
  return sql`${sql.identifier(name)} as (
      select date_trunc('milliseconds', min(s.t) over ())
          + (s.v - (min(s.v) over ()) / 1000 * 1000) * interval '1 microsecond' as at,
        (row_number() over (order by s.v) - 1)::int as k
      from (select clock_timestamp() as t, nextval(${sql.raw(`'${sequence}'`)}) as v
            from generate_series(1, ${count})) s
    )`;
}
