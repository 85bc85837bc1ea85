/**
 * A fair share under load (docs/operations.md, "Fair share"; the OpenAPI document's listListings
 * 503): at most SEARCH_CONCURRENCY search pages of GET /api/v1/listings run at once in this
 * process. Beyond that, up to SEARCH_QUEUE more wait for a place, first come first served, at
 * most SEARCH_QUEUE_WAIT_MS each; any other is answered at once with 503 service_unavailable and
 * Retry-After (Stripe's concurrent request limiter and load shedder: expensive work is bounded
 * where it arrives, before it holds the database). A request that waited its time out gets the
 * same answer.
 *
 * Only searches pass the gate: reads by id, plain feed pages, writes and health never wait
 * behind one. The listListings handler (src/listings/listings-handlers.ts) runs a search in it,
 * by the read service's one definition of a search (isSearch), after authentication, validation
 * and the rate limit, so a refused or malformed request never takes a place. Each running
 * search holds one pool connection for its transaction
 * (src/listings/listings-search-repository.ts), so the cap stays below the pool's 10 connections
 * (src/config.ts) and the rest of the API keeps the others.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ServiceUnavailableError } from '../errors.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The search gate: its state now (metrics and tests read it), and its places. */
    searchGate: SearchGate;
  }
}

/** Searches shed so far, by why: the queue was full, or a place did not come free in time. */
type ShedReason = 'queue_full' | 'wait_timeout';

interface SearchGateStats {
  readonly running: number;
  readonly queued: number;
  readonly shed: Readonly<Record<ShedReason, number>>;
}

/** The gate as the listListings handler uses it: the stats, and a place to run a search in. */
interface SearchGate extends SearchGateStats {
  /**
   * Runs `work` in a place; throws the 503 when none comes free. A request whose client left
   * while it waited gives its place on without running.
   */
  run<T>(request: FastifyRequest, work: () => T): Promise<Awaited<T>>;
}

/** A shed search may come back in a second: the searches ahead of it end within their timeout. */
const RETRY_AFTER_SECONDS = '1';

const busy = () =>
  new ServiceUnavailableError(
    'Too many searches are running on this server; retry shortly, or narrow the search.',
    undefined,
    { 'retry-after': RETRY_AFTER_SECONDS },
  );

interface Waiter {
  grant(): void;
  timer: NodeJS.Timeout;
}

/** `limit` places; up to `queueMax` waiters, each for at most `waitMs`. */
class Gate implements SearchGate {
  running = 0;
  private readonly waiters: Waiter[] = [];
  readonly shed: Record<ShedReason, number> = { queue_full: 0, wait_timeout: 0 };

  constructor(
    private readonly limit: number,
    private readonly queueMax: number,
    private readonly waitMs: number,
  ) {}

  get queued(): number {
    return this.waiters.length;
  }

  async run<T>(request: FastifyRequest, work: () => T): Promise<Awaited<T>> {
    if (this.running < this.limit && this.waiters.length === 0) this.running += 1;
    else {
      await this.wait();
      if (request.socket.destroyed) {
        this.leave();
        throw busy();
      }
    }
    try {
      return await work();
    } finally {
      this.leave();
    }
  }

  private wait(): Promise<void> {
    if (this.waiters.length >= this.queueMax) {
      this.shed.queue_full += 1;
      return Promise.reject(busy());
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        grant: () => {
          clearTimeout(waiter.timer);
          resolve();
        },
        timer: setTimeout(() => {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          this.shed.wait_timeout += 1;
          reject(busy());
        }, this.waitMs),
      };
      this.waiters.push(waiter);
    });
  }

  /** A place is handed to the first waiter, or freed. */
  private leave(): void {
    const next = this.waiters.shift();
    if (next) next.grant();
    else this.running -= 1;
  }
}

export default fp(
  async function searchGate(app: FastifyInstance) {
    const { searchConcurrency, searchQueue, searchQueueWaitMs } = app.config;
    const gate = new Gate(searchConcurrency, searchQueue, searchQueueWaitMs);
    app.decorate('searchGate', gate);
    app.metrics?.observeSearchGate(() => gate);
  },
  { name: 'search-gate', fastify: '5.x', dependencies: ['config', 'metrics'] },
);
