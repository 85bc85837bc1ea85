import { asc, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { webhookEndpoints } from '../db/activity-schema.ts';
import type { EndpointRow } from '../db/activity-schema.ts';

export class EndpointsRepository {
  constructor(private readonly db: Db) {}

  async insert(
    values: typeof webhookEndpoints.$inferInsert,
    tx: Db = this.db,
  ): Promise<EndpointRow> {
    const [row] = await tx.insert(webhookEndpoints).values(values).returning();
    return row!;
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

  /** Active again, its failure clock and last error cleared. */
  async enable(id: string): Promise<void> {
    await this.db
      .update(webhookEndpoints)
      .set({
        active: true,
        disabledReason: null,
        disabledAt: null,
        failingSince: null,
        lastError: null,
      })
      .where(eq(webhookEndpoints.id, id));
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
