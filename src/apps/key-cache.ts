/**
 * The API keys (and, in a cache of its own, the OAuth access tokens) this process has looked up,
 * by digest, so a busy key costs no statement per request (`npm run bench`: the lookup was a
 * keyed write's second statement). Revocation stays immediate: every change that can stop a key
 * working notifies `api_key_changes` at commit (triggers on api_keys and apps, drizzle/0008; on
 * oauth_tokens and oauth_grants, drizzle/0009), whichever process made it, and each server
 * LISTENs and drops everything it holds; a change made by this process also drops it at once,
 * without waiting for its own notification.
 *
 * Entries are served only while the notifications are being heard (after LISTEN succeeded, and
 * again after every reconnect, which also drops what was held: notifications sent while the
 * listener was away are lost), and "heard" is proven, not assumed: each process NOTIFYs a
 * heartbeat of its own on the same channel every HEARTBEAT_EVERY_MS, and its caches serve only
 * while the newest heartbeat heard was sent within HEARD_WITHIN_MS. PostgreSQL delivers a
 * listener's notifications in commit order, so hearing a heartbeat sent at T proves every change
 * committed before T was heard too. A LISTEN connection that is down, reconnecting (issue #60: it
 * came back 1.8 s after the pool in a switchover) or dead without the driver noticing stops the
 * caches within HEARD_WITHIN_MS: every lookup reads the database until heartbeats are heard
 * again. An entry is also read again after `ttlMs`. Only keys that work are held; an unknown,
 * revoked or expired key reads the database every time.
 */
import { randomUUID } from 'node:crypto';

export interface HeldKey<T> {
  value: T;
  /** When the key stops working on its own (a rolled key), epoch ms; null: never. */
  expiresAtMs: number | null;
}

interface Entry<T> extends HeldKey<T> {
  storedAt: number;
}

/** The channel drizzle/0008's triggers notify. */
export const KEY_CHANGES_CHANNEL = 'api_key_changes';
const KEY_CACHE_TTL_MS = 10_000;
const MAX_ENTRIES = 10_000;
/** How often a process NOTIFYs its heartbeat on KEY_CHANGES_CHANNEL. */
export const HEARTBEAT_EVERY_MS = 250;
/** The caches serve only while a heartbeat sent at most this long ago has been heard. */
const HEARD_WITHIN_MS = 1000;
const HEARTBEAT = 'heartbeat:';

/** Whether a notification on KEY_CHANGES_CHANNEL is a heartbeat (any process's), not a change. */
export const isHeartbeat = (payload: string) => payload.startsWith(HEARTBEAT);

export class KeyCache<T> {
  private readonly entries = new Map<string, Entry<T>>();
  /** Bumped by every invalidation: a lookup that overlapped one does not store what it read. */
  private generation = 0;
  private listening = false;
  /** When the newest heartbeat heard since the LISTEN took effect was sent (this clock). */
  private heardSentAt = -Infinity;

  constructor(
    private readonly ttlMs = KEY_CACHE_TTL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether entries are served (the notifications are being heard, a heartbeat proves it). */
  get active(): boolean {
    return this.listening && this.now() - this.heardSentAt <= HEARD_WITHIN_MS;
  }

  /**
   * LISTEN took effect (first time or after a reconnect): start afresh, and serve entries once
   * a heartbeat sent from now on is heard.
   */
  heard(): void {
    this.invalidate();
    this.listening = true;
    this.heardSentAt = -Infinity;
  }

  /** A heartbeat sent at `sentAt` (this clock) was heard: what was committed before it was too. */
  beat(sentAt: number): void {
    this.heardSentAt = Math.max(this.heardSentAt, sentAt);
  }

  /** The notifications are not being heard: every lookup reads the database. */
  deaf(): void {
    this.listening = false;
    this.heardSentAt = -Infinity;
    this.invalidate();
  }

  /** A key or an app changed somewhere: forget every key. */
  invalidate(): void {
    this.generation += 1;
    this.entries.clear();
  }

  /** The held key for `digest`, or what `read` finds (held for next time if it works). */
  async lookup(
    digest: string,
    read: () => Promise<HeldKey<T> | undefined>,
  ): Promise<T | undefined> {
    if (!this.active) return (await read())?.value;
    const now = this.now();
    const held = this.entries.get(digest);
    if (held) {
      if (now - held.storedAt < this.ttlMs && (held.expiresAtMs === null || held.expiresAtMs > now))
        return held.value;
      this.entries.delete(digest);
    }
    const generation = this.generation;
    const found = await read();
    if (found && this.active && generation === this.generation) {
      if (this.entries.size >= MAX_ENTRIES) {
        // the oldest entry (a Map iterates in insertion order)
        this.entries.delete(this.entries.keys().next().value!);
      }
      this.entries.set(digest, { ...found, storedAt: now });
    }
    return found?.value;
  }
}

/**
 * Every credential cache of a process (API keys, OAuth access tokens): they hear the one channel,
 * and deleting an app drops what each holds.
 */
export class HeldCredentials {
  /** This process's heartbeats are told from others' (and from changes) by it. */
  private readonly id = randomUUID();

  constructor(
    private readonly caches: readonly Pick<
      KeyCache<unknown>,
      'heard' | 'deaf' | 'invalidate' | 'beat' | 'active'
    >[],
    private readonly now: () => number = Date.now,
  ) {}

  /** The payload of this process's next heartbeat on KEY_CHANGES_CHANNEL. */
  /** Whether every cache serves what it holds (the changes are heard, heartbeats prove it). */
  get active(): boolean {
    return this.caches.every((cache) => cache.active);
  }

  heartbeat(): string {
    return `${HEARTBEAT}${this.id}:${this.now()}`;
  }

  /** A notification on KEY_CHANGES_CHANNEL: a heartbeat (ours proves the channel), or a change. */
  notified(payload: string): void {
    if (!isHeartbeat(payload)) return this.invalidate();
    const [id, sentAt] = payload.slice(HEARTBEAT.length).split(':');
    if (id === this.id) for (const cache of this.caches) cache.beat(Number(sentAt));
  }

  heard(): void {
    for (const cache of this.caches) cache.heard();
  }

  deaf(): void {
    for (const cache of this.caches) cache.deaf();
  }

  invalidate(): void {
    for (const cache of this.caches) cache.invalidate();
  }
}
