import { NotFoundError, ValidationError } from '../errors.ts';
import type { Environment } from '../generated/schemas.ts';
import { displayPrefix, generateSecret, hashSecret, PREFIX, safeEqual } from '../lib/secrets.ts';
import { SCOPES, type Caller } from '../access.ts';
import type { AppsRepository } from './apps-repository.ts';
import type { ApiKeyRow } from '../db/schema.ts';
import { milestonesMissingError, type AppsService } from './apps-service.ts';

const DEFAULT_KEY_SCOPES = ['read', 'listings:write'];
const TOUCH_INTERVAL_MS = 60_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface CreatedKey {
  id: string;
  /** The plaintext key: shown once, never stored. */
  key: string;
  env: Environment;
  scopes: string[];
}

function parseScopes(raw: string | string[] | undefined): string[] {
  const scopes = [
    ...new Set((Array.isArray(raw) ? raw : (raw ?? '').split(/[\s,]+/)).filter(Boolean)),
  ];
  if (raw === undefined) return [...DEFAULT_KEY_SCOPES];
  if (scopes.length === 0) throw ValidationError.field('/scopes', 'must name at least one scope');
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length)
    throw ValidationError.field(
      '/scopes',
      `has unknown scope ${unknown.join(', ')}; known: ${SCOPES.join(', ')}`,
    );
  return SCOPES.filter((s) => scopes.includes(s));
}

export class KeysService {
  /** When this process last recorded each key's use (see touch). */
  private readonly touchedAt = new Map<string, number>();

  constructor(
    private readonly apps: AppsRepository,
    private readonly appsService: AppsService,
  ) {}

  /** A live key needs every go-live milestone (docs/portal.md); the error names what is missing. */
  async create(input: {
    appId: string;
    env: string;
    scopes?: string | string[] | undefined;
  }): Promise<CreatedKey> {
    if (input.env !== 'sandbox' && input.env !== 'live')
      throw ValidationError.field('/env', 'must be sandbox or live');
    const env: Environment = input.env;
    const scopes = parseScopes(input.scopes);
    const app = await this.appsService.get(input.appId);
    if (env === 'live') {
      const missing = await this.appsService.missingMilestones(app.id);
      if (missing.length > 0) throw milestonesMissingError('Live keys need', missing);
    }
    const prefix = env === 'live' ? PREFIX.liveKey : PREFIX.sandboxKey;
    const key = generateSecret(prefix);
    const row = await this.apps.insertKey({
      appId: app.id,
      environment: env,
      keyHash: hashSecret(key),
      prefix: displayPrefix(key, prefix),
      scopes,
    });
    return { id: row.id, key, env, scopes };
  }

  /**
   * `scope.appId`: only a key of that app (the portal acts for one app's owner); any other is not
   * found.
   */
  async revoke(
    keyId: string,
    scope: { appId?: string } = {},
  ): Promise<{ id: string; revoked: true }> {
    const key = UUID.test(keyId) ? await this.apps.findKeyById(keyId) : undefined;
    if (!key || (scope.appId !== undefined && key.appId !== scope.appId))
      throw new NotFoundError(`No API key with id ${keyId}.`);
    await this.apps.revokeKey(key.id);
    return { id: key.id, revoked: true };
  }

  list(appId: string): Promise<ApiKeyRow[]> {
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
   * Credential resolver for svc_sandbox_ / svc_live_ keys: the caller, or null if unknown or
   * revoked.
   */
  async resolve(credential: string): Promise<Caller | null> {
    const environment: Environment | null = credential.startsWith(PREFIX.liveKey)
      ? 'live'
      : credential.startsWith(PREFIX.sandboxKey)
        ? 'sandbox'
        : null;
    if (environment === null) return null;
    const digest = hashSecret(credential);
    const found = await this.apps.findActiveKeyByHash(digest);
    // The lookup is by digest; the comparison below is the constant-time check of what matched.
    if (!found || !safeEqual(found.keyHash, digest) || found.environment !== environment)
      return null;
    this.touch(found.id);
    return {
      kind: 'api_key',
      environment,
      userId: found.ownerId,
      appId: found.appId,
      credentialId: found.id,
      scopes: found.scopes,
    };
  }
}
