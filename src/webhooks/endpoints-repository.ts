import { and, asc, desc, eq, getTableColumns, isNull, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { webhookEndpoints } from '../db/outbox-schema.ts';
import type { EndpointRow } from '../db/outbox-schema.ts';
import { users } from '../db/schema.ts';
import { queryRows } from '../db/rows.ts';
import type { Environment } from '../generated/schemas.ts';
import type { EndpointPageKey } from './endpoint-views.ts';

/** The row with its created_at at full precision: the next page's key. */
export type PagedEndpointRow = EndpointRow & { createdAtText: string };

/** An endpoint as the portal's list shows it: with the username of the member who made it. */
export type ListedEndpointRow = EndpointRow & { createdByUsername: string | null };

const notDeleted = isNull(webhookEndpoints.deletedAt);

export class EndpointsRepository {
  constructor(private readonly db: Db) {}

  /**
   * Inserts the endpoint unless its app already has `cap` active endpoints in its environment
   * (then undefined). The app's row is locked for the count, so concurrent creations for one app
   * cannot both take the last place.
   */
  async insertWithin(
    cap: number,
    values: typeof webhookEndpoints.$inferInsert & { environment: Environment },
  ): Promise<EndpointRow | undefined> {
    return this.db.transaction(async (tx) => {
      if ((await this.lockAndCount(tx, values.appId, values.environment)) >= cap) return undefined;
      const [row] = await tx.insert(webhookEndpoints).values(values).returning();
      return row!;
    });
  }

  /** The app's active endpoints in one environment, its row locked until the transaction ends. */
  private async lockAndCount(tx: Db, appId: string, environment: Environment): Promise<number> {
    await tx.execute(sql`select id from apps where id = ${appId} for update`);
    return this.activeCount(appId, environment, tx);
  }

  async findById(id: string, tx: Db = this.db): Promise<EndpointRow | undefined> {
    const [row] = await tx
      .select()
      .from(webhookEndpoints)
      .where(eq(webhookEndpoints.id, id))
      .limit(1);
    return row;
  }

  /** The app's endpoints (deleted ones left out), oldest first: the portal's list. */
  async listByApp(appId: string, tx: Db = this.db): Promise<ListedEndpointRow[]> {
    return tx
      .select({ ...getTableColumns(webhookEndpoints), createdByUsername: users.username })
      .from(webhookEndpoints)
      .leftJoin(users, eq(users.id, webhookEndpoints.createdBy))
      .where(and(eq(webhookEndpoints.appId, appId), notDeleted))
      .orderBy(asc(webhookEndpoints.createdAt));
  }

  /**
   * A page of the app's endpoints in one environment (deleted ones left out), newest first by
   * (created_at, id), after `after`; `limit` + 1 rows are read so the caller knows if more follow.
   */
  async page(
    appId: string,
    environment: Environment,
    limit: number,
    after: EndpointPageKey | undefined,
  ): Promise<PagedEndpointRow[]> {
    const t = webhookEndpoints;
    return this.db
      .select({
        ...getTableColumns(t),
        createdAtText: sql<string>`to_char(${t.createdAt} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`,
      })
      .from(t)
      .where(
        and(
          eq(t.appId, appId),
          eq(t.environment, environment),
          notDeleted,
          after
            ? sql`(${t.createdAt}, ${t.id}) < (${after.createdAt}::timestamptz, ${after.id}::uuid)`
            : undefined,
        ),
      )
      .orderBy(desc(t.createdAt), desc(t.id))
      .limit(limit + 1);
  }

  /** Changes the URL and/or the event types; undefined leaves a field as it is. */
  async update(id: string, changes: { url?: string; enabledEvents?: string[] }): Promise<void> {
    if (changes.url === undefined && changes.enabledEvents === undefined) return;
    await this.db
      .update(webhookEndpoints)
      .set({
        ...(changes.url !== undefined ? { url: changes.url } : {}),
        ...(changes.enabledEvents !== undefined ? { enabledEvents: changes.enabledEvents } : {}),
      })
      .where(eq(webhookEndpoints.id, id));
  }

  /**
   * Deleted: inactive for good, its secrets erased, its pending deliveries failed in the same
   * transaction. The row stays, since deliveries name it (the portal's Events pages show its URL).
   * False when it was deleted meanwhile.
   */
  async delete(id: string, reason: string): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const deleted = await tx
        .update(webhookEndpoints)
        .set({
          active: false,
          deletedAt: sql`now()`,
          disabledReason: reason,
          disabledAt: sql`coalesce(${webhookEndpoints.disabledAt}, now())`,
          secret: '',
          previousSecret: null,
          previousSecretExpiresAt: null,
        })
        .where(and(eq(webhookEndpoints.id, id), notDeleted))
        .returning({ id: webhookEndpoints.id });
      if (deleted.length === 0) return false;
      await tx.execute(
        sql`update webhook_deliveries set status = 'failed', last_error = 'endpoint deleted'
            where endpoint_id = ${id} and status = 'pending'`,
      );
      return true;
    });
  }

  /** The current secret becomes the previous one, signing too for `overlapSeconds`. */
  async rotateSecret(id: string, secret: string, overlapSeconds: number): Promise<Date> {
    const [row] = await this.db
      .update(webhookEndpoints)
      .set({
        previousSecret: sql`${webhookEndpoints.secret}`,
        previousSecretExpiresAt: sql`now() + make_interval(secs => ${overlapSeconds})`,
        secret,
      })
      .where(eq(webhookEndpoints.id, id))
      .returning({ expiresAt: webhookEndpoints.previousSecretExpiresAt });
    return row!.expiresAt!;
  }

  /** Disabled with a reason; its pending deliveries fail in the same transaction. */
  async disable(id: string, reason: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx
        .update(webhookEndpoints)
        .set({ active: false, disabledReason: reason, disabledAt: sql`now()` })
        .where(eq(webhookEndpoints.id, id));
      await tx.execute(
        sql`update webhook_deliveries set status = 'failed', last_error = 'endpoint disabled'
            where endpoint_id = ${id} and status = 'pending'`,
      );
    });
  }

  /**
   * Active again, its failure clock and last error cleared, unless its app already has `cap`
   * active endpoints in its environment (then false).
   */
  async enable(endpoint: EndpointRow, cap: number): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      if ((await this.lockAndCount(tx, endpoint.appId, endpoint.environment)) >= cap) return false;
      await tx
        .update(webhookEndpoints)
        .set({
          active: true,
          disabledReason: null,
          disabledAt: null,
          failingSince: null,
          lastError: null,
        })
        .where(eq(webhookEndpoints.id, endpoint.id));
      return true;
    });
  }

  /** The app's active endpoints in one environment. */
  async activeCount(appId: string, environment: Environment, tx: Db = this.db): Promise<number> {
    const [row] = await queryRows<{ n: number }>(
      tx,
      sql`select count(*)::int as n from webhook_endpoints
          where app_id = ${appId} and environment = ${environment} and active`,
    );
    return row?.n ?? 0;
  }

  /** The app's disabled endpoints, for the banner on its pages. */
  async listDisabled(appId: string): Promise<EndpointRow[]> {
    return this.db
      .select()
      .from(webhookEndpoints)
      .where(
        sql`${webhookEndpoints.appId} = ${appId} and not ${webhookEndpoints.active} and ${notDeleted}`,
      )
      .orderBy(asc(webhookEndpoints.createdAt));
  }
}
