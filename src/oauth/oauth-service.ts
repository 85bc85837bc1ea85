/**
 * The OAuth 2.0 authorization server's rules (docs/oauth.md): clients, grants, codes
 * and access tokens. The HTTP endpoints (authorize.ts, token.ts, revoke.ts), the credential
 * resolver and the authorized-apps page all go through here; later the portal will too.
 *
 * A grant is one user's consent to one app; its code and tokens hang off it. Revoking the
 * grant revokes everything issued under it: what a replayed code, a reused refresh token, the
 * revocation of a refresh token and signing an app out all do.
 */
import { afterCommit } from '../db/unit-of-work.ts';
import type { UsersRepository } from '../accounts/users-repository.ts';
import type { AppsRepository } from '../apps/apps-repository.ts';
import { KeyCache } from '../apps/key-cache.ts';
import type { Db } from '../db/client.ts';
import { generateSecret, hashSecret, PREFIX, safeEqual } from '../lib/secrets.ts';
import type { Caller, Scope } from '../access.ts';
import { InvalidGrantError, InvalidScopeError } from './oauth-errors.ts';
import {
  idleExpiry,
  secondsFromNow,
  type LiveAccessToken,
  type OAuthRepository,
} from './oauth-repository.ts';
import type { GrantRow } from '../db/schema.ts';
import { verifierMatches } from './pkce.ts';

/** docs/oauth.md: authorization codes live about 10 minutes. */
const CODE_TTL_SECONDS = 10 * 60;
/** docs/oauth.md: access tokens live 30 days (`expires_in: 2592000`). */
const ACCESS_TOKEN_TTL_SECONDS = 30 * 24 * 60 * 60;
/**
 * A refresh token expires after 90 days without use (each refresh issues one good for 90 more)...
 */
const REFRESH_TOKEN_IDLE_SECONDS = 90 * 24 * 60 * 60;
/**
 * ...and one year after the user's consent at the latest: then the user authorizes the app again.
 */
const GRANT_LIFETIME_SECONDS = 365 * 24 * 60 * 60;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/**
 * Compared against when a client has no secret, so a missing client costs the same as a wrong
 * secret.
 */
const NO_SECRET = hashSecret('no client secret');

/** A registered app seen as an OAuth client. */
export interface OAuthClient {
  id: string;
  name: string;
  ownerUsername: string;
  ownerDisplayName: string;
  redirectUris: string[];
}

export interface AuthorizationDecision {
  clientId: string;
  userId: string;
  redirectUri: string;
  scopes: readonly Scope[];
  /** S256 challenge, or null when the client did not use PKCE. */
  codeChallenge: string | null;
}

export interface CodeExchange {
  clientId: string;
  code: string;
  redirectUri: string;
  codeVerifier: string | undefined;
}

export interface RefreshRequest {
  clientId: string;
  refreshToken: string;
  /** Narrower scopes for the new access token; undefined: all of the grant's. */
  scopes: readonly Scope[] | undefined;
}

export interface IssuedTokens {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
  scopes: string[];
}

export interface AuthorizedApp {
  appId: string;
  name: string;
  ownerUsername: string;
  scopes: string[];
  authorizedAt: Date;
}

/** `revoked`: the failure revoked a grant (a replayed code, a reused refresh token). */
type ExchangeOutcome =
  { ok: true; token: IssuedTokens } | { ok: false; reason: string; revoked?: true };

export class OAuthService {
  constructor(
    private readonly oauth: OAuthRepository,
    private readonly apps: AppsRepository,
    private readonly users: UsersRepository,
    /**
     * Access tokens in use, held like API keys: while the server hears the changes to them
     * (drizzle/0009's triggers notify api_key_changes; src/services-plugin.ts listens). Revoking
     * here drops them at once; the CLI never listens, so it always reads.
     */
    readonly held: KeyCache<LiveAccessToken> = new KeyCache(),
  ) {}

  /** The app whose id is `clientId`, with its registered redirect URIs; undefined if none. */
  async findClient(clientId: string): Promise<OAuthClient | undefined> {
    const app = UUID.test(clientId) ? await this.apps.findById(clientId) : undefined;
    if (!app) return undefined;
    const [redirectUris, owner] = await Promise.all([
      this.apps.redirectUris(app.id),
      this.users.findById(app.ownerId),
    ]);
    return {
      id: app.id,
      name: app.name,
      ownerUsername: app.ownerUsername,
      ownerDisplayName: owner?.displayName ?? app.ownerUsername,
      redirectUris,
    };
  }

  /**
   * Client secret check (RFC 6749 §2.3.1): digests compared in constant time, the same work for an
   * unknown client.
   */
  async authenticateClient(clientId: string, clientSecret: string): Promise<boolean> {
    const stored = UUID.test(clientId)
      ? await this.apps.activeClientSecretHash(clientId)
      : undefined;
    const matches = safeEqual(hashSecret(clientSecret), stored ?? NO_SECRET);
    return stored !== undefined && matches;
  }

  /**
   * The user allowed the request: a new grant and its one-time code (svc_ac_), bound to client,
   * redirect URI and challenge.
   */
  async issueCode(decision: AuthorizationDecision): Promise<string> {
    const code = generateSecret(PREFIX.authorizationCode);
    await this.oauth.transaction(async (tx) => {
      const grant = await this.oauth.insertGrant(
        { appId: decision.clientId, userId: decision.userId, scopes: [...decision.scopes] },
        tx,
      );
      await this.oauth.insertCode(
        {
          codeHash: hashSecret(code),
          grantId: grant.id,
          redirectUri: decision.redirectUri,
          scopes: [...decision.scopes],
          codeChallenge: decision.codeChallenge,
          codeChallengeMethod: decision.codeChallenge === null ? null : 'S256',
          expiresAt: secondsFromNow(CODE_TTL_SECONDS),
        },
        tx,
      );
    });
    return code;
  }

  /**
   * RFC 6749 §4.1.3 with RFC 7636 §4.6. The code row is locked, so of two concurrent
   * exchanges one wins and the other is a replay. A replay revokes the grant and with it the
   * tokens issued from the code (RFC 6749 §4.1.2); that revocation commits even though the
   * request fails, hence the outcome value instead of a throw inside the transaction.
   */
  async exchangeCode(request: CodeExchange): Promise<IssuedTokens> {
    const codeHash = hashSecret(request.code);
    const outcome = await this.oauth.transaction(async (tx): Promise<ExchangeOutcome> => {
      const found = request.code.startsWith(PREFIX.authorizationCode)
        ? await this.oauth.findCodeForUpdate(codeHash, tx)
        : undefined;
      if (!found || !safeEqual(found.code.codeHash, codeHash))
        return { ok: false, reason: 'The authorization code is invalid.' };
      const { code, grant, expired } = found;
      if (grant.appId !== request.clientId)
        return { ok: false, reason: 'The authorization code was issued to another client.' };
      if (code.consumedAt !== null) {
        // One code per grant: revoking the grant revokes exactly what was issued from the code.
        await this.oauth.revokeGrants([grant.id], tx);
        return {
          ok: false,
          reason: 'The authorization code was already used; the tokens issued from it are revoked.',
          revoked: true,
        };
      }
      if (expired) return { ok: false, reason: 'The authorization code has expired.' };
      if (grant.revokedAt !== null) return { ok: false, reason: 'The authorization was revoked.' };
      if (request.redirectUri !== code.redirectUri) {
        return {
          ok: false,
          reason: 'The redirect_uri does not match the one of the authorization request.',
        };
      }
      const pkce = checkPkce(code.codeChallenge, request.codeVerifier);
      if (pkce !== null) return { ok: false, reason: pkce };

      await this.oauth.consumeCode(codeHash, tx);
      return {
        ok: true,
        token: await this.issueTokens(tx, grant, code.scopes, code.scopes, codeHash),
      };
    });
    if (!outcome.ok) {
      if (outcome.revoked) afterCommit(() => this.held.invalidate());
      throw new InvalidGrantError(outcome.reason);
    }
    return outcome.token;
  }

  /**
   * RFC 6749 §6 with rotation and reuse detection (RFC 9700 §4.14.2). The refresh token's row
   * is locked; a second refresh with the same token that finds it locked is a concurrent request
   * of the same client (answered invalid_grant, nothing revoked); one that finds it rotated
   * arrived after the rotation committed: reuse, so the grant and every token of it are revoked
   * (that revocation commits although the request fails: an outcome value, not a throw).
   */
  async refresh(request: RefreshRequest): Promise<IssuedTokens> {
    const digest = hashSecret(request.refreshToken);
    const outcome = await this.oauth.transaction(async (tx): Promise<ExchangeOutcome> => {
      const found = request.refreshToken.startsWith(PREFIX.refreshToken)
        ? await this.oauth.lockToken(digest, tx)
        : undefined;
      if (!found) {
        const exists = request.refreshToken.startsWith(PREFIX.refreshToken)
          ? await this.oauth.findToken(digest, tx)
          : undefined;
        return exists && exists.appId === request.clientId
          ? {
              ok: false,
              reason:
                'This refresh token is being used by another request right now; use the refresh token that request returns.',
            }
          : { ok: false, reason: 'The refresh token is invalid.' };
      }
      const { token, grant, expired } = found;
      if (!safeEqual(token.tokenHash, digest) || token.kind !== 'refresh')
        return { ok: false, reason: 'The refresh token is invalid.' };
      if (grant.appId !== request.clientId)
        return { ok: false, reason: 'The refresh token was issued to another client.' };
      if (token.rotatedAt !== null) {
        await this.oauth.revokeGrants([grant.id], tx);
        return {
          ok: false,
          reason:
            'The refresh token was already used; every token of this authorization is revoked.',
          revoked: true,
        };
      }
      if (token.revokedAt !== null || grant.revokedAt !== null)
        return { ok: false, reason: 'The authorization was revoked.' };
      if (expired)
        return {
          ok: false,
          reason: 'The refresh token has expired; the user must authorize the app again.',
        };
      const scopes = request.scopes ?? token.scopes;
      const wider = scopes.filter((scope) => !token.scopes.includes(scope));
      if (wider.length > 0) {
        throw new InvalidScopeError(
          `The authorization does not include ${wider.join(', ')}; a refresh can only narrow the scopes.`,
        );
      }
      await this.oauth.rotateToken(token.id, tx);
      return {
        ok: true,
        token: await this.issueTokens(tx, grant, [...scopes], token.scopes, null),
      };
    });
    if (!outcome.ok) {
      if (outcome.revoked) afterCommit(() => this.held.invalidate());
      throw new InvalidGrantError(outcome.reason);
    }
    return outcome.token;
  }

  /** A new access token (30 days) and refresh token (90 idle days, within the grant's lifetime). */
  private async issueTokens(
    tx: Db,
    grant: GrantRow,
    accessScopes: string[],
    refreshScopes: string[],
    codeHash: string | null,
  ): Promise<IssuedTokens> {
    const accessToken = generateSecret(PREFIX.accessToken);
    const refreshToken = generateSecret(PREFIX.refreshToken);
    await this.oauth.insertToken(
      {
        grantId: grant.id,
        kind: 'access',
        tokenHash: hashSecret(accessToken),
        scopes: accessScopes,
        codeHash,
        expiresAt: secondsFromNow(ACCESS_TOKEN_TTL_SECONDS),
      },
      tx,
    );
    await this.oauth.insertToken(
      {
        grantId: grant.id,
        kind: 'refresh',
        tokenHash: hashSecret(refreshToken),
        scopes: refreshScopes,
        codeHash,
        expiresAt: idleExpiry(grant.id, REFRESH_TOKEN_IDLE_SECONDS, GRANT_LIFETIME_SECONDS),
      },
      tx,
    );
    return { accessToken, refreshToken, expiresIn: ACCESS_TOKEN_TTL_SECONDS, scopes: accessScopes };
  }

  /**
   * Credential resolver for svc_oauth_ tokens: acts in live as the authorizing user, with the
   * granted scopes.
   */
  async resolveAccessToken(credential: string): Promise<Caller | null> {
    if (!credential.startsWith(PREFIX.accessToken)) return null;
    const digest = hashSecret(credential);
    const found = await this.held.lookup(digest, async () => {
      const live = await this.oauth.findLiveAccessToken(digest);
      // Held until it expires at the latest (then read again, and refused).
      return live && { value: live, expiresAtMs: live.expiresAtMs };
    });
    // The lookup is by digest; this is the constant-time check of what matched.
    if (!found || !safeEqual(found.tokenHash, digest)) return null;
    return {
      kind: 'oauth',
      environment: 'live',
      userId: found.userId,
      appId: found.appId,
      appOwnerId: found.appOwnerId,
      credentialId: found.tokenId,
      scopes: found.scopes,
    };
  }

  /**
   * RFC 7009 §2.1: revokes the token if it was issued to this client; says nothing either way.
   * An access token goes alone; a refresh token takes its grant and every token of it (the
   * client signs the user out for good). The prefix tells the kind, so no hint is needed.
   */
  async revokeToken(clientId: string, token: string): Promise<void> {
    if (!token.startsWith(PREFIX.accessToken) && !token.startsWith(PREFIX.refreshToken)) return;
    const digest = hashSecret(token);
    const found = await this.oauth.findToken(digest);
    if (!found || !safeEqual(found.token.tokenHash, digest) || found.appId !== clientId) return;
    if (found.token.kind === 'refresh') await this.oauth.revokeGrants([found.token.grantId]);
    else await this.oauth.revokeToken(found.token.id);
    afterCommit(() => this.held.invalidate());
  }

  /** The apps a user has authorized and that still hold a working token, one entry per app. */
  async authorizedApps(userId: string): Promise<AuthorizedApp[]> {
    const byApp = new Map<string, AuthorizedApp>();
    for (const row of await this.oauth.authorizedApps(userId)) {
      const seen = byApp.get(row.appId);
      if (seen) {
        seen.scopes = [...new Set([...seen.scopes, ...row.scopes])];
      } else {
        byApp.set(row.appId, {
          appId: row.appId,
          name: row.appName,
          ownerUsername: row.ownerUsername,
          scopes: row.scopes,
          authorizedAt: row.authorizedAt,
        });
      }
    }
    return [...byApp.values()];
  }

  /**
   * The user signs an app out: every grant of theirs for it, and every token under them, is
   * revoked.
   */
  async revokeApp(userId: string, appId: string): Promise<number> {
    if (!UUID.test(appId)) return 0;
    const revoked = await this.oauth.transaction(async (tx) => {
      const grantIds = await this.oauth.grantIdsFor(userId, appId, tx);
      await this.oauth.revokeGrants(grantIds, tx);
      return grantIds.length;
    });
    afterCommit(() => this.held.invalidate());
    return revoked;
  }
}

/**
 * RFC 7636 §4.6, with downgrade protection: a verifier must come exactly when a challenge was sent.
 */
function checkPkce(challenge: string | null, verifier: string | undefined): string | null {
  if (challenge === null) {
    return verifier === undefined
      ? null
      : 'A code_verifier was sent, but the authorization request had no code_challenge.';
  }
  if (verifier === undefined)
    return 'The code_verifier is required: the authorization request had a code_challenge.';
  return verifierMatches(verifier, challenge)
    ? null
    : 'The code_verifier does not match the code_challenge.';
}
