import { randomBytes } from 'node:crypto';

/**
 * Configuration from the environment (docs/configuration.md), validated once at boot.
 * A bad value throws a ConfigError whose message is one line naming the variable;
 * the server entry prints it and exits.
 */
export interface Config {
  port: number;
  host: string;
  baseUrl: string;
  /**
   * undefined: embedded PGlite in ./.data/pglite; 'memory://': in-memory PGlite; postgres://:
   * PostgreSQL.
   */
  databaseUrl: string | undefined;
  /** DATABASE_REPLICA_*: a streaming replica for anonymous reads (src/db/replica.ts), or null. */
  databaseReplica: ReplicaConfig | null;
  /**
   * DATABASE_DIRECT_URL: PostgreSQL without a pooler in between, for what needs a session of its
   * own (migrations and their lock, every LISTEN). Defaults to DATABASE_URL; setting it says
   * DATABASE_URL is a transaction-mode pooler (docs/operations.md, "Behind a connection pooler").
   */
  databaseDirectUrl: string | undefined;
  /**
   * DATABASE_PREPARED_STATEMENTS: run the pool's statements as named prepared statements (on
   * unless DATABASE_DIRECT_URL is set: PgBouncer before 1.21 cannot pass them on).
   */
  databasePreparedStatements: boolean;
  pgliteDir: string;
  redisUrl: string | undefined;
  rateLimitMax: number;
  rateLimitWindowMs: number;
  /**
   * RATE_LIMIT_TOKEN_MAX: /oauth/token and /oauth/revoke requests per client IP per minute (default
   * 30).
   */
  rateLimitTokenMax: number;
  /**
   * RATE_LIMIT_SIGNIN_MAX: sign-in attempts (forms submitting a password) per client IP per minute
   * (default 10).
   */
  rateLimitSignInMax: number;
  /**
   * RATE_LIMIT_SIGNIN_CLIENT_FAILURES: attempts without a success for one username from one client
   * per 15 minutes (default 5).
   */
  rateLimitSignInClientFailures: number;
  /**
   * RATE_LIMIT_SIGNIN_USERNAME_FAILURES: failed sign-ins for one username from unknown browsers per
   * hour (default 100).
   */
  rateLimitSignInUsernameFailures: number;
  webhookTimeoutMs: number;
  /** WEBHOOK_CONCURRENCY: attempts this process sends at once (default 32). */
  webhookConcurrency: number;
  /** WEBHOOK_ENDPOINT_CONCURRENCY: attempts this process sends to one endpoint at once (4). */
  webhookEndpointConcurrency: number;
  webhookRetryScheduleS: number[];
  webhookAllowPrivateNetworks: boolean;
  /**
   * WEBHOOK_WORKER: run the delivery worker in this process (default true; any number of processes
   * may).
   */
  webhookWorker: boolean;
  /**
   * DATABASE_POOL_WAIT_MS: the longest a statement waits for a PostgreSQL pool connection before
   * the request is answered 503 + Retry-After (default 2000).
   */
  databasePoolWaitMs: number;
  /**
   * SEARCH_TIMEOUT_MS: the longest a search page of GET /listings may run on PostgreSQL before it
   * is cancelled and answered 503 (default 2000; OpenAPI "Search and sync").
   */
  searchTimeoutMs: number;
  /**
   * SEARCH_CONCURRENCY: search pages of GET /listings this process runs at once (default 4, at
   * most 9: below the PostgreSQL pool's 10 connections, which searches share behind a pooler
   * (else they have 5 of their own), src/db/postgres.ts, so that searches never hold every
   * connection; docs/operations.md, "Fair share").
   */
  searchConcurrency: number;
  /** SEARCH_QUEUE: searches that may wait for a place beyond those (default 16; 0: none wait). */
  searchQueue: number;
  /** SEARCH_QUEUE_WAIT_MS: the longest a search waits for a place, then 503 (default 1000). */
  searchQueueWaitMs: number;
  /**
   * SYNC_SETTLE_MS: how old a change must be before `sort=updated_at` lists it, so that a change
   * still committing never falls behind a sync client's cursor (default 5000).
   */
  syncSettleMs: number;
  /**
   * EVENTS_WAIT_MAX: requests one process holds waiting on GET /api/v1/events?wait= at once;
   * beyond, 503 (default 1000; OpenAPI listEvents).
   */
  eventsWaitMax: number;
  /** EVENTS_WAIT_MAX_PER_CREDENTIAL: the same per API key or token; beyond, 429 (default 5). */
  eventsWaitMaxPerCredential: number;
  /**
   * EVENTS_WAIT_MAX_PER_USER: the same per end user of an app, all the user's OAuth tokens of the
   * app together; beyond, 429 (default 5): one user cannot hold the app's places.
   */
  eventsWaitMaxPerUser: number;
  /**
   * EVENTS_WAIT_MAX_PER_APP: the same per app and environment, all its keys and tokens together;
   * beyond, 429 (default 20). Its tokens together hold at most this minus
   * EVENTS_WAIT_MAX_PER_CREDENTIAL (so it must be greater): the rest is its keys'.
   */
  eventsWaitMaxPerApp: number;
  /**
   * EVENTS_WAIT_MAX_PER_OWNER: the same per developer account, all its apps and environments;
   * beyond, 429 (default 50): one developer cannot hold the process's places.
   */
  eventsWaitMaxPerOwner: number;
  /** REQUEST_LOGS: the portal's request log of API requests (on unless false). */
  requestLogs: boolean;
  /** REQUEST_LOG_BUFFER: requests waiting to be written at most; beyond, dropped and counted. */
  requestLogBuffer: number;
  /**
   * REQUEST_LOG_DATABASE_URL: the request log (its rows and drop counts) on a PostgreSQL database
   * of its own (src/db/request-log-database.ts); the usage rollup stays on DATABASE_URL. Unset:
   * everything on DATABASE_URL.
   */
  requestLogDatabaseUrl: string | undefined;
  sessionSecret: string;
  /** METRICS_TOKEN: serve GET /metrics to `Bearer <token>` (unset: no /metrics, no metrics). */
  metricsToken: string | null;
  /**
   * false when SESSION_SECRET was generated for development (reported by GET /health as
   * config_ready).
   */
  sessionSecretConfigured: boolean;
  nodeEnv: string;
  logLevel: string;
  /**
   * TRUST_PROXY: whose X-Forwarded-For to believe for the client IP (rate limits per IP).
   * false (default): the peer address; true: any proxy; a number: that many hops; otherwise a
   * comma-separated list of proxy addresses or CIDR ranges.
   */
  trustProxy: boolean | number | string;
  /** SHUTDOWN_TIMEOUT_MS: after SIGTERM/SIGINT, exit anyway when draining takes longer. */
  shutdownTimeoutMs: number;
}

interface ReplicaConfig {
  /** DATABASE_REPLICA_URL: a postgres:// URL of a hot standby of DATABASE_URL's server. */
  url: string;
  /** DATABASE_REPLICA_MAX_LAG_MS: skipped while it is further behind (default 5000). */
  maxLagMs: number;
  /** DATABASE_REPLICA_POOL_SIZE: its postgres.js pool (default 5). */
  poolSize: number;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

/**
 * The PostgreSQL pool's connections per process (src/db/postgres.ts): searches running at once
 * (SEARCH_CONCURRENCY) stay below it, each holding one for its transaction.
 */
const POOL_SIZE = 10;

const DEFAULT_RETRY_SCHEDULE = '5,300,1800,7200,18000,36000,50400,72000,86400';
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be an integer, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max)
    throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

/** A PostgreSQL setting's spelling (on/off), or the true/false of the other flags. */
function onOff(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'on' || raw === 'true') return true;
  if (raw === 'off' || raw === 'false') return false;
  throw new ConfigError(`${name} must be on or off, got "${raw}"`);
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL (${protocols.join(' or ')})`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return raw;
}

export function loadConfig(env: Env = process.env): Config {
  const nodeEnv = env.NODE_ENV ?? 'development';
  const port = integer(env, 'PORT', 3000, 0, 65535);
  const host = env.HOST || '127.0.0.1';
  const baseUrl = (
    url(env, 'BASE_URL', ['http:', 'https:']) ??
    `http://${host.includes(':') ? `[${host}]` : host}:${port}`
  ).replace(/\/+$/, '');

  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl !== undefined && databaseUrl !== 'memory://') {
    url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  }
  const databaseDirectUrl = url(env, 'DATABASE_DIRECT_URL', ['postgres:', 'postgresql:']);
  if (databaseDirectUrl !== undefined && (databaseUrl === undefined || databaseUrl === 'memory://'))
    throw new ConfigError('DATABASE_DIRECT_URL needs a postgres:// DATABASE_URL (the pooler)');

  const databaseReplica = replicaConfig(env, databaseUrl);
  const requestLogDatabaseUrl = requestLogDatabase(env, databaseUrl);

  const schedule = (env.WEBHOOK_RETRY_SCHEDULE || DEFAULT_RETRY_SCHEDULE)
    .split(',')
    .map((s) => s.trim());
  if (schedule.some((s) => !/^\d+$/.test(s))) {
    throw new ConfigError(
      'WEBHOOK_RETRY_SCHEDULE must be comma-separated whole seconds, e.g. 5,300,1800',
    );
  }

  let sessionSecret = env.SESSION_SECRET ?? '';
  const sessionSecretConfigured = sessionSecret !== '';
  if (!sessionSecretConfigured) {
    if (nodeEnv === 'production')
      throw new ConfigError('SESSION_SECRET is required when NODE_ENV=production');
    sessionSecret = randomBytes(32).toString('base64url');
  } else if (sessionSecret.length < 32) {
    throw new ConfigError('SESSION_SECRET must be at least 32 characters');
  }

  const logLevel = env.LOG_LEVEL || (nodeEnv === 'test' ? 'silent' : 'info');
  if (!LOG_LEVELS.includes(logLevel))
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);

  const rawTrustProxy = (env.TRUST_PROXY ?? '').trim();
  let trustProxy: boolean | number | string = false;
  if (rawTrustProxy === '' || rawTrustProxy === 'false' || rawTrustProxy === '0')
    trustProxy = false;
  else if (rawTrustProxy === 'true') trustProxy = true;
  else if (/^\d+$/.test(rawTrustProxy)) trustProxy = Number(rawTrustProxy);
  else if (/^[0-9A-Fa-f.:/]+(\s*,\s*[0-9A-Fa-f.:/]+)*$/.test(rawTrustProxy))
    trustProxy = rawTrustProxy;
  else
    throw new ConfigError(
      'TRUST_PROXY must be true, false, a hop count or comma-separated proxy addresses/CIDR ranges',
    );

  const metricsToken = env.METRICS_TOKEN ?? '';
  // A bearer token the scraper sends: long enough not to be guessed, header-safe characters.
  if (metricsToken !== '' && !/^[A-Za-z0-9._~+/=-]{16,512}$/.test(metricsToken))
    throw new ConfigError('METRICS_TOKEN must be 16-512 characters of A-Z a-z 0-9 . _ ~ + / = -');

  const eventsWaitMaxPerCredential = integer(env, 'EVENTS_WAIT_MAX_PER_CREDENTIAL', 5, 1, 1000);
  return {
    port,
    host,
    baseUrl,
    databaseUrl,
    databaseReplica,
    databaseDirectUrl,
    databasePreparedStatements: onOff(
      env,
      'DATABASE_PREPARED_STATEMENTS',
      databaseDirectUrl === undefined,
    ),
    pgliteDir: env.PGLITE_DIR || './.data/pglite',
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    rateLimitMax: integer(env, 'RATE_LIMIT_MAX', 300, 1, 1_000_000),
    rateLimitWindowMs: integer(env, 'RATE_LIMIT_WINDOW_MS', 60_000, 1000, 86_400_000),
    rateLimitTokenMax: integer(env, 'RATE_LIMIT_TOKEN_MAX', 30, 1, 1_000_000),
    rateLimitSignInMax: integer(env, 'RATE_LIMIT_SIGNIN_MAX', 10, 1, 1_000_000),
    rateLimitSignInClientFailures: integer(
      env,
      'RATE_LIMIT_SIGNIN_CLIENT_FAILURES',
      5,
      1,
      1_000_000,
    ),
    rateLimitSignInUsernameFailures: integer(
      env,
      'RATE_LIMIT_SIGNIN_USERNAME_FAILURES',
      100,
      1,
      1_000_000,
    ),
    webhookTimeoutMs: integer(env, 'WEBHOOK_TIMEOUT_MS', 8000, 100, 60_000),
    webhookConcurrency: integer(env, 'WEBHOOK_CONCURRENCY', 32, 1, 1000),
    webhookEndpointConcurrency: integer(env, 'WEBHOOK_ENDPOINT_CONCURRENCY', 4, 1, 100),
    webhookRetryScheduleS: schedule.map(Number),
    webhookAllowPrivateNetworks: boolean(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS', false),
    webhookWorker: boolean(env, 'WEBHOOK_WORKER', true),
    databasePoolWaitMs: integer(env, 'DATABASE_POOL_WAIT_MS', 2000, 10, 600_000),
    searchTimeoutMs: integer(env, 'SEARCH_TIMEOUT_MS', 2000, 1, 60_000),
    searchConcurrency: integer(env, 'SEARCH_CONCURRENCY', 4, 1, POOL_SIZE - 1),
    searchQueue: integer(env, 'SEARCH_QUEUE', 16, 0, 10_000),
    searchQueueWaitMs: integer(env, 'SEARCH_QUEUE_WAIT_MS', 1000, 1, 60_000),
    syncSettleMs: integer(env, 'SYNC_SETTLE_MS', 5000, 0, 600_000),
    eventsWaitMax: integer(env, 'EVENTS_WAIT_MAX', 1000, 1, 100_000),
    eventsWaitMaxPerCredential,
    eventsWaitMaxPerUser: integer(env, 'EVENTS_WAIT_MAX_PER_USER', 5, 1, 1000),
    eventsWaitMaxPerApp: eventsWaitMaxPerApp(env, eventsWaitMaxPerCredential),
    eventsWaitMaxPerOwner: integer(env, 'EVENTS_WAIT_MAX_PER_OWNER', 50, 1, 100_000),
    requestLogs: boolean(env, 'REQUEST_LOGS', true),
    requestLogBuffer: integer(env, 'REQUEST_LOG_BUFFER', 10_000, 1, 1_000_000),
    requestLogDatabaseUrl,
    sessionSecret,
    metricsToken: metricsToken || null,
    sessionSecretConfigured,
    nodeEnv,
    logLevel,
    trustProxy,
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 25_000, 100, 600_000),
  };
}

/**
 * EVENTS_WAIT_MAX_PER_APP: above EVENTS_WAIT_MAX_PER_CREDENTIAL, whose number of the app's places
 * its OAuth tokens cannot take (src/events/event-waiters.ts): they keep one key's share.
 */
function eventsWaitMaxPerApp(env: Env, perCredential: number): number {
  const perApp = integer(env, 'EVENTS_WAIT_MAX_PER_APP', 20, 2, 100_000);
  if (perApp <= perCredential)
    throw new ConfigError(
      `EVENTS_WAIT_MAX_PER_APP must be greater than EVENTS_WAIT_MAX_PER_CREDENTIAL (${perCredential}): the app's keys keep that many of its places`,
    );
  return perApp;
}

/** DATABASE_REPLICA_*: only beside a PostgreSQL DATABASE_URL (the embedded one has no replica). */
function replicaConfig(env: Env, databaseUrl: string | undefined): ReplicaConfig | null {
  const maxLagMs = integer(env, 'DATABASE_REPLICA_MAX_LAG_MS', 5000, 100, 600_000);
  const poolSize = integer(env, 'DATABASE_REPLICA_POOL_SIZE', 5, 1, 100);
  const replicaUrl = url(env, 'DATABASE_REPLICA_URL', ['postgres:', 'postgresql:']);
  if (replicaUrl === undefined) return null;
  if (databaseUrl === undefined || databaseUrl === 'memory://')
    throw new ConfigError(
      'DATABASE_REPLICA_URL needs a PostgreSQL DATABASE_URL (postgres://): the embedded database has no replica',
    );
  return { url: replicaUrl, maxLagMs, poolSize };
}

/**
 * REQUEST_LOG_DATABASE_URL: only beside a PostgreSQL DATABASE_URL (the embedded database is one
 * process's: the log has nowhere else to go), and another database than it.
 */
function requestLogDatabase(env: Env, databaseUrl: string | undefined): string | undefined {
  const logUrl = url(env, 'REQUEST_LOG_DATABASE_URL', ['postgres:', 'postgresql:']);
  if (logUrl === undefined) return undefined;
  if (databaseUrl === undefined || databaseUrl === 'memory://')
    throw new ConfigError(
      'REQUEST_LOG_DATABASE_URL needs a PostgreSQL DATABASE_URL (postgres://): the embedded database keeps the request log',
    );
  if (logUrl === databaseUrl)
    throw new ConfigError(
      'REQUEST_LOG_DATABASE_URL must name another database than DATABASE_URL (unset it to keep the log there)',
    );
  return logUrl;
}
