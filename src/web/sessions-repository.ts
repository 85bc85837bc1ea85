/** Sign-in sessions (user_sessions): only the SHA-256 of the cookie's token is stored. */
import { and, eq, gt, lte, sql } from 'drizzle-orm';
import type { UserRow } from '../db/schema.ts';
import type { PgInsertValue } from 'drizzle-orm/pg-core';
import type { Db } from '../db/client.ts';
import { userSessions, users } from '../db/schema.ts';
import { unindexed } from '../db/unique-lookups.ts';

/** `now() + seconds` on the database clock, which every expiry check uses. */
export const secondsFromNow = (seconds: number) =>
  sql<Date>`now() + make_interval(secs => ${seconds})`;

export class SessionsRepository {
  constructor(private readonly db: Db) {}

  async insert(values: PgInsertValue<typeof userSessions>, tx: Db = this.db): Promise<void> {
    await tx.insert(userSessions).values(values);
  }

  /**
   * The user of a session that has not expired: user_sessions_pkey, then the user by users_pkey
   * (joined `unindexed`, so user_sessions_user_idx cannot start the plan:
   * src/db/unique-lookups.ts).
   */
  async findUser(
    tokenHash: string,
    tx: Db = this.db,
  ): Promise<{ tokenHash: string; user: UserRow } | undefined> {
    const [row] = await tx
      .select({ tokenHash: userSessions.tokenHash, user: users })
      .from(userSessions)
      .innerJoin(users, eq(users.id, unindexed(userSessions.userId)))
      .where(and(eq(userSessions.tokenHash, tokenHash), gt(userSessions.expiresAt, sql`now()`)))
      .limit(1);
    return row;
  }

  async delete(tokenHash: string, tx: Db = this.db): Promise<void> {
    await tx.delete(userSessions).where(eq(userSessions.tokenHash, tokenHash));
  }

  /** Housekeeping at sign-in: the user's expired sessions go. */
  async deleteExpired(userId: string, tx: Db = this.db): Promise<void> {
    await tx
      .delete(userSessions)
      .where(and(eq(userSessions.userId, userId), lte(userSessions.expiresAt, sql`now()`)));
  }
}
