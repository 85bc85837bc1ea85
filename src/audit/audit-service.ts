/**
 * The audit log of an app (docs/portal.md, "Audit log"): the one recorder of sensitive changes
 * (AuditService.audited), through which every door that makes one (the portal's forms, the admin
 * CLI, the API's endpoints with a key) makes it, with who did it and from where, and the one
 * reader (the portal's Audit log page, `admin app audit`, GET /api/v1/audit_events). A change
 * and its entries are one unit of work (src/db/unit-of-work.ts): they commit together or not at
 * all, so no change is left unrecorded. An entry names its target and what changed, never a
 * secret: record() takes no value it has not been given, and no caller gives it one.
 */
import { ValidationError } from '../errors.ts';
import { AUDIT_ACTION_VALUES } from '../generated/constants.ts';
import type { AuditEventRow } from '../db/schema.ts';
import { uuidV7 } from '../lib/uuid-v7.ts';
import type { UnitOfWork } from '../db/unit-of-work.ts';
import type { AuditRepository } from './audit-repository.ts';

/**
 * Every action the log records, in the words its filter and its entries use: the document's
 * AuditAction (OpenAPI listAuditEvents), generated.
 */
export const AUDIT_ACTIONS = AUDIT_ACTION_VALUES;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Who made a change: a signed-in user, an operator's admin CLI, or an API key (by its id). */
export type AuditActor =
  | { type: 'user'; userId: string; username: string; ip: string | null; userAgent: string | null }
  | { type: 'admin_cli' }
  | { type: 'api_key'; keyId: string; ip: string | null; userAgent: string | null };

export interface AuditNote {
  action: AuditAction;
  /** What was changed: a username, a key's or endpoint's id, a URI. */
  target?: string | undefined;
  /** What changed (roles, scopes, environment, URL): never a secret. */
  details?: Record<string, unknown>;
}

/** An entry to record: the app whose log it is in, and the note. */
export type AuditRecord = AuditNote & { appId: string };

export interface AuditEntry {
  id: string;
  at: string;
  actor: { type: AuditActor['type']; id: string | null; name: string | null };
  action: AuditAction;
  target: string | null;
  details: Record<string, unknown>;
  ip: string | null;
  user_agent: string | null;
}

const PAGE_SIZE = 50;
const USER_AGENT_MAX = 512;

const entryOf = (row: AuditEventRow): AuditEntry => ({
  id: row.id,
  at: new Date(row.createdAt).toISOString(),
  actor: { type: row.actorType, id: row.actorId, name: row.actorName },
  // Only record() writes the log, and it takes an AuditAction.
  action: row.action as AuditAction,
  target: row.target,
  details: row.details,
  ip: row.ip,
  user_agent: row.userAgent,
});

export class AuditService {
  /** The millisecond of the last id this process made (ids increase, see record). */
  private lastMs = 0;

  constructor(
    private readonly audit: AuditRepository,
    private readonly unit: UnitOfWork,
  ) {}

  /**
   * Makes a sensitive change and records it, as one unit of work: `work`'s statements and the
   * entries `entries` makes of its result commit together, or neither does (a refusal, or an
   * entry that cannot be written, rolls the change back). `work` holds the unit's transaction
   * while it runs: anything slow or external (a webhook URL's DNS, a check ping) is done before,
   * and what must follow the commit goes to afterCommit (src/db/unit-of-work.ts). No actor (an
   * OAuth token's change, which is not the app's team's): the change alone.
   */
  audited<T>(
    actor: AuditActor | null,
    work: () => Promise<T>,
    entries: (value: T) => AuditRecord | readonly AuditRecord[],
  ): Promise<T> {
    if (actor === null) return work();
    return this.unit.run(async () => {
      const value = await work();
      const made = entries(value);
      for (const { appId, ...note } of Array.isArray(made) ? made : [made])
        await this.record(appId, actor, note);
      return value;
    });
  }

  /**
   * Records one change of an app, now, in the unit of work running if any (audited's). Its id is
   * a UUIDv7 of a millisecond after the previous one this process made (at most a few ms ahead
   * in a burst): a UUIDv7's bits after the time are random, so two changes in one millisecond
   * would otherwise be listed in either order.
   */
  async record(appId: string, actor: AuditActor, note: AuditNote): Promise<void> {
    this.lastMs = Math.max(Date.now(), this.lastMs + 1);
    await this.audit.insert({
      id: uuidV7(this.lastMs),
      appId,
      actorType: actor.type,
      actorId: actor.type === 'user' ? actor.userId : actor.type === 'api_key' ? actor.keyId : null,
      actorName: actor.type === 'user' ? actor.username : null,
      action: note.action,
      target: note.target ?? null,
      details: note.details ?? {},
      ip: actor.type === 'admin_cli' ? null : actor.ip,
      userAgent:
        actor.type === 'admin_cli' ? null : (actor.userAgent?.slice(0, USER_AGENT_MAX) ?? null),
    });
  }

  /**
   * A page of the app's log, newest first, PAGE_SIZE entries (or `limit`, 1-100): `cursor` is
   * the previous page's next_cursor; `actor` a username, `admin_cli` or a key's id; `action` one
   * of AUDIT_ACTIONS.
   */
  async page(
    appId: string,
    query: { cursor?: string; actor?: string; action?: string; limit?: number },
  ): Promise<{ entries: AuditEntry[]; next_cursor: string | null }> {
    const limit = query.limit ?? PAGE_SIZE;
    if (!Number.isInteger(limit) || limit < 1 || limit > 100)
      throw ValidationError.field('/query/limit', 'must be an integer from 1 to 100');
    if (query.action !== undefined && !AUDIT_ACTIONS.some((a) => a === query.action))
      throw ValidationError.field('/query/action', `must be one of ${AUDIT_ACTIONS.join(', ')}`);
    let before: string | undefined;
    if (query.cursor !== undefined) {
      before = Buffer.from(query.cursor, 'base64url').toString('utf8');
      if (!/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(before))
        throw ValidationError.field(
          '/query/cursor',
          'must be the next_cursor of a previous page, as it was given',
        );
    }
    const rows = await this.audit.page(appId, {
      before,
      actor: query.actor?.trim() || undefined,
      action: query.action,
      limit: limit + 1,
    });
    const entries = rows.slice(0, limit).map(entryOf);
    const last = entries.at(-1);
    return {
      entries,
      next_cursor: rows.length > limit && last ? Buffer.from(last.id).toString('base64url') : null,
    };
  }
}
