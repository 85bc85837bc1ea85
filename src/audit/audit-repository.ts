import { and, desc, eq, lt, or, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { auditEvents, type AuditEventRow } from '../db/schema.ts';

export class AuditRepository {
  constructor(private readonly db: Db) {}

  async insert(values: typeof auditEvents.$inferInsert, tx: Db = this.db): Promise<void> {
    await tx.insert(auditEvents).values(values);
  }

  /**
   * A page of the app's log, newest first: ids below `before` (a keyset page on
   * audit_events_app_idx), of one actor (a username, `admin_cli` or an API key's id) and action.
   */
  async page(
    appId: string,
    query: { before?: string; actor?: string; action?: string; limit: number },
    tx: Db = this.db,
  ): Promise<AuditEventRow[]> {
    const filters: (SQL | undefined)[] = [eq(auditEvents.appId, appId)];
    if (query.before !== undefined) filters.push(lt(auditEvents.id, query.before));
    if (query.action !== undefined) filters.push(eq(auditEvents.action, query.action));
    if (query.actor === 'admin_cli') filters.push(eq(auditEvents.actorType, 'admin_cli'));
    else if (query.actor !== undefined)
      filters.push(
        or(
          eq(auditEvents.actorName, query.actor),
          /^[0-9a-f-]{36}$/i.test(query.actor) ? eq(auditEvents.actorId, query.actor) : undefined,
        ),
      );
    return tx
      .select()
      .from(auditEvents)
      .where(and(...filters))
      .orderBy(desc(auditEvents.id))
      .limit(query.limit);
  }
}
