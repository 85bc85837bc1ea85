import {
  and,
  asc,
  count,
  eq,
  getTableColumns,
  isNotNull,
  isNull,
  sql,
  type SQL,
} from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { RenderedSql } from '../db/rows.ts';
import { unindexed } from '../db/unique-lookups.ts';
import {
  apiKeys,
  appClientSecrets,
  appInvitations,
  appMembers,
  appMilestones,
  appRedirectUris,
  apps,
  users,
} from '../db/schema.ts';
import type { AppInvitationRow, AppRow, ApiKeyRow, MilestoneRow } from '../db/schema.ts';
import type { AppRole } from '../lib/roles.ts';
import type { ChangedListings } from '../listings/listing-changes.ts';

/**
 * A sandbox create completes its app's sandbox_listing milestone (apps-service.ts MILESTONES;
 * docs/portal.md, the go-live checklist): a recording of listing changes
 * (src/listings/listing-changes.ts), so the milestone commits with the create's own statement.
 * Idempotent: the first completion's time is kept.
 */
export function completeSandboxMilestone(changed: ChangedListings): SQL | null {
  if (changed.type !== 'listing.created' || changed.environment !== 'sandbox') return null;
  const appId = changed.columns.app_id;
  return sql`sandbox_milestone as (
      insert into app_milestones (app_id, name)
      select distinct ${appId}, 'sandbox_listing' from ${changed.table} where ${appId} is not null
      on conflict do nothing
    )`;
}

export type ActiveKey = Pick<ApiKeyRow, 'id' | 'appId' | 'environment' | 'keyHash' | 'scopes'> & {
  ownerId: string;
  /** When a rolled key stops working, epoch ms (null: not rolled), for the key cache. */
  expiresAtMs: number | null;
};

/**
 * Every keyed request runs it: rendered once (src/db/rows.ts RenderedSql). api_keys_hash_key, then
 * the app by apps_pkey, whatever the statistics say: the app is joined by `unindexed(k.app_id)`
 * (src/db/unique-lookups.ts), so api_keys_app_idx cannot start the plan from the apps side.
 */
const ACTIVE_KEY_BY_HASH = new RenderedSql<{ keyHash: string }>(
  sql`select k.id, k.app_id as "appId", k.environment, k.key_hash as "keyHash", k.scopes, a.owner_id as "ownerId",
        (extract(epoch from k.expires_at) * 1000)::float8 as "expiresAtMs"
      from api_keys k join apps a on a.id = ${unindexed('k.app_id')}
      where k.key_hash = ${sql.placeholder('keyHash')} and k.revoked_at is null
        and (k.expires_at is null or k.expires_at > now()) and a.deleted_at is null`,
);

/** A key as the app's list shows it: with the username of the member who made it. */
export type ListedKey = ApiKeyRow & { createdByUsername: string | null };

export class AppsRepository {
  constructor(private readonly db: Db) {}

  transaction<T>(work: (tx: Db) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  async insert(values: typeof apps.$inferInsert, tx: Db = this.db): Promise<AppRow> {
    const [row] = await tx.insert(apps).values(values).returning();
    return row!;
  }

  /** apps_pkey, then the owner by users_pkey (joined `unindexed`: src/db/unique-lookups.ts). */
  async findById(
    id: string,
    tx: Db = this.db,
  ): Promise<(AppRow & { ownerUsername: string }) | undefined> {
    const [row] = await tx
      .select({ app: apps, ownerUsername: users.username })
      .from(apps)
      .innerJoin(users, eq(users.id, unindexed(apps.ownerId)))
      .where(and(eq(apps.id, id), isNull(apps.deletedAt)))
      .limit(1);
    return row ? { ...row.app, ownerUsername: row.ownerUsername } : undefined;
  }

  /**
   * How many apps (not deleted) the owner has, their user row locked until the transaction ends:
   * two creations at once cannot both take the last place.
   */
  async lockAndCountOwned(ownerId: string, tx: Db): Promise<number> {
    await tx.execute(sql`select id from users where id = ${ownerId} for no key update`);
    const [row] = await tx
      .select({ n: count() })
      .from(apps)
      .where(and(eq(apps.ownerId, ownerId), isNull(apps.deletedAt)));
    return row!.n;
  }

  async listByOwner(ownerId: string, tx: Db = this.db): Promise<AppRow[]> {
    return tx
      .select()
      .from(apps)
      .where(and(eq(apps.ownerId, ownerId), isNull(apps.deletedAt)))
      .orderBy(asc(apps.createdAt));
  }

  /* ------------------------------------------------------------ members */

  async insertMember(values: typeof appMembers.$inferInsert, tx: Db = this.db): Promise<void> {
    await tx.insert(appMembers).values(values);
  }

  /** The app (not deleted) with its account holder's username and this user's role in it. */
  async findMembership(
    appId: string,
    userId: string,
    tx: Db = this.db,
  ): Promise<(AppRow & { ownerUsername: string; role: AppRole }) | undefined> {
    const [row] = await tx
      .select({ app: apps, ownerUsername: users.username, role: appMembers.role })
      .from(appMembers)
      .innerJoin(apps, eq(apps.id, appMembers.appId))
      .innerJoin(users, eq(users.id, unindexed(apps.ownerId)))
      .where(
        and(eq(appMembers.appId, appId), eq(appMembers.userId, userId), isNull(apps.deletedAt)),
      )
      .limit(1);
    return row ? { ...row.app, ownerUsername: row.ownerUsername, role: row.role } : undefined;
  }

  /** The apps (not deleted) this user is a member of, with their role, oldest first. */
  async listForMember(userId: string, tx: Db = this.db): Promise<(AppRow & { role: AppRole })[]> {
    const rows = await tx
      .select({ app: apps, role: appMembers.role })
      .from(appMembers)
      .innerJoin(apps, eq(apps.id, appMembers.appId))
      .where(and(eq(appMembers.userId, userId), isNull(apps.deletedAt)))
      .orderBy(asc(apps.createdAt), asc(apps.id));
    return rows.map((r) => ({ ...r.app, role: r.role }));
  }

  /** The app's members, by username, with who added them, oldest first. */
  async listMembers(
    appId: string,
    tx: Db = this.db,
  ): Promise<
    {
      userId: string;
      username: string;
      role: AppRole;
      addedBy: string | null;
      createdAt: Date;
    }[]
  > {
    const adder = sql<string | null>`(select username from users where id = ${appMembers.addedBy})`;
    return tx
      .select({
        userId: appMembers.userId,
        username: users.username,
        role: appMembers.role,
        addedBy: adder,
        createdAt: appMembers.createdAt,
      })
      .from(appMembers)
      .innerJoin(users, eq(users.id, appMembers.userId))
      .where(eq(appMembers.appId, appId))
      .orderBy(asc(appMembers.createdAt), asc(users.username));
  }

  /** The app's row locked until the transaction ends: one change of its members at a time. */
  async lockApp(appId: string, tx: Db): Promise<void> {
    await tx.execute(sql`select id from apps where id = ${appId} for update`);
  }

  async memberRole(appId: string, userId: string, tx: Db = this.db): Promise<AppRole | undefined> {
    const [row] = await tx
      .select({ role: appMembers.role })
      .from(appMembers)
      .where(and(eq(appMembers.appId, appId), eq(appMembers.userId, userId)))
      .limit(1);
    return row?.role;
  }

  async countOwners(appId: string, tx: Db = this.db): Promise<number> {
    const [row] = await tx
      .select({ n: count() })
      .from(appMembers)
      .where(and(eq(appMembers.appId, appId), eq(appMembers.role, 'owner')));
    return row!.n;
  }

  async setMemberRole(appId: string, userId: string, role: AppRole, tx: Db = this.db) {
    await tx
      .update(appMembers)
      .set({ role })
      .where(and(eq(appMembers.appId, appId), eq(appMembers.userId, userId)));
  }

  /* ------------------------------------------------------------ invitations */

  /** An open invitation (unresolved), expired or not. */
  async openInvitation(
    appId: string,
    userId: string,
    tx: Db = this.db,
  ): Promise<(AppInvitationRow & { expired: boolean }) | undefined> {
    const [row] = await tx
      .select({
        invitation: appInvitations,
        expired: sql<boolean>`${appInvitations.expiresAt} <= now()`,
      })
      .from(appInvitations)
      .where(
        and(
          eq(appInvitations.appId, appId),
          eq(appInvitations.userId, userId),
          isNull(appInvitations.resolution),
        ),
      )
      .limit(1);
    return row ? { ...row.invitation, expired: row.expired } : undefined;
  }

  async insertInvitation(
    values: Omit<typeof appInvitations.$inferInsert, 'expiresAt'>,
    days: number,
    tx: Db,
  ): Promise<AppInvitationRow> {
    const [row] = await tx
      .insert(appInvitations)
      .values({ ...values, expiresAt: sql`now() + make_interval(days => ${days})` })
      .returning();
    return row!;
  }

  /** Ends an open invitation (its id, of this app or of this invitee); false when none was. */
  async resolveInvitation(
    id: string,
    where: { appId?: string; userId?: string; open: 'unexpired' | 'any' },
    resolution: NonNullable<AppInvitationRow['resolution']>,
    tx: Db = this.db,
  ): Promise<AppInvitationRow | undefined> {
    const [row] = await tx
      .update(appInvitations)
      .set({ resolution, resolvedAt: sql`now()` })
      .where(
        and(
          eq(appInvitations.id, id),
          isNull(appInvitations.resolution),
          where.appId === undefined ? undefined : eq(appInvitations.appId, where.appId),
          where.userId === undefined ? undefined : eq(appInvitations.userId, where.userId),
          where.open === 'unexpired' ? sql`${appInvitations.expiresAt} > now()` : undefined,
        ),
      )
      .returning();
    return row;
  }

  async findInvitation(id: string, tx: Db = this.db): Promise<AppInvitationRow | undefined> {
    const [row] = await tx.select().from(appInvitations).where(eq(appInvitations.id, id)).limit(1);
    return row;
  }

  /** The app's open, unexpired invitations, oldest first, with the invitee's and inviter's name. */
  async pendingInvitations(appId: string, tx: Db = this.db) {
    return tx
      .select({
        id: appInvitations.id,
        username: users.username,
        role: appInvitations.role,
        invitedBy: sql<
          string | null
        >`(select username from users where id = ${appInvitations.invitedBy})`,
        createdAt: appInvitations.createdAt,
        expiresAt: appInvitations.expiresAt,
      })
      .from(appInvitations)
      .innerJoin(users, eq(users.id, appInvitations.userId))
      .where(
        and(
          eq(appInvitations.appId, appId),
          isNull(appInvitations.resolution),
          sql`${appInvitations.expiresAt} > now()`,
        ),
      )
      .orderBy(asc(appInvitations.createdAt));
  }

  /** A user's open, unexpired invitations to apps not deleted, oldest first. */
  async invitationsFor(userId: string, tx: Db = this.db) {
    return tx
      .select({
        id: appInvitations.id,
        appId: apps.id,
        appName: apps.name,
        role: appInvitations.role,
        invitedBy: sql<
          string | null
        >`(select username from users where id = ${appInvitations.invitedBy})`,
        expiresAt: appInvitations.expiresAt,
      })
      .from(appInvitations)
      .innerJoin(apps, eq(apps.id, appInvitations.appId))
      .where(
        and(
          eq(appInvitations.userId, userId),
          isNull(appInvitations.resolution),
          sql`${appInvitations.expiresAt} > now()`,
          isNull(apps.deletedAt),
        ),
      )
      .orderBy(asc(appInvitations.createdAt));
  }

  async deleteMember(appId: string, userId: string, tx: Db = this.db): Promise<void> {
    await tx
      .delete(appMembers)
      .where(and(eq(appMembers.appId, appId), eq(appMembers.userId, userId)));
  }

  /**
   * Makes another account the app's holder. The apps trigger of drizzle/0008 notifies
   * api_key_changes at commit, so every process's key cache forgets what it held for the app.
   */
  async setOwner(id: string, ownerId: string, tx: Db): Promise<void> {
    await tx.update(apps).set({ ownerId }).where(eq(apps.id, id));
  }

  async rename(id: string, name: string, tx: Db = this.db): Promise<void> {
    await tx.update(apps).set({ name }).where(eq(apps.id, id));
  }

  /**
   * Deletes an app, in the caller's transaction: marks it deleted (its row stays, so its events
   * and listings keep their references until they age out) and stops every credential and
   * destination it had: keys, the client secret, OAuth grants with their codes and tokens,
   * webhook endpoints (disabled, their pending deliveries failed); its saved searches are
   * deleted (their keys and matches with them, by cascade), so none matches again.
   */
  async markDeleted(id: string, tx: Db): Promise<void> {
    await tx.execute(
      sql`update apps set deleted_at = now() where id = ${id} and deleted_at is null`,
    );
    await tx.execute(
      sql`update api_keys set revoked_at = now() where app_id = ${id} and revoked_at is null`,
    );
    await tx.execute(
      sql`update app_client_secrets set revoked_at = now() where app_id = ${id} and revoked_at is null`,
    );
    await tx.execute(
      sql`update oauth_tokens t set revoked_at = now() from oauth_grants g
          where g.id = t.grant_id and g.app_id = ${id} and t.revoked_at is null`,
    );
    await tx.execute(
      sql`update oauth_grants set revoked_at = now() where app_id = ${id} and revoked_at is null`,
    );
    await tx.execute(
      sql`update webhook_endpoints set active = false, disabled_reason = 'The app was deleted.', disabled_at = now()
          where app_id = ${id} and active`,
    );
    await tx.execute(
      sql`update webhook_deliveries d set status = 'failed', last_error = 'app deleted'
          from webhook_endpoints ep
          where ep.id = d.endpoint_id and ep.app_id = ${id} and d.status = 'pending'`,
    );
    await tx.execute(sql`delete from saved_searches where app_id = ${id}`);
  }

  async setProductionApproved(id: string, tx: Db = this.db): Promise<void> {
    await tx
      .update(apps)
      .set({
        productionApproved: true,
        productionApprovedAt: sql`coalesce(${apps.productionApprovedAt}, now())`,
      })
      .where(eq(apps.id, id));
  }

  /** Idempotent: the first request's time is kept. */
  async setProductionRequested(id: string, tx: Db = this.db): Promise<Date | null> {
    const [row] = await tx
      .update(apps)
      .set({ productionRequestedAt: sql`coalesce(${apps.productionRequestedAt}, now())` })
      .where(eq(apps.id, id))
      .returning({ requestedAt: apps.productionRequestedAt });
    return row?.requestedAt ?? null;
  }

  /**
   * Apps whose owners asked for production approval and are not approved yet, oldest request first.
   */
  async pendingProductionRequests(
    tx: Db = this.db,
  ): Promise<(AppRow & { ownerUsername: string })[]> {
    const rows = await tx
      .select({ app: apps, ownerUsername: users.username })
      .from(apps)
      .innerJoin(users, eq(users.id, apps.ownerId))
      .where(
        and(
          isNotNull(apps.productionRequestedAt),
          eq(apps.productionApproved, false),
          isNull(apps.deletedAt),
        ),
      )
      .orderBy(asc(apps.productionRequestedAt));
    return rows.map((r) => ({ ...r.app, ownerUsername: r.ownerUsername }));
  }

  async redirectUris(appId: string, tx: Db = this.db): Promise<string[]> {
    const rows = await tx
      .select({ uri: appRedirectUris.uri })
      .from(appRedirectUris)
      .where(eq(appRedirectUris.appId, appId))
      .orderBy(asc(appRedirectUris.createdAt), asc(appRedirectUris.uri));
    return rows.map((r) => r.uri);
  }

  async addRedirectUris(appId: string, uris: string[], tx: Db = this.db): Promise<void> {
    if (uris.length === 0) return;
    await tx
      .insert(appRedirectUris)
      .values(uris.map((uri) => ({ appId, uri })))
      .onConflictDoNothing();
  }

  async removeRedirectUri(appId: string, uri: string, tx: Db = this.db): Promise<boolean> {
    const rows = await tx
      .delete(appRedirectUris)
      .where(and(eq(appRedirectUris.appId, appId), eq(appRedirectUris.uri, uri)))
      .returning({ uri: appRedirectUris.uri });
    return rows.length > 0;
  }

  /** Revokes the active secret (if any) and stores the new one's hash, atomically. */
  async replaceClientSecret(
    appId: string,
    secretHash: string,
    prefix: string,
    tx: Db = this.db,
  ): Promise<void> {
    await tx
      .update(appClientSecrets)
      .set({ revokedAt: sql`now()` })
      .where(and(eq(appClientSecrets.appId, appId), isNull(appClientSecrets.revokedAt)));
    await tx.insert(appClientSecrets).values({ appId, secretHash, prefix });
  }

  /** What may be shown of the active client secret: its prefix and when it was created. */
  async activeClientSecret(
    appId: string,
    tx: Db = this.db,
  ): Promise<{ prefix: string; createdAt: Date } | undefined> {
    const [row] = await tx
      .select({ prefix: appClientSecrets.prefix, createdAt: appClientSecrets.createdAt })
      .from(appClientSecrets)
      .where(and(eq(appClientSecrets.appId, appId), isNull(appClientSecrets.revokedAt)))
      .limit(1);
    return row;
  }

  async activeClientSecretHash(appId: string, tx: Db = this.db): Promise<string | undefined> {
    const [row] = await tx
      .select({ hash: appClientSecrets.secretHash })
      .from(appClientSecrets)
      .where(and(eq(appClientSecrets.appId, appId), isNull(appClientSecrets.revokedAt)))
      .limit(1);
    return row?.hash;
  }

  async milestones(appId: string, tx: Db = this.db): Promise<MilestoneRow[]> {
    return tx.select().from(appMilestones).where(eq(appMilestones.appId, appId));
  }

  /** Idempotent: the first completion's time is kept. */
  async completeMilestone(appId: string, name: string, tx: Db = this.db): Promise<void> {
    await tx.insert(appMilestones).values({ appId, name }).onConflictDoNothing();
  }

  async insertKey(values: typeof apiKeys.$inferInsert, tx: Db = this.db): Promise<ApiKeyRow> {
    const [row] = await tx.insert(apiKeys).values(values).returning();
    return row!;
  }

  /**
   * The app's keys that work in one environment (neither revoked nor past a roll's expiry), its
   * row locked until the transaction ends: two creations cannot both take the last place under
   * the cap (KeysService). The app's row first, as its deletion takes it before its keys.
   */
  async lockAndCountActiveKeys(appId: string, environment: string, tx: Db): Promise<number> {
    await tx.execute(sql`select id from apps where id = ${appId} for update`);
    const [row] = await tx
      .select({ count: sql<number>`count(*)::int` })
      .from(apiKeys)
      .where(
        and(
          eq(apiKeys.appId, appId),
          sql`${apiKeys.environment} = ${environment}`,
          isNull(apiKeys.revokedAt),
          sql`(${apiKeys.expiresAt} is null or ${apiKeys.expiresAt} > now())`,
        ),
      );
    return row!.count;
  }

  async findKeyById(id: string, tx: Db = this.db): Promise<ApiKeyRow | undefined> {
    const [row] = await tx.select().from(apiKeys).where(eq(apiKeys.id, id)).limit(1);
    return row;
  }

  /** The app's keys, oldest first, each with its maker's username (null: not a known member). */
  async listKeys(appId: string, tx: Db = this.db): Promise<ListedKey[]> {
    return tx
      .select({ ...getTableColumns(apiKeys), createdByUsername: users.username })
      .from(apiKeys)
      .leftJoin(users, eq(users.id, apiKeys.createdBy))
      .where(eq(apiKeys.appId, appId))
      .orderBy(asc(apiKeys.createdAt));
  }

  async renameKey(id: string, name: string, tx: Db = this.db): Promise<void> {
    await tx.update(apiKeys).set({ name }).where(eq(apiKeys.id, id));
  }

  /** The key, locked until the transaction ends (a roll). */
  async lockKey(id: string, tx: Db): Promise<ApiKeyRow | undefined> {
    const [row] = await tx.select().from(apiKeys).where(eq(apiKeys.id, id)).for('update');
    return row;
  }

  /** Sets a rolled key's expiry `seconds` from now; returns it (ISO 8601). */
  async expireKey(id: string, seconds: number, tx: Db): Promise<string> {
    const [row] = await tx
      .update(apiKeys)
      .set({ expiresAt: sql`now() + make_interval(secs => ${seconds})` })
      .where(eq(apiKeys.id, id))
      .returning({ expiresAt: apiKeys.expiresAt });
    return row!.expiresAt!.toISOString();
  }

  async revokeKey(id: string, tx: Db = this.db): Promise<void> {
    await tx
      .update(apiKeys)
      .set({ revokedAt: sql`coalesce(${apiKeys.revokedAt}, now())` })
      .where(eq(apiKeys.id, id));
  }

  /**
   * What authentication needs of an active key, on every keyed request: raw SQL and only these
   * columns (the query builder's select and row mapping cost a measurable share of a create's
   * CPU in `npm run bench`). One lookup on the unique key_hash index.
   */
  async findActiveKeyByHash(keyHash: string, tx: Db = this.db): Promise<ActiveKey | undefined> {
    const [row] = await ACTIVE_KEY_BY_HASH.rows<ActiveKey>(tx, { keyHash });
    return row;
  }

  /** Records use at most once a minute per key, so authentication stays read-mostly. */
  async touchKey(id: string, tx: Db = this.db): Promise<void> {
    await tx
      .update(apiKeys)
      .set({ lastUsedAt: sql`now()` })
      .where(
        and(
          eq(apiKeys.id, id),
          sql`(${apiKeys.lastUsedAt} is null or ${apiKeys.lastUsedAt} < now() - interval '60 seconds')`,
        ),
      );
  }
}
