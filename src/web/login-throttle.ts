/**
 * Limits sign-in attempts so passwords cannot be guessed at speed (OWASP authentication
 * cheat sheet): per client IP, 10 attempts per minute (the OpenAPI document's rate-limit
 * table); per username, after 5 failures in 15 minutes further attempts wait out the window.
 * The username rule applies to names that do not exist too, so it reveals nothing. Counters
 * are per process (a shared store can replace this class behind the same methods). The per-IP
 * rule is also enforced across instances, on every sign-in post, by the shared rate limiter
 * (src/plugins/rate-limit.ts, policy `sign-in`, Redis when configured); the per-username rule
 * stays per process (documented in the OpenAPI document's rate-limit section).
 */
export interface ThrottleLimits {
  ipAttempts: number;
  ipWindowMs: number;
  userFailures: number;
  userWindowMs: number;
}

export const DEFAULT_THROTTLE_LIMITS: ThrottleLimits = {
  ipAttempts: 10,
  ipWindowMs: 60_000,
  userFailures: 5,
  userWindowMs: 15 * 60_000,
};

interface Window {
  count: number;
  resetAt: number;
}

export type ThrottleVerdict = { allowed: true } | { allowed: false; retryAfterSeconds: number };

const MAX_ENTRIES = 100_000;

export class LoginThrottle {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly limits: ThrottleLimits = DEFAULT_THROTTLE_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts one attempt from `ip` for `username`; refuses it when either limit is reached. */
  attempt(ip: string, username: string): ThrottleVerdict {
    const now = this.now();
    this.sweep(now);
    const failures = this.current(`user:${normalize(username)}`, now);
    if (failures && failures.count >= this.limits.userFailures) return refuse(failures, now);
    const perIp = this.bump(`ip:${ip}`, this.limits.ipWindowMs, now);
    if (perIp.count > this.limits.ipAttempts) return refuse(perIp, now);
    return { allowed: true };
  }

  recordFailure(username: string): void {
    this.bump(`user:${normalize(username)}`, this.limits.userWindowMs, this.now());
  }

  recordSuccess(username: string): void {
    this.windows.delete(`user:${normalize(username)}`);
  }

  private current(key: string, now: number): Window | undefined {
    const window = this.windows.get(key);
    if (window && window.resetAt <= now) {
      this.windows.delete(key);
      return undefined;
    }
    return window;
  }

  private bump(key: string, windowMs: number, now: number): Window {
    const window = this.current(key, now) ?? { count: 0, resetAt: now + windowMs };
    window.count += 1;
    this.windows.set(key, window);
    return window;
  }

  /** Bounded memory: expired windows are dropped once the map grows. */
  private sweep(now: number): void {
    if (this.windows.size < MAX_ENTRIES) return;
    for (const [key, window] of this.windows) if (window.resetAt <= now) this.windows.delete(key);
    if (this.windows.size >= MAX_ENTRIES) this.windows.clear();
  }
}

const normalize = (username: string) => username.trim().toLowerCase().slice(0, 64);

function refuse(window: Window, now: number): ThrottleVerdict {
  return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((window.resetAt - now) / 1000)) };
}
