import { afterCommit } from '../db/unit-of-work.ts';
import { ConflictError, NotFoundError, ValidationError } from '../errors.ts';
import type { Environment } from '../generated/schemas.ts';
import { displayPrefix, generateSecret, hashSecret, PREFIX, safeEqual } from '../lib/secrets.ts';
import { KEY_SCOPES, type Caller } from '../access.ts';
import type { ActiveKey, AppsRepository, ListedKey } from './apps-repository.ts';
import { madeColumns, type Maker } from '../lib/made-by.ts';
import type { KeyCache } from './key-cache.ts';
import type { ApiKeyRow } from '../db/schema.ts';
import { milestonesMissingError, type AppsService } from './apps-service.ts';

export type { ListedKey };

/** A new key's scopes when none are chosen (the spec; `searches` only when chosen). */
export const DEFAULT_KEY_SCOPES: readonly string[] = ['read', 'listings:write'];
const TOUCH_INTERVAL_MS = 60_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface CreatedKey {
  id: string;
  /** The plaintext key: shown once, never stored. */
  key: string;
  env: Environment;
  scopes: string[];
  name: string;
}

/** A roll's replacement, and until when the key it replaces keeps working. */
export interface RolledKey extends CreatedKey {
  replaced: { id: string; expires_at: string };
}

/**
 * How long a rolled key keeps working (docs/portal.md, rolling keys). "now" stops it at once,
 * as a revocation does, but the page still says it was rolled.
 */
const ROLL_OVERLAPS = { now: 0, '1h': 3_600, '24h': 86_400, '7d': 604_800 } as const;
type RollOverlap = keyof typeof ROLL_OVERLAPS;

const NAME_MAX = 100;

/**
 * Keys that work at once per app and environment (docs/portal.md): enough for a key per service
 * and per deploy stage, with rolls in their overlap; beyond it, creating or rolling with an
 * overlap is refused (409) until one is revoked. Bounds what one app can spread itself over (each
 * key its own long-poll places and rate limit, OpenAPI listEvents).
 */
export const MAX_ACTIVE_KEYS = 50;

const keyCapReached = (env: Environment) =>
  new ConflictError(
    `This app already has ${MAX_ACTIVE_KEYS} active ${env} API keys, the most one app may have in an environment. Revoke one before creating another.`,
  );

/** A key's name: trimmed, 1-100 characters. */
function keyName(raw: string | undefined, env: Environment): string {
  if (raw === undefined) return env === 'live' ? 'Live key' : 'Sandbox key';
  const name = raw.trim();
  if (name.length === 0) throw ValidationError.say('/name', 'Give the key a name.');
  if (name.length > NAME_MAX)
    throw ValidationError.say('/name', `Keep the name to ${NAME_MAX} characters or fewer.`);
  return name;
}

/** Revoked, or rolled and past its expiry: either way the key no longer works. */
export function keyStopped(key: Pick<ApiKeyRow, 'revokedAt' | 'expiresAt'>, now = new Date()) {
  return key.revokedAt !== null || (key.expiresAt !== null && key.expiresAt <= now);
}

function parseScopes(raw: string | string[] | undefined): string[] {
  const scopes = [
    ...new Set((Array.isArray(raw) ? raw : (raw ?? '').split(/[\s,]+/)).filter(Boolean)),
  ];
  if (raw === undefined) return [...DEFAULT_KEY_SCOPES];
  if (scopes.length === 0) throw ValidationError.say('/scopes', 'Choose at least one scope.');
  // The OAuth scopes and the key-only ones (webhooks:write: OpenAPI "Webhook endpoints").
  const unknown = scopes.filter((s) => !(KEY_SCOPES as readonly string[]).includes(s));
  if (unknown.length)
    throw ValidationError.say(
      '/scopes',
      `There is no scope ${unknown.join(', ')}; choose from ${KEY_SCOPES.join(', ')}.`,
    );
  return KEY_SCOPES.filter((s) => scopes.includes(s));
}

export class KeysService {
  /** When this process last recorded each key's use (see touch). */
  private readonly touchedAt = new Map<string, number>();

  constructor(
    private readonly apps: AppsRepository,
    private readonly appsService: AppsService,
    /**
     * Keys that work, by digest (src/apps/key-cache.ts). Holds nothing until the server hears
     * api_key_changes (src/services-plugin.ts); the CLI never does, so it always reads.
     */
    readonly held: KeyCache<ActiveKey>,
  ) {}

  /** A live key needs every go-live milestone (docs/portal.md); the error names what is missing. */
  async create(input: {
    appId: string;
    env: string;
    scopes?: string | string[] | undefined;
    /** Optional for the CLI (then "Sandbox key" or "Live key"); the portal's form requires it. */
    name?: string | undefined;
    /** Who makes it (the Keys page's "Made by"): a member on the portal, or the admin CLI. */
    by?: Maker | undefined;
  }): Promise<CreatedKey> {
    if (input.env !== 'sandbox' && input.env !== 'live')
      throw ValidationError.say('/env', 'Choose the sandbox or live environment.');
    const env: Environment = input.env;
    const name = keyName(input.name, env);
    const scopes = parseScopes(input.scopes);
    const app = await this.appsService.get(input.appId);
    if (env === 'live') {
      const missing = await this.appsService.missingMilestones(app.id);
      if (missing.length > 0) throw milestonesMissingError('Live keys need', missing);
    }
    const prefix = env === 'live' ? PREFIX.liveKey : PREFIX.sandboxKey;
    const key = generateSecret(prefix);
    const row = await this.apps.transaction(async (tx) => {
      if ((await this.apps.lockAndCountActiveKeys(app.id, env, tx)) >= MAX_ACTIVE_KEYS)
        throw keyCapReached(env);
      return this.apps.insertKey(
        {
          appId: app.id,
          environment: env,
          keyHash: hashSecret(key),
          prefix: displayPrefix(key, prefix),
          name,
          scopes,
          ...madeColumns(input.by),
        },
        tx,
      );
    });
    return { id: row.id, key, env, scopes, name };
  }

  /** A key of this app (or, for the CLI, any key); another app's is not found. */
  private async find(keyId: string, scope: { appId?: string }): Promise<ApiKeyRow> {
    const key = UUID.test(keyId) ? await this.apps.findKeyById(keyId) : undefined;
    if (!key || (scope.appId !== undefined && key.appId !== scope.appId))
      throw new NotFoundError(`No API key with id ${keyId}.`);
    return key;
  }

  get(keyId: string, scope: { appId?: string } = {}): Promise<ApiKeyRow> {
    return this.find(keyId, scope);
  }

  async rename(
    keyId: string,
    rawName: string,
    scope: { appId?: string } = {},
  ): Promise<{ id: string; name: string }> {
    const key = await this.find(keyId, scope);
    const name = keyName(rawName, key.environment);
    await this.apps.renameKey(key.id, name);
    return { id: key.id, name };
  }

  /**
   * Rolls a key: a replacement with the same app, environment, scopes and name, shown once, and
   * the old key keeps working until `overlap` from now (then 401, like a revoked key). One
   * transaction, the old key locked: two rolls of one key cannot both succeed.
   */
  async roll(
    keyId: string,
    overlap: string,
    scope: { appId?: string } = {},
    /** Who rolls it: the replacement's maker (the Keys page's "Made by"). */
    by?: Maker,
  ): Promise<RolledKey> {
    if (!Object.hasOwn(ROLL_OVERLAPS, overlap))
      throw ValidationError.say(
        '/expires_in',
        'Choose when the old key stops: now, 1h, 24h or 7d.',
      );
    const seconds = ROLL_OVERLAPS[overlap as RollOverlap];
    const found = await this.find(keyId, scope);
    const prefix = found.environment === 'live' ? PREFIX.liveKey : PREFIX.sandboxKey;
    const key = generateSecret(prefix);
    const rolled = await this.apps.transaction(async (tx) => {
      // The old key works on through an overlap: the replacement needs a place under the cap.
      const active = await this.apps.lockAndCountActiveKeys(found.appId, found.environment, tx);
      const old = await this.apps.lockKey(found.id, tx);
      if (!old || keyStopped(old))
        throw new ConflictError(
          'This key no longer works, so it cannot be rolled. Create a new key.',
        );
      if (old.expiresAt !== null)
        throw new ConflictError('This key was already rolled; roll its replacement instead.');
      if (seconds > 0 && active >= MAX_ACTIVE_KEYS)
        throw new ConflictError(
          `This app already has ${MAX_ACTIVE_KEYS} active ${old.environment} API keys, the most one app may have in an environment, so the old key cannot keep working beside its replacement. Roll it to stop now, or revoke another key first.`,
        );
      const row = await this.apps.insertKey(
        {
          appId: old.appId,
          environment: old.environment,
          keyHash: hashSecret(key),
          prefix: displayPrefix(key, prefix),
          name: old.name,
          scopes: old.scopes,
          ...madeColumns(by),
        },
        tx,
      );
      const expiresAt = await this.apps.expireKey(old.id, seconds, tx);
      return {
        id: row.id,
        key,
        env: old.environment,
        scopes: old.scopes,
        name: old.name,
        replaced: { id: old.id, expires_at: expiresAt },
      };
    });
    afterCommit(() => this.held.invalidate());
    return rolled;
  }

  /**
   * `scope.appId`: only a key of that app (the portal acts for one app's owner); any other is not
   * found.
   */
  async revoke(
    keyId: string,
    scope: { appId?: string } = {},
  ): Promise<{ id: string; revoked: true }> {
    const key = await this.find(keyId, scope);
    await this.apps.revokeKey(key.id);
    afterCommit(() => this.held.invalidate());
    return { id: key.id, revoked: true };
  }

  /** The app's keys, oldest first, each with the username of the member who made it. */
  list(appId: string): Promise<ListedKey[]> {
    return this.apps.listKeys(appId);
  }

  /**
   * Records a key's use, best effort (last-used time is informational): at most once a minute
   * per key and process, as touchKey does in SQL, so a busy key costs no UPDATE per request
   * (one fewer statement for each authenticated request; `npm run bench`).
   */
  private touch(keyId: string): void {
    const now = Date.now();
    if (now - (this.touchedAt.get(keyId) ?? 0) < TOUCH_INTERVAL_MS) return;
    // bounded: worst case, a few extra UPDATEs
    if (this.touchedAt.size >= 10_000) this.touchedAt.clear();
    this.touchedAt.set(keyId, now);
    this.apps.touchKey(keyId).catch(() => {});
  }

  /**
   * Credential resolver for svc_sandbox_ / svc_live_ keys: the caller, or null if unknown,
   * revoked, past a roll's expiry, or of a deleted app.
   */
  async resolve(credential: string): Promise<Caller | null> {
    const environment: Environment | null = credential.startsWith(PREFIX.liveKey)
      ? 'live'
      : credential.startsWith(PREFIX.sandboxKey)
        ? 'sandbox'
        : null;
    if (environment === null) return null;
    const digest = hashSecret(credential);
    const found = await this.held.lookup(digest, async () => {
      const key = await this.apps.findActiveKeyByHash(digest);
      return key && { value: key, expiresAtMs: key.expiresAtMs };
    });
    // The lookup is by digest; the comparison below is the constant-time check of what matched.
    if (!found || !safeEqual(found.keyHash, digest) || found.environment !== environment)
      return null;
    this.touch(found.id);
    return {
      kind: 'api_key',
      environment,
      userId: found.ownerId,
      appId: found.appId,
      appOwnerId: found.ownerId,
      credentialId: found.id,
      scopes: found.scopes,
    };
  }
}
