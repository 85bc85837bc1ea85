/**
 * Rate-limit counters that survive a Redis outage (OpenAPI "Rate limits", REDIS_URL in
 * docs/configuration.md).
 *
 * With REDIS_URL the counters live in Redis, shared by every instance: a fixed window per key
 * (the first count starts it, the key expires with it), counted by one script so no other
 * request's count lands between the increment and the expiry. When a Redis call fails, or while
 * the client is not connected, the count goes to this process's memory instead (MemoryCounters,
 * the same window): the request is answered normally, never with a 5xx because of Redis. The
 * switch is logged once per outage, and the way back once when Redis answers again. After a
 * failure Redis is left alone for a short pause, so a hung server costs one timeout, not one per
 * request. Without REDIS_URL the counters are in memory only.
 *
 * @fastify/rate-limit reaches these counters through its documented custom store (its README,
 * "Custom store": a constructor given as `store`, whose instances have `incr`, `read` and
 * `child`): limiterStore below.
 */
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { FastifyBaseLogger } from 'fastify';
import type { Redis } from 'ioredis';

export interface Counter {
  current: number;
  ttl: number;
}

type Callback = (error: Error | null, result?: Counter) => void;

/**
 * INCRBY on a counter (a new counter expires after the window, an existing one keeps its
 * expiry), as one script, so no other request's count lands between the increment and the
 * expiry. A key left without an expiry (never by this script) gets one, so no counter lives on.
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

/** A counter as it is, changing nothing: {0, 0} when there is none. */
const READ = `
  local current = redis.call('GET', KEYS[1])
  if not current then
    return {0, 0}
  end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then
    ttl = 0
  end
  return {tonumber(current), ttl}
`;

interface CounterCommands {
  incrBy(key: string, amount: number, timeWindow: number): Promise<[number, number]>;
  read(key: string): Promise<[number, number]>;
}

/** The scripts as commands of the client (ioredis defineCommand: EVALSHA, loaded once). */
function counterCommands(client: Redis): CounterCommands {
  const commands = client as unknown as {
    rateLimitIncrBy?: CounterCommands['incrBy'];
    rateLimitRead?: CounterCommands['read'];
  };
  if (!commands.rateLimitIncrBy)
    client.defineCommand('rateLimitIncrBy', { numberOfKeys: 1, lua: INCR_BY });
  if (!commands.rateLimitRead)
    client.defineCommand('rateLimitRead', { numberOfKeys: 1, lua: READ });
  return {
    incrBy: commands.rateLimitIncrBy!.bind(client),
    read: commands.rateLimitRead!.bind(client),
  };
}

interface Window {
  current: number;
  startedAt: number;
}

/**
 * Counters in this process's memory: the same fixed window as Redis's, at most `size` keys (the
 * least recently counted are dropped beyond that, a Map in insertion order).
 */
export class MemoryCounters {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly size: number,
    private readonly now: () => number = Date.now,
  ) {}

  incrBy(key: string, amount: number, timeWindow: number): Counter {
    const now = this.now();
    let window = this.windows.get(key);
    if (window) this.windows.delete(key);
    if (!window || window.startedAt + timeWindow <= now) window = { current: 0, startedAt: now };
    window.current += amount;
    this.windows.set(key, window);
    if (this.windows.size > this.size) this.windows.delete(this.windows.keys().next().value!);
    return { current: window.current, ttl: timeWindow - (now - window.startedAt) };
  }

  read(key: string, timeWindow: number): Counter {
    const window = this.windows.get(key);
    const now = this.now();
    if (!window || window.startedAt + timeWindow <= now) return { current: 0, ttl: 0 };
    return { current: window.current, ttl: timeWindow - (now - window.startedAt) };
  }

  delete(key: string): void {
    this.windows.delete(key);
  }
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
export class ResilientStore {
  private readonly local = new MemoryCounters(LOCAL_CACHE_SIZE);
  private readonly redis: CounterCommands | null;
  private readonly children = new Map<string, ResilientStore>();

  constructor(
    private readonly link: RedisLink | null,
    private readonly keyPrefix = 'rl:',
  ) {
    this.redis = link ? counterCommands(link.client) : null;
  }

  /** Counts one request (the plugin's store contract: the counter after it, to the callback). */
  incr(key: string, callback: Callback, timeWindow: number): void {
    this.run(
      (redis) => redis.incrBy(`${this.keyPrefix}${key}`, 1, timeWindow),
      () => this.local.incrBy(key, 1, timeWindow),
    ).then((counter) => callback(null, counter));
  }

  /** The counter as it is, counting nothing ({0, 0} when there is none). */
  read(key: string, callback: Callback, timeWindow: number): void {
    this.run(
      (redis) => redis.read(`${this.keyPrefix}${key}`),
      () => this.local.read(key, timeWindow),
    ).then((counter) => callback(null, counter));
  }

  /**
   * Forgets a counter (a successful sign-in clears its failures): in memory, where it may have
   * been counted during an outage, and in Redis. A failed delete is a Redis failure like any other.
   */
  async reset(key: string): Promise<void> {
    this.local.delete(key);
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
    return this.run(
      (redis) => redis.incrBy(`${this.keyPrefix}${key}`, amount, timeWindow),
      () => this.local.incrBy(key, amount, timeWindow),
    );
  }

  /**
   * A store for one policy (@fastify/rate-limit calls it with the merged options; groupId names the
   * policy). The same one for the same policy, whoever asks: a charge after the work
   * (incrBy) lands on the counters the limiter counted the request on, in memory too.
   */
  child(options: { groupId?: string | undefined }): ResilientStore {
    const name = options.groupId ?? 'default';
    let store = this.children.get(name);
    if (!store) {
      store = new ResilientStore(this.link, `${this.keyPrefix}${name}:`);
      this.children.set(name, store);
    }
    return store;
  }

  /** Redis when it is usable and answers; memory otherwise. Never rejects. */
  private async run(
    inRedis: (redis: CounterCommands) => Promise<[number, number]>,
    inMemory: () => Counter,
  ): Promise<Counter> {
    const link = this.link;
    if (!this.redis || !link) return inMemory();
    if (!link.usable) {
      if (link.client.status !== 'ready')
        link.down(new Error(`Redis connection is ${link.client.status}`));
      return inMemory();
    }
    try {
      // ioredis throws synchronously in a few states (a closed connection): the same fallback.
      const [current, ttl] = await inRedis(this.redis);
      link.up();
      return { current, ttl };
    } catch (err) {
      link.down(err);
      return inMemory();
    }
  }
}

/** What the plugin passes to `child`: the limiter's merged options, `groupId` among them. */
type LimiterOptions = Parameters<FastifyRateLimitStore['child']>[0] & { groupId?: string };

/** A limiter's counters as the plugin sees them: one policy's ResilientStore. */
class PolicyStore implements FastifyRateLimitStore {
  constructor(
    private readonly store: ResilientStore,
    private readonly root: ResilientStore,
  ) {}

  incr(key: string, callback: Callback, timeWindow: number): void {
    this.store.incr(key, callback, timeWindow);
  }

  /** The plugin's `{ increment: false }` check reads through this. */
  read(key: string, callback: Callback, timeWindow: number): void {
    this.store.read(key, callback, timeWindow);
  }

  child(options: LimiterOptions): PolicyStore {
    return new PolicyStore(this.root.child(options), this.root);
  }
}

/**
 * The limiter's `store` option (@fastify/rate-limit README, "Custom store"): the class the plugin
 * instantiates once with its options and asks, through `child`, for each limiter's store. Every
 * one is `root`'s child of that policy, so the charge after the work (ResilientStore.incrBy)
 * lands on the counter the limiter counted the request on.
 */
export function limiterStore(root: ResilientStore): FastifyRateLimitStoreCtor {
  return class LimiterStore extends PolicyStore {
    constructor() {
      super(root, root);
    }
  };
}
