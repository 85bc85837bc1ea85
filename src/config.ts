import { randomBytes } from 'node:crypto';
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

/**
 * Configuration from the environment, validated once at boot, from one schema (VARIABLES below):
 * each variable's name, type and bounds, default and documentation. It gives the `Config` type,
 * the validation (a bad value throws a ConfigError whose message is one line naming the
 * variable; the server entry prints it and exits) and the table of docs/configuration.md
 * (`npm run docs:config` writes it, `npm run lint:config` checks it). What relates one variable
 * to another is the short list of rules in loadConfig.
 */

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

/** A variable's documentation: its name, its default as the table shows it, what it means. */
interface Documented {
  env: string;
  shown: string;
  doc: string;
}

/**
 * How a variable's text becomes its value (throwing a ConfigError for text of the wrong kind),
 * and the message for a value of the right kind outside the schema (after "NAME ").
 */
interface Parsing {
  parse?: (raw: string, env: string) => unknown;
  invalid?: (value: unknown) => string;
}

/**
 * The PostgreSQL pool's connections per process (src/db/postgres.ts): searches running at once
 * (SEARCH_CONCURRENCY) stay below it, each holding one for its transaction.
 */
const POOL_SIZE = 10;

const DEFAULT_RETRY_SCHEDULE = '5,300,1800,7200,18000,36000,50400,72000,86400';
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const PROXIES = /^[0-9A-Fa-f.:/]+(\s*,\s*[0-9A-Fa-f.:/]+)*$/;

function wholeNumber(raw: string, env: string): number {
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${env} must be an integer, got "${raw}"`);
  return Number(raw);
}

/** The one grammar of every on/off variable. */
function onOff(raw: string, env: string): boolean {
  if (raw === 'true' || raw === '1' || raw === 'on') return true;
  if (raw === 'false' || raw === '0' || raw === 'off') return false;
  throw new ConfigError(`${env} must be true or false (or 1/0, on/off), got "${raw}"`);
}

function urlOf(protocols: string[]) {
  return (raw: string, env: string): string => {
    let parsed: URL;
    try {
      parsed = new URL(raw);
    } catch {
      throw new ConfigError(`${env} must be a URL (${protocols.join(' or ')})`);
    }
    if (!protocols.includes(parsed.protocol))
      throw new ConfigError(`${env} must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
    return raw;
  };
}

function secondsList(raw: string, env: string): number[] {
  const list = raw.split(',').map((s) => s.trim());
  if (list.some((s) => !/^\d+$/.test(s)))
    throw new ConfigError(`${env} must be comma-separated whole seconds, e.g. 5,300,1800`);
  return list.map(Number);
}

const integer = (doc: Documented, fallback: number, minimum: number, maximum: number) =>
  Type.Integer({
    ...doc,
    default: fallback,
    minimum,
    maximum,
    parse: wholeNumber,
    invalid: (value: unknown) => `must be between ${minimum} and ${maximum}, got ${value}`,
  });
const flag = (doc: Documented, fallback: boolean | undefined) =>
  Type.Boolean({ ...doc, default: fallback, parse: onOff });
const text = (doc: Documented, fallback: string) => Type.String({ ...doc, default: fallback });
const optional = (doc: Documented & Parsing) => Type.Union([Type.String(), Type.Undefined()], doc);
const url = (doc: Documented, protocols: string[]) => optional({ ...doc, parse: urlOf(protocols) });
const seconds = (doc: Documented, fallback: string) =>
  Type.Array(Type.Integer({ minimum: 0 }), {
    ...doc,
    default: secondsList(fallback, doc.env),
    parse: secondsList,
  });
/** undefined: the embedded database; memory:// or a postgres:// URL. */
const databaseUrl = (doc: Documented) =>
  optional({
    ...doc,
    parse: (raw, env) =>
      raw === 'memory://' ? raw : urlOf(['postgres:', 'postgresql:'])(raw, env),
  });
/**
 * false: the peer address; true: any proxy; a number: that many hops; otherwise a
 * comma-separated list of proxy addresses or CIDR ranges.
 */
const trustProxy = (doc: Documented) =>
  Type.Union(
    [Type.Boolean(), Type.Integer({ minimum: 0 }), Type.String({ pattern: PROXIES.source })],
    {
      ...doc,
      default: false,
      parse: (raw: string) => {
        const value = raw.trim();
        if (value === '' || value === 'false' || value === '0') return false;
        if (value === 'true') return true;
        return /^\d+$/.test(value) ? Number(value) : value;
      },
      invalid: () =>
        'must be true, false, a hop count or comma-separated proxy addresses/CIDR ranges',
    },
  );
/** Set, or generated for development (the rules below). */
const sessionSecret = (doc: Documented) =>
  Type.String({
    ...doc,
    minLength: 32,
    invalid: () => 'must be at least 32 characters',
  });
/** A bearer token the scraper sends: long enough not to be guessed, header-safe characters. */
const metricsToken = (doc: Documented) =>
  Type.Union([Type.String({ pattern: '^[A-Za-z0-9._~+/=-]{16,512}$' }), Type.Null()], {
    ...doc,
    default: null,
    invalid: () => 'must be 16-512 characters of A-Z a-z 0-9 . _ ~ + / = -',
  });
const logLevel = (doc: Documented) =>
  Type.Union(
    LOG_LEVELS.map((level) => Type.Literal(level)),
    { ...doc, invalid: () => `must be one of ${LOG_LEVELS.join(', ')}` },
  );

/** Every variable, in the order of docs/configuration.md's table. */
const VARIABLES = Type.Object({
  port: integer({ env: 'PORT', shown: '`3000`', doc: 'the port to listen on' }, 3000, 0, 65535),
  host: text({ env: 'HOST', shown: '`127.0.0.1`', doc: 'the address to listen on' }, '127.0.0.1'),
  baseUrl: url(
    {
      env: 'BASE_URL',
      shown: '`http://HOST:PORT`',
      doc: 'public URL, used in the served OpenAPI document, OAuth metadata and redirects',
    },
    ['http:', 'https:'],
  ),
  databaseUrl: databaseUrl({
    env: 'DATABASE_URL',
    shown:
      'unset: embedded PGlite in `./.data/pglite`; `memory://`: in-memory PGlite (started from a migrated snapshot cached under `node_modules/.cache`: [development](development.md#the-embedded-database-in-tests))',
    doc: 'a `postgres://` URL selects PostgreSQL',
  }),
  pgliteDir: text(
    { env: 'PGLITE_DIR', shown: '`./.data/pglite`', doc: 'where the embedded database lives' },
    './.data/pglite',
  ),
  redisUrl: url(
    {
      env: 'REDIS_URL',
      shown: 'unset: in-memory counters (per process)',
      doc: '`redis://` or `rediss://`: rate-limit counters shared by every instance; if Redis fails, counters fall back to memory (logged once) and return to Redis when it is back',
    },
    ['redis:', 'rediss:'],
  ),
  rateLimitMax: integer(
    {
      env: 'RATE_LIMIT_MAX',
      shown: '`300`',
      doc: 'requests per credential per window (per IP when anonymous or when the credential is rejected)',
    },
    300,
    1,
    1_000_000,
  ),
  rateLimitWindowMs: integer(
    {
      env: 'RATE_LIMIT_WINDOW_MS',
      shown: '`60000`',
      doc: 'the window of `RATE_LIMIT_MAX`, in milliseconds',
    },
    60_000,
    1000,
    86_400_000,
  ),
  rateLimitTokenMax: integer(
    {
      env: 'RATE_LIMIT_TOKEN_MAX',
      shown: '`30`',
      doc: 'per client IP per minute: `/oauth/token` + `/oauth/revoke`',
    },
    30,
    1,
    1_000_000,
  ),
  rateLimitSignInMax: integer(
    {
      env: 'RATE_LIMIT_SIGNIN_MAX',
      shown: '`10`',
      doc: 'per client IP per minute: sign-in attempts (the only per-IP sign-in limit)',
    },
    10,
    1,
    1_000_000,
  ),
  rateLimitSignInClientFailures: integer(
    {
      env: 'RATE_LIMIT_SIGNIN_CLIENT_FAILURES',
      shown: '`5`',
      doc: 'failed sign-ins for one username from one client per 15 minutes (see [sign-in limits](configuration.md#sign-in-limits))',
    },
    5,
    1,
    1_000_000,
  ),
  rateLimitSignInUsernameFailures: integer(
    {
      env: 'RATE_LIMIT_SIGNIN_USERNAME_FAILURES',
      shown: '`100`',
      doc: 'failed sign-ins for one username from all unknown browsers per hour (see [sign-in limits](configuration.md#sign-in-limits))',
    },
    100,
    1,
    1_000_000,
  ),
  trustProxy: trustProxy({
    env: 'TRUST_PROXY',
    shown: '`false`',
    doc: "behind a load balancer: `true`, a hop count, or the proxies' addresses/CIDR ranges (comma-separated), so the client IP (per-IP limits) comes from `X-Forwarded-For`",
  }),
  shutdownTimeoutMs: integer(
    {
      env: 'SHUTDOWN_TIMEOUT_MS',
      shown: '`25000`',
      doc: "after SIGTERM/SIGINT or a fatal error, the drain's deadline: each step has its share ([operations.md](operations.md#graceful-shutdown)); exit anyway (code 1) if it takes longer",
    },
    25_000,
    100,
    600_000,
  ),
  shutdownDelayMs: integer(
    {
      env: 'SHUTDOWN_DELAY_MS',
      shown: '`0`',
      doc: "after SIGTERM/SIGINT, how long the server goes on serving, with `/api/v1/health` answering 503, before the drain begins: at least the time a load balancer's health check takes to mark it down ([operations.md](operations.md#rolling-restarts)); the drain's deadline counts after it",
    },
    0,
    0,
    60_000,
  ),
  webhookTimeoutMs: integer(
    { env: 'WEBHOOK_TIMEOUT_MS', shown: '`8000`', doc: 'webhook delivery timeout' },
    8000,
    100,
    60_000,
  ),
  webhookConcurrency: integer(
    {
      env: 'WEBHOOK_CONCURRENCY',
      shown: '`32`',
      doc: 'delivery attempts one process sends at once (1-1000; [operations](operations.md#webhook-delivery))',
    },
    32,
    1,
    1000,
  ),
  webhookEndpointConcurrency: integer(
    {
      env: 'WEBHOOK_ENDPOINT_CONCURRENCY',
      shown: '`4`',
      doc: 'delivery attempts one process sends to one endpoint at once (1-100)',
    },
    4,
    1,
    100,
  ),
  webhookRetryScheduleS: seconds(
    {
      env: 'WEBHOOK_RETRY_SCHEDULE',
      shown: '`5,300,1800,7200,18000,36000,50400,72000,86400`',
      doc: 'seconds between delivery attempts',
    },
    DEFAULT_RETRY_SCHEDULE,
  ),
  webhookAllowPrivateNetworks: flag(
    {
      env: 'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
      shown: '`false`',
      doc: '`true` lets webhook URLs reach loopback and private addresses: development and tests only',
    },
    false,
  ),
  webhookWorker: flag(
    {
      env: 'WEBHOOK_WORKER',
      shown: '`true`',
      doc: "run the webhook delivery worker in this process: it sends the outbox's deliveries (any number of processes may run it on one PostgreSQL; [operations](operations.md#what-each-process-runs))",
    },
    true,
  ),
  savedSearchMatcher: flag(
    {
      env: 'SAVED_SEARCH_MATCHER',
      shown: '`true`',
      doc: "run the saved searches' matcher in this process: it matches listing writes against the saved searches and records their `listing.matched` events, whether or not this process delivers webhooks (any number of processes may run it on one PostgreSQL; [operations](operations.md#what-each-process-runs))",
    },
    true,
  ),
  databasePoolWaitMs: integer(
    {
      env: 'DATABASE_POOL_WAIT_MS',
      shown: '`2000`',
      doc: 'PostgreSQL: the longest a request waits for the database, in all its statements and transactions: for room on the pool\'s 10 connections (once every one is full, 100 statements pipelined, or held by a transaction), and through an outage; beyond it the request is answered `503 service_unavailable` with `Retry-After` instead of queueing without bound ([operations](operations.md), "Saturation"); the background workers\' statements wait it each',
    },
    2000,
    10,
    600_000,
  ),
  databaseDirectUrl: url(
    {
      env: 'DATABASE_DIRECT_URL',
      shown: 'unset: `DATABASE_URL`',
      doc: 'PostgreSQL without a pooler in between, for what needs a session of its own: migrations (and their lock) and every `LISTEN`. Set it when `DATABASE_URL` is a pooler in transaction mode; only valid with a `postgres://` `DATABASE_URL` ([below](#behind-a-connection-pooler))',
    },
    ['postgres:', 'postgresql:'],
  ),
  databasePreparedStatements: flag(
    {
      env: 'DATABASE_PREPARED_STATEMENTS',
      shown: '`on`; `off` when `DATABASE_DIRECT_URL` is set',
      doc: "`on`/`off` (or `true`/`false`, `1`/`0`, as every on/off variable): run the pool's statements as named prepared statements (parsed and planned once per connection). `off` behind PgBouncer before 1.21; `on` behind PgBouncer 1.21+ with `max_prepared_statements` above 0 ([below](#behind-a-connection-pooler))",
    },
    undefined,
  ),
  searchTimeoutMs: integer(
    {
      env: 'SEARCH_TIMEOUT_MS',
      shown: '`2000`',
      doc: 'PostgreSQL: the safety net of a search page of `GET /api/v1/listings` (`q`, a filter or a `sort`), whose work is bounded by design (OpenAPI "Search and sync"): searches run on a pool of their own (half of the pool\'s size, 5) whose connections start with this `statement_timeout`, so a search is one statement with no transaction around it; a search PostgreSQL cancels is answered `503 service_unavailable` asking to narrow it. The read replica\'s connections (`DATABASE_REPLICA_URL`) start with it too. Behind a transaction-mode pooler (`DATABASE_DIRECT_URL` set) searches run on the pool without it: PgBouncer passes no `statement_timeout` startup parameter, so set it on the database role instead (`ALTER ROLE ... SET statement_timeout`). The plain feed has no such budget. PGlite (embedded, single-process) runs no statement timers: there a search runs to its end',
    },
    2000,
    1,
    60_000,
  ),
  searchConcurrency: integer(
    {
      env: 'SEARCH_CONCURRENCY',
      shown: '`4`',
      doc: "search pages of `GET /api/v1/listings` (any parameter but `limit`, `cursor`, `sort=newest`) one process runs at once (1-9). On PostgreSQL reached directly searches run on a pool of their own (5 connections, `SEARCH_TIMEOUT_MS`); behind a transaction-mode pooler each holds one of the pool's 10 connections while it runs, so the cap stays below the pool: with 4, six connections are always left to reads by id, feed pages (pipelined, many per connection) and writes' transactions. Reads by id, feed pages and writes never wait for it ([operations](operations.md#fair-share))",
    },
    4,
    1,
    POOL_SIZE - 1,
  ),
  searchQueue: integer(
    {
      env: 'SEARCH_QUEUE',
      shown: '`16`',
      doc: 'searches that may wait for a place beyond those (0-10000; `0`: none wait, a search beyond `SEARCH_CONCURRENCY` is refused at once); beyond, `503 service_unavailable` with `Retry-After: 1`',
    },
    16,
    0,
    10_000,
  ),
  searchQueueWaitMs: integer(
    {
      env: 'SEARCH_QUEUE_WAIT_MS',
      shown: '`1000`',
      doc: 'the longest a search waits for a place (1-60000 ms), then `503 service_unavailable` with `Retry-After: 1`; under `DATABASE_POOL_WAIT_MS`, so a search is answered within its wait and `SEARCH_TIMEOUT_MS`',
    },
    1000,
    1,
    60_000,
  ),
  syncSettleMs: integer(
    {
      env: 'SYNC_SETTLE_MS',
      shown: '`5000`',
      doc: 'how old a change must be before `sort=updated_at` lists it, so that a change whose transaction is still committing never falls behind a sync client\'s cursor (OpenAPI "Search and sync"). Raise it if writes can take longer; `0` lists changes at once and gives up that promise',
    },
    5000,
    0,
    600_000,
  ),
  databaseReplicaUrl: url(
    {
      env: 'DATABASE_REPLICA_URL',
      shown: 'unset: every read on `DATABASE_URL`',
      doc: "a `postgres://` URL of a streaming replica (hot standby) of `DATABASE_URL`'s server: anonymous listing reads go to it while it is within `DATABASE_REPLICA_MAX_LAG_MS` ([operations](operations.md#read-replica)). Only beside a `postgres://` `DATABASE_URL` (the embedded database has no replica: a configuration error). The standby itself or a session-mode pooler, not a transaction-mode one: its sessions are read-only by a startup setting, and its statements are prepared",
    },
    ['postgres:', 'postgresql:'],
  ),
  databaseReplicaMaxLagMs: integer(
    {
      env: 'DATABASE_REPLICA_MAX_LAG_MS',
      shown: '`5000`',
      doc: "how far behind the primary the replica may be (100-600000 ms) before reads skip it; the default is the anonymous answers' `max-age`, the same staleness budget",
    },
    5000,
    100,
    600_000,
  ),
  databaseReplicaPoolSize: integer(
    {
      env: 'DATABASE_REPLICA_POOL_SIZE',
      shown: '`5`',
      doc: "connections of the replica's own pool per process (1-100), read-only sessions, statements prepared as on the primary; a read waits `DATABASE_POOL_WAIT_MS` for one, then runs on the primary",
    },
    5,
    1,
    100,
  ),
  eventsWaitMax: integer(
    {
      env: 'EVENTS_WAIT_MAX',
      shown: '`1000`',
      doc: 'requests one process holds waiting on `GET /api/v1/events?wait=` at once (1-100000); beyond, `503 service_unavailable` with `Retry-After: 5` ([webhooks.md](webhooks.md#polling-instead-of-webhooks))',
    },
    1000,
    1,
    100_000,
  ),
  eventsWaitMaxPerCredential: integer(
    {
      env: 'EVENTS_WAIT_MAX_PER_CREDENTIAL',
      shown: '`5`',
      doc: 'the same per API key or OAuth token (1-1000); beyond, `429 rate_limited` with `Retry-After: 5`',
    },
    5,
    1,
    1000,
  ),
  eventsWaitMaxPerUser: integer(
    {
      env: 'EVENTS_WAIT_MAX_PER_USER',
      shown: '`5`',
      doc: "the same per end user of an app, all the user's OAuth tokens of the app together, whatever their authorization or refresh (1-1000); beyond, `429 rate_limited` with `Retry-After: 5`, so one user cannot take the app's places",
    },
    5,
    1,
    1000,
  ),
  eventsWaitMaxPerApp: integer(
    {
      env: 'EVENTS_WAIT_MAX_PER_APP',
      shown: '`20`',
      doc: "the same per app and environment, all its keys and tokens together (2-100000, greater than `EVENTS_WAIT_MAX_PER_CREDENTIAL`: the app's OAuth tokens, all its users together, hold at most this minus `EVENTS_WAIT_MAX_PER_CREDENTIAL`, 15 by default, so its API keys keep one key's share); beyond, `429 rate_limited` with `Retry-After: 5`, checked before `EVENTS_WAIT_MAX`, so one app cannot take every place",
    },
    20,
    2,
    100_000,
  ),
  eventsWaitMaxPerOwner: integer(
    {
      env: 'EVENTS_WAIT_MAX_PER_OWNER',
      shown: '`50`',
      doc: "the same per developer account, all the apps it owns in both environments, their keys and their users' tokens together (1-100000); beyond, `429 rate_limited` with `Retry-After: 5`, checked before `EVENTS_WAIT_MAX`, so one developer with many apps cannot take every place",
    },
    50,
    1,
    100_000,
  ),
  requestLogs: flag(
    {
      env: 'REQUEST_LOGS',
      shown: '`true`',
      doc: "keep the portal's request log of `/api/v1` requests made with apps' keys and tokens and its usage rollup, the Overview's chart (docs/portal.md); `false` turns recording and the chart off. On PostgreSQL the log is written on one connection of its own besides the pool ([operations](operations.md), \"Connections\") (on `REQUEST_LOG_DATABASE_URL`'s database when it is set)",
    },
    true,
  ),
  requestLogBuffer: integer(
    {
      env: 'REQUEST_LOG_BUFFER',
      shown: '`10000`',
      doc: 'requests waiting to be written at most (about 0.5 KB each); beyond it new ones are dropped and counted, never delayed. Written every 50 ms or per 500',
    },
    10_000,
    1,
    1_000_000,
  ),
  requestLogDatabaseUrl: url(
    {
      env: 'REQUEST_LOG_DATABASE_URL',
      shown: 'unset: the log on `DATABASE_URL`',
      doc: "a `postgres://` URL of another database (on the same server or another) for the request log's rows and drop counts, to take their writes off the primary; the usage rollup, and the keys and users the rows name, stay on `DATABASE_URL` ([operations](operations.md#request-log-database)). Migrated at start (its own migrations, `drizzle/request-log/`), so it must be reachable then; while running, its outage costs log entries only (dropped and counted), never a request. Only beside a `postgres://` `DATABASE_URL`, and not the same URL: otherwise a configuration error. PostgreSQL itself or a pooler in any mode, transaction mode included: its statements are neither prepared nor pipelined and nothing on it depends on a session. Three connections per process: one for the writes, two for the portal's pages, `admin app logs` and the partition keeper",
    },
    ['postgres:', 'postgresql:'],
  ),
  auditRetentionDays: integer(
    {
      env: 'AUDIT_RETENTION_DAYS',
      shown: '`400`',
      doc: "days an app's audit log entries are kept (366-3660): the log is partitioned by week and a week's partition is dropped once its newest entry is this old, so an entry is kept up to a week longer ([operations](operations.md#the-audit-logs-retention))",
    },
    400,
    366,
    3660,
  ),
  sessionSecret: sessionSecret({
    env: 'SESSION_SECRET',
    shown: 'generated (development); required when `NODE_ENV=production`',
    doc: "key of the pages' CSRF tokens (HMAC), at least 32 characters",
  }),
  metricsToken: metricsToken({
    env: 'METRICS_TOKEN',
    shown: 'unset: no `/metrics`, nothing measured',
    doc: 'serve Prometheus metrics at `GET /metrics` to `Authorization: Bearer <token>` ([metrics](metrics.md))',
  }),
  nodeEnv: text(
    {
      env: 'NODE_ENV',
      shown: '`development`',
      doc: '`production` requires `SESSION_SECRET`; `test` makes `LOG_LEVEL` default to `silent`; `development` logs readable lines when stdout is a terminal ([operations](operations.md#logs))',
    },
    'development',
  ),
  logLevel: logLevel({
    env: 'LOG_LEVEL',
    shown: '`info` (`silent` under `NODE_ENV=test`)',
    doc: 'pino log level',
  }),
});

type Variables = Static<typeof VARIABLES>;

interface ReplicaConfig {
  /** DATABASE_REPLICA_URL: a postgres:// URL of a hot standby of DATABASE_URL's server. */
  url: string;
  /** DATABASE_REPLICA_MAX_LAG_MS: skipped while it is further behind. */
  maxLagMs: number;
  /** DATABASE_REPLICA_POOL_SIZE: its postgres.js pool. */
  poolSize: number;
}

/** The variables' values (VARIABLES says what each means), as the rules below leave them. */
export type Config = Omit<
  Variables,
  'baseUrl' | 'databaseReplicaUrl' | 'databaseReplicaMaxLagMs' | 'databaseReplicaPoolSize'
> & {
  baseUrl: string;
  /** DATABASE_REPLICA_*: a streaming replica for anonymous reads (src/db/replica.ts), or null. */
  databaseReplica: ReplicaConfig | null;
  /** false when SESSION_SECRET was generated for development (GET /health: session_secret). */
  sessionSecretConfigured: boolean;
};

/** Each variable as docs/configuration.md's table shows it (scripts/config-docs.ts). */
export function documentedVariables(): Documented[] {
  return Object.values(VARIABLES.properties).map((schema: TSchema) => {
    const { env, shown, doc } = schema as unknown as Documented;
    return { env, shown, doc };
  });
}

/** One variable's value: its default when unset or empty, else its text parsed and checked. */
function read(schema: TSchema & Documented & Parsing, env: Env): unknown {
  const raw = env[schema.env];
  if (raw === undefined || raw === '') return schema.default;
  const value = schema.parse ? schema.parse(raw, schema.env) : raw;
  if (!Value.Check(schema, value))
    throw new ConfigError(`${schema.env} ${schema.invalid?.(value) ?? 'is not valid'}`);
  return value;
}

const isPostgres = (url: string | undefined) => url !== undefined && url !== 'memory://';

export function loadConfig(env: Env = process.env): Config {
  const v = Object.fromEntries(
    Object.entries(VARIABLES.properties).map(([key, schema]) => [
      key,
      read(schema as unknown as TSchema & Documented & Parsing, env),
    ]),
  ) as Variables;

  // The rules across variables.
  // 1. BASE_URL defaults to the listen address; never with a trailing slash.
  const host = v.host.includes(':') ? `[${v.host}]` : v.host;
  const baseUrl = (v.baseUrl ?? `http://${host}:${v.port}`).replace(/\/+$/, '');
  // 2. DATABASE_DIRECT_URL says DATABASE_URL is a pooler: it needs a PostgreSQL one, and turns
  //    DATABASE_PREPARED_STATEMENTS off by default (PgBouncer before 1.21 cannot pass them on).
  if (v.databaseDirectUrl !== undefined && !isPostgres(v.databaseUrl))
    throw new ConfigError('DATABASE_DIRECT_URL needs a postgres:// DATABASE_URL (the pooler)');
  const databasePreparedStatements =
    v.databasePreparedStatements ?? v.databaseDirectUrl === undefined;
  // 3. A read replica only beside a PostgreSQL DATABASE_URL (the embedded one has none).
  if (v.databaseReplicaUrl !== undefined && !isPostgres(v.databaseUrl))
    throw new ConfigError(
      'DATABASE_REPLICA_URL needs a PostgreSQL DATABASE_URL (postgres://): the embedded database has no replica',
    );
  // 4. The request log's own database only beside a PostgreSQL DATABASE_URL (the embedded
  //    database is one process's: the log has nowhere else to go), and another one than it.
  if (v.requestLogDatabaseUrl !== undefined && !isPostgres(v.databaseUrl))
    throw new ConfigError(
      'REQUEST_LOG_DATABASE_URL needs a PostgreSQL DATABASE_URL (postgres://): the embedded database keeps the request log',
    );
  if (v.requestLogDatabaseUrl !== undefined && v.requestLogDatabaseUrl === v.databaseUrl)
    throw new ConfigError(
      'REQUEST_LOG_DATABASE_URL must name another database than DATABASE_URL (unset it to keep the log there)',
    );
  // 5. EVENTS_WAIT_MAX_PER_APP above EVENTS_WAIT_MAX_PER_CREDENTIAL, whose number of the app's
  //    places its OAuth tokens cannot take (src/events/event-waiters.ts): one key's share.
  if (v.eventsWaitMaxPerApp <= v.eventsWaitMaxPerCredential)
    throw new ConfigError(
      `EVENTS_WAIT_MAX_PER_APP must be greater than EVENTS_WAIT_MAX_PER_CREDENTIAL (${v.eventsWaitMaxPerCredential}): the app's keys keep that many of its places`,
    );
  // 6. SESSION_SECRET is required in production, and generated for development.
  const sessionSecretConfigured = v.sessionSecret !== undefined;
  if (!sessionSecretConfigured && v.nodeEnv === 'production')
    throw new ConfigError('SESSION_SECRET is required when NODE_ENV=production');
  // 7. LOG_LEVEL defaults to silent under NODE_ENV=test.
  const logLevel = v.logLevel ?? (v.nodeEnv === 'test' ? 'silent' : 'info');

  const { databaseReplicaUrl, databaseReplicaMaxLagMs, databaseReplicaPoolSize, ...rest } = v;
  return {
    ...rest,
    baseUrl,
    databasePreparedStatements,
    databaseReplica:
      databaseReplicaUrl === undefined
        ? null
        : {
            url: databaseReplicaUrl,
            maxLagMs: databaseReplicaMaxLagMs,
            poolSize: databaseReplicaPoolSize,
          },
    sessionSecret: v.sessionSecret ?? randomBytes(32).toString('base64url'),
    sessionSecretConfigured,
    logLevel,
  };
}
