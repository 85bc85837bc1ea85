import { asc, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { webhookEndpoints } from '../db/activity-schema.ts';
import type { EndpointRow } from '../db/activity-schema.ts';
import { queryRows } from '../db/rows.ts';
import type { Environment } from '../generated/schemas.ts';

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

  async listByApp(appId: string, tx: Db = this.db): Promise<EndpointRow[]> {
    return tx
      .select()
      .from(webhookEndpoints)
      .where(eq(webhookEndpoints.appId, appId))
      .orderBy(asc(webhookEndpoints.createdAt));
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
      .where(sql`${webhookEndpoints.appId} = ${appId} and not ${webhookEndpoints.active}`)
      .orderBy(asc(webhookEndpoints.createdAt));
  }
}
