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
 * listener was away are lost). An entry is also read again after `ttlMs`, so a listener that
 * died without the driver noticing delays a revocation by at most that long. Only keys that
 * work are held; an unknown, revoked or expired key reads the database every time.
 */
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

export class KeyCache<T> {
  private readonly entries = new Map<string, Entry<T>>();
  /** Bumped by every invalidation: a lookup that overlapped one does not store what it read. */
  private generation = 0;
  private listening = false;

  constructor(
    private readonly ttlMs = KEY_CACHE_TTL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether entries are served (the notifications are being heard). */
  get active(): boolean {
    return this.listening;
  }

  /** LISTEN took effect (first time or after a reconnect): start afresh and serve entries. */
  heard(): void {
    this.invalidate();
    this.listening = true;
  }

  /** The notifications are not being heard: every lookup reads the database. */
  deaf(): void {
    this.listening = false;
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
    if (!this.listening) return (await read())?.value;
    const now = this.now();
    const held = this.entries.get(digest);
    if (held) {
      if (now - held.storedAt < this.ttlMs && (held.expiresAtMs === null || held.expiresAtMs > now))
        return held.value;
      this.entries.delete(digest);
    }
    const generation = this.generation;
    const found = await read();
    if (found && this.listening && generation === this.generation) {
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
  constructor(
    private readonly caches: readonly Pick<KeyCache<unknown>, 'heard' | 'deaf' | 'invalidate'>[],
  ) {}

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
