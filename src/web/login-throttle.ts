/**
 * Failed sign-ins (OWASP Authentication Cheat Sheet, account lockout; OWASP "Slow down online
 * guessing attacks with device cookies"; the OpenAPI document's "Sign-in limits"). Two counters,
 * kept for names that do not exist exactly as for those that do, so the answers reveal nothing:
 *
 * - one username from one client: the client IP (IPv6 by /64), or a browser where this username
 *   signed in before (WebContext.knownBrowser). Counted when an attempt starts, so parallel
 *   guesses cannot all pass the check; a success clears it. Over the limit that client waits
 *   for the window to end, for that username only: a guesser never locks the owner out of
 *   another network.
 * - one username from every client that is not one of its known browsers: failures only, with
 *   a much higher limit, against guessers spread over many addresses. Known browsers are exempt,
 *   so such a guesser cannot lock the owner out of the browser they use.
 *
 * The per-IP limit on attempts, whatever the username, is the rate limiter's `sign-in` row
 * (plugins/rate-limit.ts, RATE_LIMIT_SIGNIN_MAX). The counters live in the rate limiter's store
 * (lib/rate-limit-store.ts): Redis when configured, shared by every instance, memory while Redis
 * is unreachable. Usernames are kept as digests (people type passwords into that field).
 */
import { createHash } from 'node:crypto';
import { normalizeIP } from '@fastify/rate-limit';
import type { Counter, ResilientStore } from '../lib/rate-limit-store.ts';

export interface ThrottleLimits {
  clientFailures: number;
  clientWindowMs: number;
  usernameFailures: number;
  usernameWindowMs: number;
}

export const DEFAULT_THROTTLE_LIMITS: ThrottleLimits = {
  clientFailures: 5,
  clientWindowMs: 15 * 60_000,
  usernameFailures: 100,
  usernameWindowMs: 60 * 60_000,
};

/** Who attempts: the client IP, and the browser id when the browser is known for the username. */
export interface SignInClient {
  ip: string;
  knownBrowser?: string | undefined;
}

export type ThrottleVerdict = { allowed: true } | { allowed: false; retryAfterSeconds: number };

export class LoginThrottle {
  constructor(
    private readonly store: ResilientStore,
    private readonly limits: ThrottleLimits = DEFAULT_THROTTLE_LIMITS,
  ) {}

  /** Starts an attempt; refuses it when the username or this client is over its limit. */
  async attempt(client: SignInClient, username: string): Promise<ThrottleVerdict> {
    const name = usernameDigest(username);
    if (client.knownBrowser === undefined) {
      const failures = await this.count('read', usernameKey(name), this.limits.usernameWindowMs);
      if (failures.current >= this.limits.usernameFailures) return refuse(failures);
    }
    const attempts = await this.count('incr', clientKey(client, name), this.limits.clientWindowMs);
    if (attempts.current > this.limits.clientFailures) return refuse(attempts);
    return { allowed: true };
  }

  /**
   * A wrong password (or unknown name): counts against the username unless from a known browser.
   */
  async recordFailure(client: SignInClient, username: string): Promise<void> {
    if (client.knownBrowser !== undefined) return;
    await this.count('incr', usernameKey(usernameDigest(username)), this.limits.usernameWindowMs);
  }

  /**
   * Clears this client's attempts for the username (the username's failures stay: they are
   * others').
   */
  recordSuccess(client: SignInClient, username: string): Promise<void> {
    return this.store.reset(clientKey(client, usernameDigest(username)));
  }

  private count(method: 'incr' | 'read', key: string, windowMs: number): Promise<Counter> {
    return new Promise((resolve, reject) => {
      // The store answers from memory when Redis fails, so an error here is a bug, not an outage.
      this.store[method](
        key,
        (err, result) =>
          err || !result ? reject(err ?? new Error('no counter')) : resolve(result),
        windowMs,
      );
    });
  }
}

/** How usernames compare: trimmed, case-insensitive, bounded (the form allows 30 characters). */
export const normalizeUsername = (username: string) => username.trim().toLowerCase().slice(0, 64);

function usernameDigest(username: string): string {
  return createHash('sha256')
    .update(`sign-in:${normalizeUsername(username)}`)
    .digest('hex')
    .slice(0, 32);
}

const usernameKey = (name: string) => `user:${name}`;

function clientKey(client: SignInClient, name: string): string {
  return client.knownBrowser === undefined
    ? `ip:${normalizeIP(client.ip)}:${name}`
    : `browser:${client.knownBrowser}:${name}`;
}

function refuse(counter: Counter): ThrottleVerdict {
  return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(counter.ttl / 1000)) };
}
