/**
 * Operator metrics in the Prometheus text format at GET /metrics (docs/metrics.md), through
 * prom-client. Off unless METRICS_TOKEN is set: then no registry exists, nothing is counted,
 * and /metrics is an unknown path (404). With it, /metrics answers only
 * `Authorization: Bearer <METRICS_TOKEN>` (compared in constant time; 401 otherwise). It is
 * not an operation of the public API document.
 *
 * Labels come from bounded sets only: the operationId (or the route pattern of a page, or
 * "unmatched"), the method, the status class, the environment, a rate-limit policy, an attempt
 * outcome. Never an id, a key or a username. Each app has its own registry (tests build many
 * apps in one process). Gauges that need a query (the webhook backlog) are read at most once
 * every BACKLOG_TTL_MS, whatever the scrape rate.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Registry } from 'prom-client';
import { isConnectionError } from '../db/errors.ts';
import type { PartitionGauge } from '../db/partitions.ts';
import { UnauthorizedError } from '../errors.ts';
import { safeEqual } from '../lib/secrets.ts';
import type { AttemptOutcome } from '../webhooks/sender.ts';

const METRICS_PATH = '/metrics';
/** The webhook backlog query runs at most this often. */
const BACKLOG_TTL_MS = 5_000;

/** What the rest of the app reports; null on app.metrics when metrics are off. */
interface Metrics {
  readonly registry: Registry;
  rateLimited(policy: string): void;
  webhookAttempt(outcome: AttemptOutcome): void;
  /** A pass of the saved searches' matcher (src/saved-searches/matcher-worker.ts). */
  matchPass(pass: {
    listings: number;
    examined: number;
    matched: number;
    overBudget: number;
  }): void;
  /** Requests the request log could not keep (its buffer was full, or a write failed). */
  requestLogDropped(count: number): void;
  /**
   * Where the webhook backlog gauges read from (the webhooks plugin gives the services' query:
   * this plugin comes before the services and knows nothing of them).
   */
  observeWebhookBacklog(read: () => Promise<WebhookBacklog>): void;
  /** Where the search gate's gauges read from (src/listings/search-gate-plugin.ts). */
  observeSearchGate(read: () => SearchGateState): void;
  /**
   * Where the partition gauges of one database read from (src/plugins/partitions.ts): `database`
   * is their label, `primary` or `request_log` (REQUEST_LOG_DATABASE_URL).
   */
  observePartitions(database: string, read: () => readonly PartitionGauge[]): void;
}

/** The search gate of this process: searches running, waiting, and shed so far by reason. */
interface SearchGateState {
  running: number;
  queued: number;
  shed: Readonly<Record<'queue_full' | 'wait_timeout', number>>;
}

/** The webhook deliveries waiting, across every process. */
interface WebhookBacklog {
  pending: number;
  oldestAgeSeconds: number;
  disabled: number;
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Metrics | null;
  }
}

const statusClass = (code: number) => `${Math.floor(code / 100)}xx`;

/** The operation a request was for: bounded, never a raw URL. */
function operationOf(request: FastifyRequest): string {
  const config = request.routeOptions.config as { operationId?: string } | undefined;
  return config?.operationId ?? request.routeOptions.url ?? 'unmatched';
}

async function createMetrics(app: FastifyInstance): Promise<Metrics> {
  // Loaded only with METRICS_TOKEN: a server without metrics never pays for prom-client.
  const { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } =
    await import('prom-client');
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by operation, method, status class and environment.',
    labelNames: ['operation', 'method', 'status_class', 'environment'] as const,
    registers,
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from the request to its answer, by operation, method and status class.',
    labelNames: ['operation', 'method', 'status_class'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const inFlight = new Gauge({
    name: 'http_requests_in_flight',
    help: 'Requests received and not yet answered.',
    registers,
  });
  const dbUnavailable = new Counter({
    name: 'db_unavailable_responses_total',
    help: 'Requests answered 503 because the database was unreachable.',
    registers,
  });
  const rateLimited = new Counter({
    name: 'rate_limit_refusals_total',
    help: 'Requests refused with 429, by rate-limit policy.',
    labelNames: ['policy'] as const,
    registers,
  });
  const logDrops = new Counter({
    name: 'request_log_dropped_total',
    help: 'API requests the request log did not keep (buffer full or write failed).',
    registers,
  });
  const attempts = new Counter({
    name: 'webhook_attempts_total',
    help: 'Webhook delivery attempts made by this process, by outcome.',
    labelNames: ['outcome'] as const,
    registers,
  });

  const matchCounters = {
    listings: new Counter({
      name: 'saved_search_listings_total',
      help: 'Listing writes matched against the saved searches by this process.',
      registers,
    }),
    examined: new Counter({
      name: 'saved_search_candidates_total',
      help: 'Saved searches examined (found by key, then checked) for those writes.',
      registers,
    }),
    matched: new Counter({
      name: 'saved_search_matches_total',
      help: 'New matches: listing.matched events recorded.',
      registers,
    }),
    overBudget: new Counter({
      name: 'saved_search_matches_over_budget_total',
      help: "Matches not made: beyond their owner's budget (100 a listing, 1,000 a minute).",
      registers,
    }),
  };

  let backlog: { at: number; value: Promise<WebhookBacklog> } | null = null;
  let backlogSource: (() => Promise<WebhookBacklog>) | null = null;
  const readBacklog = () => {
    const now = Date.now();
    if (!backlogSource) return Promise.reject(new Error('no webhook backlog source'));
    if (!backlog || now - backlog.at >= BACKLOG_TTL_MS) {
      const value = backlogSource();
      backlog = { at: now, value };
      // A failed read is not kept: the next scrape asks again.
      value.catch(() => {
        backlog = null;
      });
    }
    return backlog.value;
  };
  const backlogGauge = (name: string, help: string, pick: (b: WebhookBacklog) => number) =>
    new Gauge({
      name,
      help,
      registers,
      async collect() {
        try {
          this.set(pick(await readBacklog()));
        } catch {
          // The database is down: the gauge keeps its last value; the 503 counter tells why.
        }
      },
    });
  backlogGauge(
    'webhook_deliveries_pending',
    'Webhook deliveries waiting to be sent (to active endpoints), across all processes.',
    (b) => b.pending,
  );
  backlogGauge(
    'webhook_oldest_pending_age_seconds',
    'Age of the oldest pending webhook delivery (0 when none is pending).',
    (b) => b.oldestAgeSeconds,
  );
  backlogGauge(
    'webhook_endpoints_disabled',
    'Webhook endpoints disabled (by a 410 Gone answer or by an operator).',
    (b) => b.disabled,
  );

  new Gauge({
    name: 'rate_limit_redis_fallback',
    help: '1 while the rate-limit counters are in memory because Redis failed, else 0.',
    registers,
    collect() {
      this.set(app.redis?.degraded ? 1 : 0);
    },
  });
  const pool = app.database.stats;
  if (pool) {
    new Gauge({
      name: 'db_pool_size',
      help: 'Connections the PostgreSQL pool may open (postgres.js max).',
      registers,
      collect() {
        this.set(pool().size);
      },
    });
    new Gauge({
      name: 'db_pool_connections_in_use',
      help: 'Pool connections busy with a statement or a transaction.',
      registers,
      collect() {
        const { size, busy } = pool();
        this.set(Math.min(size, busy));
      },
    });
    new Gauge({
      name: 'db_pool_waiting',
      help: 'Statements and transactions waiting for a pool connection.',
      registers,
      collect() {
        this.set(pool().waiting);
      },
    });
    new Counter({
      name: 'db_pool_timeouts_total',
      help: 'Statements and transactions refused after waiting DATABASE_POOL_WAIT_MS (503).',
      registers,
      collect() {
        this.reset();
        this.inc(pool().timeouts);
      },
    });
    new Counter({
      name: 'db_query_errors_total',
      help: 'Statements the database driver answered with an error.',
      registers,
      collect() {
        this.reset();
        this.inc(pool().errors);
      },
    });
  }

  const replica = app.replica;
  if (replica) {
    new Gauge({
      name: 'db_replica_state',
      help: "1 for the read replica's state: ok (anonymous reads use it), lagging or down.",
      labelNames: ['state'] as const,
      registers,
      collect() {
        const { state } = replica.stats();
        for (const each of ['ok', 'lagging', 'down'] as const)
          this.set({ state: each }, each === state ? 1 : 0);
      },
    });
    new Gauge({
      name: 'db_replica_lag_seconds',
      help: 'WAL the read replica has not replayed, as the age of the oldest such primary position.',
      registers,
      collect() {
        const { lagMs } = replica.stats();
        this.set(lagMs === null ? Number.NaN : lagMs / 1000);
      },
    });
    new Counter({
      name: 'db_replica_reads_total',
      help: 'Reads the read replica served.',
      registers,
      collect() {
        this.reset();
        this.inc(replica.stats().reads);
      },
    });
    new Counter({
      name: 'db_replica_fallbacks_total',
      help: 'Reads meant for the read replica served by the primary, by reason.',
      labelNames: ['reason'] as const,
      registers,
      collect() {
        this.reset();
        for (const [reason, count] of Object.entries(replica.stats().fallbacks))
          this.inc({ reason }, count);
      },
    });
  }

  const partitions = new Map<string, () => readonly PartitionGauge[]>();
  new Gauge({
    name: 'db_partitions',
    help: 'Partitions of a table partitioned by time (docs/scaling.md), as of the last maintenance.',
    labelNames: ['database', 'table'] as const,
    registers,
    collect() {
      for (const [database, read] of partitions)
        for (const each of read()) this.set({ database, table: each.table }, each.partitions);
    },
  });
  new Gauge({
    name: 'db_partition_oldest_age_seconds',
    help: "Age of the oldest partition's start (its end for the rows from before partitioning).",
    labelNames: ['database', 'table'] as const,
    registers,
    collect() {
      for (const [database, read] of partitions)
        for (const each of read()) this.set({ database, table: each.table }, each.oldestAgeSeconds);
    },
  });

  let searchGate: (() => SearchGateState) | null = null;
  new Gauge({
    name: 'search_requests_running',
    help: 'Search pages of GET /api/v1/listings running now (at most SEARCH_CONCURRENCY).',
    registers,
    collect() {
      this.set(searchGate?.().running ?? 0);
    },
  });
  new Gauge({
    name: 'search_requests_queued',
    help: 'Search pages waiting for a place (at most SEARCH_QUEUE).',
    registers,
    collect() {
      this.set(searchGate?.().queued ?? 0);
    },
  });
  new Counter({
    name: 'search_requests_shed_total',
    help: 'Search pages answered 503 by the search gate: queue_full, or wait_timeout.',
    labelNames: ['reason'] as const,
    registers,
    collect() {
      this.reset();
      const shed = searchGate?.().shed;
      for (const reason of ['queue_full', 'wait_timeout'] as const)
        this.inc({ reason }, shed?.[reason] ?? 0);
    },
  });

  // The children of one label combination, found by one string key: prom-client's labels()
  // would sort and join the label object on every call. The combinations are a bounded set.
  const children = new Map<
    string,
    { count: { inc(): void }; time: { observe(value: number): void } }
  >();
  const childrenOf = (operation: string, method: string, cls: string, environment: string) => {
    const key = `${operation} ${method} ${cls} ${environment}`;
    let found = children.get(key);
    if (!found) {
      found = {
        count: requests.labels(operation, method, cls, environment),
        time: duration.labels(operation, method, cls),
      };
      children.set(key, found);
    }
    return found;
  };

  const IN_FLIGHT = Symbol('metrics.inFlight');
  type Tracked = FastifyRequest & { [IN_FLIGHT]?: boolean };
  const done = (request: Tracked) => {
    if (!request[IN_FLIGHT]) return false;
    request[IN_FLIGHT] = false;
    inFlight.dec();
    return true;
  };
  app.addHook('onRequest', (request: Tracked, _reply, next) => {
    request[IN_FLIGHT] = true;
    inFlight.inc();
    next();
  });
  app.addHook('onResponse', (request: Tracked, reply: FastifyReply, next) => {
    if (done(request)) {
      const child = childrenOf(
        operationOf(request),
        request.method,
        statusClass(reply.statusCode),
        request.caller?.environment ?? 'none',
      );
      child.count.inc();
      child.time.observe(reply.elapsedTime / 1000);
    }
    next();
  });
  app.addHook('onRequestAbort', (request: Tracked, next) => {
    done(request);
    next();
  });
  app.addHook('onError', (_request, _reply, error, next) => {
    if (isConnectionError(error)) dbUnavailable.inc();
    next();
  });

  return {
    registry,
    rateLimited: (policy) => rateLimited.inc({ policy }),
    webhookAttempt: (outcome) => attempts.inc({ outcome }),
    matchPass: (pass) => {
      matchCounters.listings.inc(pass.listings);
      matchCounters.examined.inc(pass.examined);
      matchCounters.matched.inc(pass.matched);
      matchCounters.overBudget.inc(pass.overBudget);
    },
    requestLogDropped: (count) => logDrops.inc(count),
    observeWebhookBacklog: (read) => {
      backlogSource = read;
    },
    observeSearchGate: (read) => {
      searchGate = read;
    },
    observePartitions: (database, read) => {
      partitions.set(database, read);
    },
  };
}

export default fp(
  async function metrics(app: FastifyInstance) {
    const token = app.config.metricsToken;
    if (!token) {
      app.decorate('metrics', null);
      return;
    }
    const metrics = await createMetrics(app);
    app.decorate('metrics', metrics);
    app.get(METRICS_PATH, async (request, reply) => {
      const sent = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
      if (!sent || !safeEqual(sent, token))
        throw new UnauthorizedError('GET /metrics needs Authorization: Bearer <METRICS_TOKEN>.');
      return reply
        .header('cache-control', 'no-store')
        .type(metrics.registry.contentType)
        .send(await metrics.registry.metrics());
    });
    app.addHook('onClose', async () => metrics.registry.clear());
  },
  {
    name: 'metrics',
    fastify: '5.x',
    dependencies: ['config', 'database', 'replica', 'envelope', 'redis'],
  },
);
