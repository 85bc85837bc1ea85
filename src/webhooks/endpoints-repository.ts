import { asc, eq } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { webhookEndpoints } from '../db/schema.ts';
import type { EndpointRow } from '../db/schema.ts';

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
}
