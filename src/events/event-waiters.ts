/**
 * The requests waiting on GET /api/v1/events?wait= (long polling) in this process, by the app and
 * environment whose events they wait for, and for an OAuth token by its seller. They hold no
 * database connection while they wait: the process LISTENs once on EVENTS_CHANNEL (drizzle/0014:
 * every statement that records events notifies `app_id:environment:seller_id` at commit, once per
 * distinct triple, whatever process made it; src/events/event-waits-plugin.ts) and wakes only
 * the waiters who may see such an event, which then read their page again: the app's keys in that
 * environment, and the tokens of that seller (a ping, without a seller, wakes only the keys:
 * tokens never see pings). Another app's waiters, and the app's tokens of other sellers, sleep on.
 * drizzle/0012's two-part payload (`app_id:environment`) still wakes all of the app's waiters in
 * that environment.
 *
 * Bounded (OpenAPI listEvents): at most `perCredential` waiting requests per API key or token and
 * `perApp` per app and environment (429 beyond either: the caller's own, or its app's, waits hold
 * the places), then `max` per process (503 beyond), all with Retry-After. One app cannot hold the
 * process's places however many keys it has (and active keys per app are capped too:
 * src/apps/keys-service.ts). close() (graceful shutdown) wakes every waiter at once.
 */
import { RateLimitedError, ServiceUnavailableError } from '../errors.ts';

/** The channel drizzle/0012's and 0014's trigger notifies. */
export const EVENTS_CHANNEL = 'webhook_events';

/** Retry-After of the refusals: waits end within 30 s; a few seconds spreads the retries. */
const RETRY_AFTER_SECONDS = '5';

export interface WaitLimits {
  /** Waiting requests one process holds at once (EVENTS_WAIT_MAX). */
  max: number;
  /** The same per credential (EVENTS_WAIT_MAX_PER_CREDENTIAL). */
  perCredential: number;
  /** The same per app and environment, all its keys and tokens (EVENTS_WAIT_MAX_PER_APP). */
  perApp: number;
}

/** The config's defaults (src/config.ts), for services built without it (the CLI). */
export const DEFAULT_WAIT_LIMITS: WaitLimits = { max: 1000, perCredential: 5, perApp: 20 };

/**
 * What a waiter may see: one app's events in one environment, all of them (an API key), or only
 * those about one seller's listings (an OAuth token, `sellerId`).
 */
export interface WaitScope {
  appId: string;
  environment: string;
  sellerId?: string | undefined;
}

/** One waiting request: woken by a notification for its scope, a close, or its own timer. */
export class Waiter {
  /** Set by every wake-up; the waiter clears it before each read, so none is missed. */
  notified = false;
  private resume: (() => void) | undefined;

  constructor(
    readonly credential: string,
    /** `app_id:environment`: the app's places, and what a notification names. */
    readonly app: string,
    /** The seller an OAuth token acts for; undefined for a key (it sees every event). */
    readonly sellerId: string | undefined,
    private readonly owner: EventWaiters,
  ) {}

  wake(): void {
    this.owner.wakes += 1;
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

/** The waiters of one app and environment: its keys', and its tokens' by seller. */
class AppWaiters {
  readonly keys = new Set<Waiter>();
  readonly bySeller = new Map<string, Set<Waiter>>();
  size = 0;

  add(waiter: Waiter): void {
    if (waiter.sellerId === undefined) this.keys.add(waiter);
    else {
      const sellers = this.bySeller.get(waiter.sellerId) ?? new Set();
      sellers.add(waiter);
      this.bySeller.set(waiter.sellerId, sellers);
    }
    this.size += 1;
  }

  /** False if it was not here (it left already). */
  delete(waiter: Waiter): boolean {
    if (waiter.sellerId === undefined) {
      if (!this.keys.delete(waiter)) return false;
    } else {
      const sellers = this.bySeller.get(waiter.sellerId);
      if (!sellers?.delete(waiter)) return false;
      if (sellers.size === 0) this.bySeller.delete(waiter.sellerId);
    }
    this.size -= 1;
    return true;
  }

  *all(): Iterable<Waiter> {
    yield* this.keys;
    for (const sellers of this.bySeller.values()) yield* sellers;
  }
}

export class EventWaiters {
  private readonly byApp = new Map<string, AppWaiters>();
  private readonly byCredential = new Map<string, number>();
  private count = 0;
  /** Set by close(): waits end at once, and new ones do not start. */
  closing = false;
  /** Wake-ups so far (each waiter woken counts once per notification): what a notification cost. */
  wakes = 0;

  constructor(private readonly limits: WaitLimits) {}

  /** An app's places, and the first parts of what a notification names. */
  static appScope(appId: string, environment: string): string {
    return `${appId}:${environment}`;
  }

  /** Waiting requests now. */
  get size(): number {
    return this.count;
  }

  /**
   * Takes a place for a request that will wait, or refuses it: 429 beyond the credential's or
   * the app's places, then 503 beyond the process's, with Retry-After.
   */
  enter(credential: string, scope: WaitScope): Waiter {
    const app = EventWaiters.appScope(scope.appId, scope.environment);
    const held = this.byCredential.get(credential) ?? 0;
    if (held >= this.limits.perCredential)
      throw new RateLimitedError(
        `This credential already has ${held} requests waiting for events (at most ` +
          `${this.limits.perCredential}); retry after the others are answered.`,
        undefined,
        { 'retry-after': RETRY_AFTER_SECONDS },
      );
    const appWaiters = this.byApp.get(app) ?? new AppWaiters();
    if (appWaiters.size >= this.limits.perApp)
      throw new RateLimitedError(
        `This app already has ${appWaiters.size} requests waiting for events in this ` +
          `environment (at most ${this.limits.perApp}, all its keys and tokens together); ` +
          'retry after the others are answered.',
        undefined,
        { 'retry-after': RETRY_AFTER_SECONDS },
      );
    if (this.count >= this.limits.max)
      throw new ServiceUnavailableError(
        'This server holds as many waiting requests as it can; retry shortly.',
        undefined,
        { 'retry-after': RETRY_AFTER_SECONDS },
      );
    const waiter = new Waiter(credential, app, scope.sellerId, this);
    this.byCredential.set(credential, held + 1);
    this.count += 1;
    appWaiters.add(waiter);
    this.byApp.set(app, appWaiters);
    return waiter;
  }

  /** @internal Waiter.leave. */
  remove(waiter: Waiter): void {
    const appWaiters = this.byApp.get(waiter.app);
    if (!appWaiters?.delete(waiter)) return;
    if (appWaiters.size === 0) this.byApp.delete(waiter.app);
    const held = (this.byCredential.get(waiter.credential) ?? 1) - 1;
    if (held === 0) this.byCredential.delete(waiter.credential);
    else this.byCredential.set(waiter.credential, held);
    this.count -= 1;
  }

  /**
   * A notification, `app_id:environment:seller_id` (drizzle/0014; the seller empty for a ping):
   * the app's key waiters in that environment read again, and its token waiters of that seller.
   * `app_id:environment` alone (drizzle/0012's payload, before the migration ran):
   * every waiter of the app in that environment.
   */
  notify(payload: string): void {
    const [appId, environment, sellerId] = payload.split(':');
    const appWaiters = this.byApp.get(EventWaiters.appScope(appId ?? '', environment ?? ''));
    if (!appWaiters) return;
    if (sellerId === undefined) {
      for (const waiter of [...appWaiters.all()]) waiter.wake();
      return;
    }
    for (const waiter of [...appWaiters.keys]) waiter.wake();
    if (sellerId !== '')
      for (const waiter of [...(appWaiters.bySeller.get(sellerId) ?? [])]) waiter.wake();
  }

  /** Every waiter reads again (the LISTEN took effect again: notifications may have been lost). */
  wakeAll(): void {
    for (const appWaiters of this.byApp.values())
      for (const waiter of appWaiters.all()) waiter.wake();
  }

  /** Graceful shutdown: every waiter answers now, and later requests do not wait. */
  close(): void {
    this.closing = true;
    this.wakeAll();
  }
}
