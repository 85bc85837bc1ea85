/**
 * PostgreSQL error classification, identical on postgres.js and PGlite (both expose SQLSTATE as
 * `code`).
 */
function sqlState(err: unknown): string | undefined {
  const code =
    (err as { code?: unknown; cause?: { code?: unknown } } | null)?.code ??
    (err as { cause?: { code?: unknown } })?.cause?.code;
  return typeof code === 'string' ? code : undefined;
}

export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  if (sqlState(err) !== '23505') return false;
  if (!constraint) return true;
  const e = err as {
    constraint?: string;
    constraint_name?: string;
    cause?: { constraint?: string; constraint_name?: string };
  };
  const name = e.constraint_name ?? e.constraint ?? e.cause?.constraint_name ?? e.cause?.constraint;
  return name === constraint;
}

/** A statement cancelled by its statement_timeout (SQLSTATE 57014, query_canceled). */
export function isStatementTimeout(err: unknown): boolean {
  return anyCause(err, (e) => e.code === '57014');
}

/** The code of PoolTimeoutError (pool-gate.ts): no pool connection free within the bounded wait. */
export const POOL_TIMEOUT = 'POOL_TIMEOUT';

/**
 * No pool connection was free within DATABASE_POOL_WAIT_MS: the server is saturated. Drizzle
 * wraps the driver's error (its `cause`).
 */
export function isPoolTimeout(err: unknown): boolean {
  return anyCause(err, (e) => e.code === POOL_TIMEOUT);
}

/**
 * A value the statement could not take (SQLSTATE class 22, data exception: 22021 a byte
 * sequence, 22P05 an escape jsonb refuses, 22P02 invalid text): the data's fault, not the
 * database's, so the same rows fail again.
 */
export function isDataException(err: unknown): boolean {
  return anyCause(err, (e) => typeof e.code === 'string' && e.code.startsWith('22'));
}

/** The code of DatabaseDownError (pool-gate.ts): no answer within the bounded wait, pool down. */
export const DATABASE_DOWN = 'DATABASE_DOWN';

const CONNECTION_CODES = new Set([
  DATABASE_DOWN,
  // a saturated pool is, to a caller, a database it cannot reach now (the delivery worker and
  // the request log retry later; a request answers 503)
  POOL_TIMEOUT,
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  // too_many_connections: max_connections (or a role's limit) reached, as when more instances
  // start than the server was sized for; it clears when others disconnect
  '53300',
  // read_only_sql_transaction: a write reached a server in recovery (a standby a load balancer
  // still routes the primary's address to, past postgres.js's check of new sessions:
  // PRIMARY_SESSION_OPTIONS in postgres.ts); a 503 until the route leads to a primary
  '25006',
]);

/** The database is unreachable (not a bad query): callers answer 503, not 500. */
export function isConnectionError(err: unknown): boolean {
  return anyCause(err, (e) => {
    const code =
      typeof e.code === 'string' ? e.code : typeof e.errno === 'string' ? e.errno : undefined;
    // class 08: connection exception
    return code !== undefined && (CONNECTION_CODES.has(code) || code.startsWith('08'));
  });
}

interface CauseChain {
  code?: unknown;
  errno?: unknown;
  cause?: unknown;
}

/** Whether `test` holds for the error or one of its first causes (drivers and Drizzle wrap). */
function anyCause(err: unknown, test: (e: CauseChain) => boolean): boolean {
  let e = err as CauseChain | undefined;
  for (let depth = 0; e && depth < 4; depth += 1) {
    if (test(e)) return true;
    e = e.cause as CauseChain | undefined;
  }
  return false;
}
