/**
 * How many idempotency keys each replay scenario uses: the scenarios send them (scenarios.ts),
 * the seed gives the crowded seller that many external_ids (seed.ts), and the options refuse a
 * crowded seller with fewer listings (options.ts). A module of its own so none of them imports
 * another for it.
 */
export const REPLAY_KEYS = 200;
