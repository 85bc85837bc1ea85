/**
 * Grants, authorization codes and tokens (db/schema.ts). Every secret is looked up by its
 * SHA-256 digest; every method takes an optional transaction, opened by the service.
 */
import { and, asc, eq, inArray, isNull, sql, type SQL } from 'drizzle-orm';
import type { PgInsertValue } from 'drizzle-orm/pg-core';
import type { Db } from '../db/client.ts';

/** `now() + seconds`, on the database clock (the one every expiry check uses). */
export const secondsFromNow = (seconds: number) =>
  sql<Date>`now() + make_interval(secs => ${seconds})`;

/** `now() + idle`, but never later than the grant's creation + lifetime (refresh tokens). */
export const idleExpiry = (grantId: string, idleSeconds: number, lifetimeSeconds: number) =>
  sql<Date>`(select least(now() + make_interval(secs => ${idleSeconds}), g.created_at + make_interval(secs => ${lifetimeSeconds}))
    from oauth_grants g where g.id = ${grantId})`;
import { apps, oauthCodes, oauthGrants, oauthTokens, users } from '../db/schema.ts';
import type { GrantRow, CodeRow, TokenRow } from '../db/schema.ts';
import { RenderedSql } from '../db/rows.ts';
import { unindexed } from '../db/unique-lookups.ts';

/**
 * Whether the grant at `grant` (a row of oauth_grants, by its alias) is in use: not revoked, and
 * some token of it still works (an access or refresh token, unrevoked and unexpired; a rotated
 * refresh token is revoked). A grant whose every token expired is over, as a revoked one is
 * (docs/oauth.md "Consent"): /account/apps no longer lists it, and its app hears nothing more
 * about the user's listings (events-repository.ts sellerGrantsApp). The one definition of both.
 */
export function grantInUse(grant: SQL): SQL {
  return sql`(${grant}.revoked_at is null and exists (select 1 from oauth_tokens live_token
    where live_token.grant_id = ${grant}.id and live_token.revoked_at is null
      and live_token.expires_at > now()))`;
}

/** A working access token, as the credential resolver holds it (oauth-service.ts). */
export interface LiveAccessToken {
  tokenId: string;
  tokenHash: string;
  userId: string;
  appId: string;
  /** The app's owner (its developer account), read in the same lookup. */
  appOwnerId: string;
  scopes: string[];
  /** Epoch ms. */
  expiresAtMs: number;
}

/**
 * Rendered once per process (src/db/rows.ts): it runs for every token not held.
 *
 * Every lookup here by a digest or an id takes its unique index whatever the statistics say
 * (src/db/unique-lookups.ts): a token or code joins its grant by `unindexed(grant_id)`, so
 * oauth_tokens_grant_idx cannot start the plan from the grants side.
 */
const LIVE_ACCESS_TOKEN = new RenderedSql<{ tokenHash: string }>(
  sql`select t.id as "tokenId", t.token_hash as "tokenHash", g.user_id as "userId",
        g.app_id as "appId", a.owner_id as "appOwnerId", t.scopes,
        (extract(epoch from t.expires_at) * 1000)::float8 as "expiresAtMs"
      from oauth_tokens t join oauth_grants g on g.id = ${unindexed('t.grant_id')}
        join apps a on a.id = ${unindexed('g.app_id')}
      where t.token_hash = ${sql.placeholder('tokenHash')} and t.kind = 'access'
        and t.revoked_at is null and t.expires_at > now() and g.revoked_at is null`,
);

/** One line of the authorized-apps page: a live grant with its app and the app's owner. */
export interface AuthorizedAppRow {
  grantId: string;
  appId: string;
  appName: string;
  ownerUsername: string;
  scopes: string[];
  authorizedAt: Date;
}

export class OAuthRepository {
  constructor(private readonly db: Db) {}

  transaction<T>(work: (tx: Db) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  async insertGrant(values: typeof oauthGrants.$inferInsert, tx: Db = this.db): Promise<GrantRow> {
    const [row] = await tx.insert(oauthGrants).values(values).returning();
    return row!;
  }

  async insertCode(values: PgInsertValue<typeof oauthCodes>, tx: Db = this.db): Promise<void> {
    await tx.insert(oauthCodes).values(values);
  }

  /**
   * The code and its grant, locked until the transaction ends: two exchanges of one code
   * serialise here. `expired` is judged by the database clock, like every expiry here.
   */
  async findCodeForUpdate(
    codeHash: string,
    tx: Db,
  ): Promise<{ code: CodeRow; grant: GrantRow; expired: boolean } | undefined> {
    const [row] = await tx
      .select({
        code: oauthCodes,
        grant: oauthGrants,
        expired: sql<boolean>`${oauthCodes.expiresAt} <= now()`,
      })
      .from(oauthCodes)
      .innerJoin(oauthGrants, eq(oauthGrants.id, unindexed(oauthCodes.grantId)))
      .where(eq(oauthCodes.codeHash, codeHash))
      .limit(1)
      .for('update', { of: oauthCodes });
    return row;
  }

  async consumeCode(codeHash: string, tx: Db = this.db): Promise<void> {
    await tx
      .update(oauthCodes)
      .set({ consumedAt: sql`now()` })
      .where(eq(oauthCodes.codeHash, codeHash));
  }

  async insertToken(
    values: PgInsertValue<typeof oauthTokens>,
    tx: Db = this.db,
  ): Promise<TokenRow> {
    const [row] = await tx.insert(oauthTokens).values(values).returning();
    return row!;
  }

  /**
   * The access token with this digest while it works (not revoked, not expired, its grant not
   * revoked): what a request made with it acts as, and until when it may be held.
   */
  async findLiveAccessToken(tokenHash: string): Promise<LiveAccessToken | undefined> {
    const [row] = await LIVE_ACCESS_TOKEN.rows<LiveAccessToken>(this.db, { tokenHash });
    return row;
  }

  /**
   * A token and its grant, locked until the transaction ends, unless another transaction holds
   * the lock right now (SKIP LOCKED): then undefined, and findToken tells whether it exists.
   * Two refreshes with one refresh token serialise here without waiting.
   */
  async lockToken(
    tokenHash: string,
    tx: Db,
  ): Promise<{ token: TokenRow; grant: GrantRow; expired: boolean } | undefined> {
    const [row] = await tx
      .select({
        token: oauthTokens,
        grant: oauthGrants,
        expired: sql<boolean>`${oauthTokens.expiresAt} <= now()`,
      })
      .from(oauthTokens)
      .innerJoin(oauthGrants, eq(oauthGrants.id, unindexed(oauthTokens.grantId)))
      .where(eq(oauthTokens.tokenHash, tokenHash))
      .limit(1)
      .for('update', { of: oauthTokens, skipLocked: true });
    return row;
  }

  /** A refresh token was exchanged: it stops working, and presenting it again is reuse. */
  async rotateToken(id: string, tx: Db): Promise<void> {
    await tx
      .update(oauthTokens)
      .set({ rotatedAt: sql`now()`, revokedAt: sql`now()` })
      .where(eq(oauthTokens.id, id));
  }

  /** Any token with this digest, live or not, with the app it was issued to. */
  async findToken(
    tokenHash: string,
    tx: Db = this.db,
  ): Promise<{ token: TokenRow; appId: string } | undefined> {
    const [row] = await tx
      .select({ token: oauthTokens, appId: oauthGrants.appId })
      .from(oauthTokens)
      .innerJoin(oauthGrants, eq(oauthGrants.id, unindexed(oauthTokens.grantId)))
      .where(eq(oauthTokens.tokenHash, tokenHash))
      .limit(1);
    return row;
  }

  async revokeToken(id: string, tx: Db = this.db): Promise<void> {
    await tx
      .update(oauthTokens)
      .set({ revokedAt: sql`coalesce(${oauthTokens.revokedAt}, now())` })
      .where(eq(oauthTokens.id, id));
  }

  /**
   * Revokes grants and every token issued under them (codes die with the grant: it is checked at
   * exchange).
   */
  async revokeGrants(grantIds: string[], tx: Db = this.db): Promise<void> {
    if (grantIds.length === 0) return;
    await tx
      .update(oauthGrants)
      .set({ revokedAt: sql`coalesce(${oauthGrants.revokedAt}, now())` })
      .where(inArray(oauthGrants.id, grantIds));
    await tx
      .update(oauthTokens)
      .set({ revokedAt: sql`coalesce(${oauthTokens.revokedAt}, now())` })
      .where(inArray(oauthTokens.grantId, grantIds));
  }

  /** The user's grants that still hold a live token, oldest first, with app and owner. */
  async authorizedApps(userId: string, tx: Db = this.db): Promise<AuthorizedAppRow[]> {
    return tx
      .select({
        grantId: oauthGrants.id,
        appId: apps.id,
        appName: apps.name,
        ownerUsername: users.username,
        scopes: oauthGrants.scopes,
        authorizedAt: oauthGrants.createdAt,
      })
      .from(oauthGrants)
      .innerJoin(apps, eq(apps.id, oauthGrants.appId))
      .innerJoin(users, eq(users.id, apps.ownerId))
      .where(and(eq(oauthGrants.userId, userId), grantInUse(sql.raw('"oauth_grants"'))))
      .orderBy(asc(oauthGrants.createdAt));
  }

  /** The ids of the user's unrevoked grants for one app. */
  async grantIdsFor(userId: string, appId: string, tx: Db = this.db): Promise<string[]> {
    const rows = await tx
      .select({ id: oauthGrants.id })
      .from(oauthGrants)
      .where(
        and(
          eq(oauthGrants.userId, userId),
          eq(oauthGrants.appId, appId),
          isNull(oauthGrants.revokedAt),
        ),
      );
    return rows.map((r) => r.id);
  }
}
