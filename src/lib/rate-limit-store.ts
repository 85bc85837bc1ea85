/**
 * Rate-limit counters that survive a Redis outage (OpenAPI "Rate limits", REDIS_URL in
 * docs/configuration.md).
 *
 * With REDIS_URL the counters live in Redis, shared by every instance (the same Lua counter
 * @fastify/rate-limit ships, through its RedisStore). When a Redis call fails, or while the
 * client is not connected, the count goes to this process's memory instead (its LocalStore):
 * the request is answered normally, never with a 5xx because of Redis. The switch is logged
 * once per outage, and the way back once when Redis answers again. After a failure Redis is
 * left alone for a short pause, so a hung server costs one timeout, not one per request.
 * Without REDIS_URL the counters are in memory only.
 */
import { createRequire } from 'node:module';
import type { FastifyBaseLogger } from 'fastify';
import type { Redis } from 'ioredis';

export interface Counter {
  current: number;
  ttl: number;
}

type Callback = (error: Error | null, result?: Counter) => void;

/** The store contract of @fastify/rate-limit (incr, read, child). */
interface Store {
  incr(key: string, callback: Callback, timeWindow: number, max: number): void;
  read(key: string, callback: Callback, timeWindow: number, max: number): void;
}

/** The plugin's LocalStore keeps its counters in a toad-cache LRU map. */
interface LocalStore extends Store {
  readonly lru: { delete(key: string): unknown };
}

interface LocalStoreCtor {
  new (continueExceeding: boolean, exponentialBackoff: boolean, cache?: number): LocalStore;
}
interface RedisStoreCtor {
  new (continueExceeding: boolean, exponentialBackoff: boolean, redis: Redis, key?: string): Store;
}

// The plugin's own stores (CommonJS, not in its typed exports): the same counting semantics
// whichever side answers.
const require = createRequire(import.meta.url);
const LocalStore = require('@fastify/rate-limit/store/LocalStore.js') as LocalStoreCtor;
const RedisStore = require('@fastify/rate-limit/store/RedisStore.js') as RedisStoreCtor;

/**
 * INCRBY on a counter of RedisStore's (same key, same window: a new counter expires after the
 * window, an existing one keeps its expiry), as one script, so no other request's count lands
 * between the increment and the expiry.
 */
const INCR_BY = `
  local current = redis.call('INCRBY', KEYS[1], ARGV[1])
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    ttl = tonumber(ARGV[2])
  end
  return {current, ttl}
`;

type IncrBy = (key: string, amount: number, timeWindow: number) => Promise<[number, number]>;

/** The script as a command of the client (ioredis defineCommand: EVALSHA, loaded once). */
function incrByCommand(client: Redis): IncrBy {
  const commands = client as unknown as { rateLimitIncrBy?: IncrBy };
  if (!commands.rateLimitIncrBy)
    client.defineCommand('rateLimitIncrBy', { numberOfKeys: 1, lua: INCR_BY });
  return commands.rateLimitIncrBy!.bind(client);
}

/** How long Redis is bypassed after a failed call before it is tried again. */
const REDIS_RETRY_PAUSE_MS = 1000;
/** Keys kept per policy in memory (least recently used are dropped beyond this). */
const LOCAL_CACHE_SIZE = 100_000;

/** The one Redis connection of the process, and whether it is usable right now. */
export class RedisLink {
  private failing = false;
  private closed = false;
  private pausedUntil = 0;

  constructor(
    readonly client: Redis,
    private readonly log: Pick<FastifyBaseLogger, 'warn' | 'info'>,
    private readonly now: () => number = Date.now,
  ) {
    // Connection errors arrive as events (ioredis reconnects by itself); without a listener
    // they would be printed as unhandled. A lost connection may end without an error.
    client.on('error', (err: Error) => this.down(err));
    client.on('close', () => this.down(new Error('connection closed')));
    client.on('ready', () => this.up());
  }

  get usable(): boolean {
    return this.client.status === 'ready' && this.now() >= this.pausedUntil;
  }

  /** Whether the counters are in memory because Redis failed (for tests and health). */
  get degraded(): boolean {
    return this.failing;
  }

  /** Closes the connection with the app (counters need no flushing, so no QUIT to wait on). */
  close(): void {
    this.closed = true;
    this.client.disconnect();
  }

  down(err: unknown): void {
    this.pausedUntil = this.now() + REDIS_RETRY_PAUSE_MS;
    if (this.failing || this.closed) return;
    this.failing = true;
    this.log.warn(
      {
        event: 'rate_limit_redis_down',
        err: { message: err instanceof Error ? err.message : String(err) },
      },
      "Redis is unavailable: rate-limit counters fall back to this process's memory until it returns",
    );
  }

  up(): void {
    this.pausedUntil = 0;
    if (!this.failing) return;
    this.failing = false;
    this.log.info(
      { event: 'rate_limit_redis_up' },
      'Redis is back: rate-limit counters are shared again',
    );
  }
}

/** Counters of one policy: Redis when usable, memory otherwise. */
export class ResilientStore implements Store {
  private readonly local = new LocalStore(false, false, LOCAL_CACHE_SIZE);
  private readonly redis: Store | null;
  private readonly children = new Map<string, ResilientStore>();

  constructor(
    private readonly link: RedisLink | null,
    private readonly keyPrefix = 'rl:',
  ) {
    this.redis = link ? new RedisStore(false, false, link.client, keyPrefix) : null;
  }

  incr(key: string, callback: Callback, timeWindow: number, max: number): void {
    this.run('incr', key, callback, timeWindow, max);
  }

  read(key: string, callback: Callback, timeWindow: number, max: number): void {
    this.run('read', key, callback, timeWindow, max);
  }

  /**
   * Forgets a counter (a successful sign-in clears its failures): in memory, where it may have
   * been counted during an outage, and in Redis. A failed delete is a Redis failure like any other.
   */
  async reset(key: string): Promise<void> {
    this.local.lru.delete(key);
    const link = this.link;
    if (!this.redis || !link?.usable) return;
    try {
      await link.client.del(`${this.keyPrefix}${key}`);
      link.up();
    } catch (err) {
      link.down(err);
    }
  }

  /**
   * Counts `amount` more on a counter in one step, as `amount` requests would (a request charged
   * by the work it caused, OpenAPI "Rate limits"): a counter that does not exist yet starts a
   * window of `timeWindow` ms. Resolves to the counter after it; never rejects (memory answers
   * when Redis cannot).
   */
  incrBy(key: string, amount: number, timeWindow: number): Promise<Counter> {
    return new Promise((resolve) => {
      const local = () => resolve(this.localIncrBy(key, amount, timeWindow));
      const link = this.link;
      if (!this.redis || !link) return local();
      if (!link.usable) {
        if (link.client.status !== 'ready')
          link.down(new Error(`Redis connection is ${link.client.status}`));
        return local();
      }
      incrByCommand(link.client)(`${this.keyPrefix}${key}`, amount, timeWindow).then(
        ([current, ttl]) => {
          link.up();
          resolve({ current, ttl });
        },
        (err: unknown) => {
          link.down(err);
          local();
        },
      );
    });
  }

  /**
   * A store for one policy (@fastify/rate-limit calls it with the merged options; groupId names the
   * policy). The same one for the same policy, whoever asks: a charge after the work
   * (incrBy) lands on the counters the limiter counted the request on, in memory too.
   */
  child(options: { groupId?: string }): ResilientStore {
    const name = options.groupId ?? 'default';
    let store = this.children.get(name);
    if (!store) {
      store = new ResilientStore(this.link, `${this.keyPrefix}${name}:`);
      this.children.set(name, store);
    }
    return store;
  }

  /** The memory side of incrBy: the plugin's own counting, `amount` times (never many). */
  private localIncrBy(key: string, amount: number, timeWindow: number): Counter {
    let counter: Counter = { current: 0, ttl: timeWindow };
    for (let i = 0; i < amount; i += 1)
      this.local.incr(key, (_err, result) => (counter = result ?? counter), timeWindow, Infinity);
    return counter;
  }

  private run(
    method: 'incr' | 'read',
    key: string,
    callback: Callback,
    timeWindow: number,
    max: number,
  ): void {
    const link = this.link;
    if (!this.redis || !link) {
      this.local[method](key, callback, timeWindow, max);
      return;
    }
    if (!link.usable) {
      if (link.client.status !== 'ready')
        link.down(new Error(`Redis connection is ${link.client.status}`));
      this.local[method](key, callback, timeWindow, max);
      return;
    }
    try {
      this.redis[method](
        key,
        (err, result) => {
          if (err || !result) {
            link.down(err ?? new Error('no answer from Redis'));
            this.local[method](key, callback, timeWindow, max);
            return;
          }
          link.up();
          callback(null, result);
        },
        timeWindow,
        max,
      );
    } catch (err) {
      // ioredis throws synchronously in a few states (a closed connection); same fallback.
      link.down(err);
      this.local[method](key, callback, timeWindow, max);
    }
  }
}
