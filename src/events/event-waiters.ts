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
 * Bounded (OpenAPI listEvents), so that no one holder of credentials takes the places of others:
 * - `perCredential` waiting requests per API key or token;
 * - `perUser` per end user of an app and environment, all the user's OAuth tokens of the app
 *   together, whatever their grants: refreshing a token (the old access token keeps working until
 *   it expires, docs/oauth.md) or authorizing the app again adds no place;
 * - the app's tokens, all users together, at most `perApp - perCredential`: the app's API keys
 *   keep one key's full share that its users cannot take;
 * - `perApp` per app and environment, all its keys and tokens;
 * - `perOwner` per developer account, all the apps it owns in both environments, their keys and
 *   their users' tokens: many apps of one developer cannot take the process's places;
 * (429 beyond any of these: the caller's own, its user's, its app's or its developer's waits hold
 * the places), then `max` per process (503 beyond), all with Retry-After. Active keys per app are
 * capped too (src/apps/keys-service.ts). close() (graceful shutdown) wakes every waiter at once.
 */
import { RateLimitedError, ServiceUnavailableError } from '../errors.ts';

/** The channel drizzle/0012's and 0014's trigger notifies. */
export const EVENTS_CHANNEL = 'webhook_events';

/** Retry-After of the refusals: waits end within 30 s; a few seconds spreads the retries. */
const RETRY_AFTER_SECONDS = '5';

/** 429: whose waits hold the places, and what to do. */
function refused(whose: string): RateLimitedError {
  return new RateLimitedError(`${whose}; retry after the others are answered.`, undefined, {
    'retry-after': RETRY_AFTER_SECONDS,
  });
}

/** One place given back in a count by key (the key gone at 0). */
function countDown(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left === 0) counts.delete(key);
  else counts.set(key, left);
}

export interface WaitLimits {
  /** Waiting requests one process holds at once (EVENTS_WAIT_MAX). */
  max: number;
  /** The same per credential (EVENTS_WAIT_MAX_PER_CREDENTIAL). */
  perCredential: number;
  /**
   * The same per end user of an app and environment, all the user's tokens of the app
   * (EVENTS_WAIT_MAX_PER_USER).
   */
  perUser: number;
  /**
   * The same per app and environment, all its keys and tokens (EVENTS_WAIT_MAX_PER_APP); its
   * tokens together hold at most `perApp - perCredential` (config.ts checks it is positive).
   */
  perApp: number;
  /** The same per developer account, all its apps and environments (EVENTS_WAIT_MAX_PER_OWNER). */
  perOwner: number;
}

/** The config's defaults (src/config.ts), for services built without it (the CLI). */
export const DEFAULT_WAIT_LIMITS: WaitLimits = {
  max: 1000,
  perCredential: 5,
  perUser: 5,
  perApp: 20,
  perOwner: 50,
};

/**
 * What a waiter may see: one app's events in one environment, all of them (an API key), or only
 * those about one seller's listings (an OAuth token, `sellerId`).
 */
export interface WaitScope {
  appId: string;
  environment: string;
  sellerId?: string | undefined;
  /** The developer account that owns the app (Caller.appOwnerId): whose places the wait takes. */
  ownerId: string;
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
    /** The app's developer account. */
    readonly appOwnerId: string,
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

  /** The waits of the app's OAuth tokens, all users together. */
  get tokens(): number {
    return this.size - this.keys.size;
  }

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
  private readonly byOwner = new Map<string, number>();
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
   * Takes a place for a request that will wait, or refuses it: 429 beyond the credential's, the
   * user's, the app's tokens', the app's or the owner's places, then 503 beyond the process's,
   * with Retry-After.
   */
  enter(credential: string, scope: WaitScope): Waiter {
    const { perCredential, perUser, perApp, perOwner } = this.limits;
    const app = EventWaiters.appScope(scope.appId, scope.environment);
    const held = this.byCredential.get(credential) ?? 0;
    if (held >= perCredential)
      throw refused(
        `This credential already has ${held} requests waiting for events (at most ` +
          `${perCredential})`,
      );
    const appWaiters = this.byApp.get(app) ?? new AppWaiters();
    if (scope.sellerId !== undefined) {
      const user = appWaiters.bySeller.get(scope.sellerId)?.size ?? 0;
      if (user >= perUser)
        throw refused(
          `This user already has ${user} requests waiting for this app's events (at most ` +
            `${perUser}, all the user's tokens of the app together)`,
        );
      if (appWaiters.tokens >= perApp - perCredential)
        throw refused(
          `This app's OAuth tokens already have ${appWaiters.tokens} requests waiting for ` +
            `events (at most ${perApp - perCredential}, all its users together; the app's ` +
            'other places are kept for its API keys)',
        );
    }
    if (appWaiters.size >= perApp)
      throw refused(
        `This app already has ${appWaiters.size} requests waiting for events in this ` +
          `environment (at most ${perApp}, all its keys and tokens together)`,
      );
    const owned = this.byOwner.get(scope.ownerId) ?? 0;
    if (owned >= perOwner)
      throw refused(
        `The apps of this app's developer account already have ${owned} requests waiting for ` +
          `events (at most ${perOwner}, all its apps and environments together)`,
      );
    if (this.count >= this.limits.max)
      throw new ServiceUnavailableError(
        'This server holds as many waiting requests as it can; retry shortly.',
        undefined,
        { 'retry-after': RETRY_AFTER_SECONDS },
      );
    const waiter = new Waiter(credential, app, scope.sellerId, scope.ownerId, this);
    this.byCredential.set(credential, held + 1);
    this.byOwner.set(scope.ownerId, owned + 1);
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
    countDown(this.byCredential, waiter.credential);
    countDown(this.byOwner, waiter.appOwnerId);
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
