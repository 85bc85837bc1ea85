/**
 * The requests waiting on GET /api/v1/events?wait= (long polling) in this process, by the app and
 * environment whose events they wait for. They hold no database connection while they wait: the
 * process LISTENs once on EVENTS_CHANNEL (drizzle/0012: every statement that records events
 * notifies `app_id:environment` at commit, whatever process made it; src/webhooks/event-waits-
 * plugin.ts) and wakes the waiters of that scope, which then read their page again.
 *
 * Bounded (OpenAPI listEvents): at most `perCredential` waiting requests per API key or token
 * (429 beyond: the caller's own waits hold the places) and `max` per process (503 beyond), both
 * with Retry-After. close() (graceful shutdown) wakes every waiter at once for its last read.
 */
import { RateLimitedError, ServiceUnavailableError } from '../errors.ts';

/** The channel drizzle/0012's trigger notifies. */
export const EVENTS_CHANNEL = 'webhook_events';

/** Retry-After of both refusals: waits end within 30 s; a few seconds spreads the retries. */
const RETRY_AFTER_SECONDS = '5';

export interface WaitLimits {
  /** Waiting requests one process holds at once (EVENTS_WAIT_MAX). */
  max: number;
  /** The same per credential (EVENTS_WAIT_MAX_PER_CREDENTIAL). */
  perCredential: number;
}

/** The config's defaults (src/config.ts), for services built without it (the CLI). */
export const DEFAULT_WAIT_LIMITS: WaitLimits = { max: 1000, perCredential: 5 };

/** One waiting request: woken by a notification for its scope, a close, or its own timer. */
export class Waiter {
  /** Set by every wake-up; the waiter clears it before each read, so none is missed. */
  notified = false;
  private resume: (() => void) | undefined;

  constructor(
    readonly credential: string,
    readonly scope: string,
    private readonly owner: EventWaiters,
  ) {}

  wake(): void {
    this.notified = true;
    this.resume?.();
  }

  /** Resolves on the next wake-up (at once if one came since notified was cleared) or after ms. */
  sleep(ms: number): Promise<void> {
    if (this.notified || this.owner.closing) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, Math.max(0, ms));
      const self = this;
      function done() {
        clearTimeout(timer);
        self.resume = undefined;
        resolve();
      }
      this.resume = done;
    });
  }

  /** Gives the place back (always, once the request is answered or gone). */
  leave(): void {
    this.owner.remove(this);
    this.resume?.();
  }
}

export class EventWaiters {
  private readonly byScope = new Map<string, Set<Waiter>>();
  private readonly byCredential = new Map<string, number>();
  private count = 0;
  /** Set by close(): waits end at once, and new ones do not start. */
  closing = false;

  constructor(private readonly limits: WaitLimits) {}

  /** The scope a notification names: one app's events in one environment. */
  static scope(appId: string, environment: string): string {
    return `${appId}:${environment}`;
  }

  /** Waiting requests now. */
  get size(): number {
    return this.count;
  }

  /** Takes a place for a request that will wait, or refuses it (429 or 503 with Retry-After). */
  enter(credential: string, scope: string): Waiter {
    const held = this.byCredential.get(credential) ?? 0;
    if (held >= this.limits.perCredential)
      throw new RateLimitedError(
        `This credential already has ${held} requests waiting for events (at most ` +
          `${this.limits.perCredential}); retry after the others are answered.`,
        undefined,
        { 'retry-after': RETRY_AFTER_SECONDS },
      );
    if (this.count >= this.limits.max)
      throw new ServiceUnavailableError(
        'This server holds as many waiting requests as it can; retry shortly.',
        undefined,
        { 'retry-after': RETRY_AFTER_SECONDS },
      );
    const waiter = new Waiter(credential, scope, this);
    this.byCredential.set(credential, held + 1);
    this.count += 1;
    const waiters = this.byScope.get(scope) ?? new Set();
    waiters.add(waiter);
    this.byScope.set(scope, waiters);
    return waiter;
  }

  /** @internal Waiter.leave. */
  remove(waiter: Waiter): void {
    const waiters = this.byScope.get(waiter.scope);
    if (!waiters?.delete(waiter)) return;
    if (waiters.size === 0) this.byScope.delete(waiter.scope);
    const held = (this.byCredential.get(waiter.credential) ?? 1) - 1;
    if (held === 0) this.byCredential.delete(waiter.credential);
    else this.byCredential.set(waiter.credential, held);
    this.count -= 1;
  }

  /** A notification: the scope's waiters read again. */
  notify(scope: string): void {
    for (const waiter of this.byScope.get(scope) ?? []) waiter.wake();
  }

  /** Every waiter reads again (the LISTEN took effect again: notifications may have been lost). */
  wakeAll(): void {
    for (const waiters of this.byScope.values()) for (const waiter of waiters) waiter.wake();
  }

  /** Graceful shutdown: every waiter answers now, and later requests do not wait. */
  close(): void {
    this.closing = true;
    this.wakeAll();
  }
}
