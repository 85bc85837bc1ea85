import { and, count, desc, eq } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { listings, signIns, users } from '../db/schema.ts';
import type { SignInRow, UserRow } from '../db/schema.ts';

export type NewUser = typeof users.$inferInsert;

export class UsersRepository {
  constructor(private readonly db: Db) {}

  async insertSignIn(values: typeof signIns.$inferInsert, tx: Db = this.db): Promise<void> {
    await tx.insert(signIns).values(values);
  }

  /** The user's last `limit` sign-ins, newest first. */
  async lastSignIns(userId: string, limit: number, tx: Db = this.db): Promise<SignInRow[]> {
    return tx
      .select()
      .from(signIns)
      .where(eq(signIns.userId, userId))
      .orderBy(desc(signIns.id))
      .limit(limit);
  }

  async insert(values: NewUser, tx: Db = this.db): Promise<UserRow> {
    const [row] = await tx.insert(users).values(values).returning();
    return row!;
  }

  async findById(id: string, tx: Db = this.db): Promise<UserRow | undefined> {
    const [row] = await tx.select().from(users).where(eq(users.id, id)).limit(1);
    return row;
  }

  async findByUsername(username: string, tx: Db = this.db): Promise<UserRow | undefined> {
    const [row] = await tx.select().from(users).where(eq(users.username, username)).limit(1);
    return row;
  }

  async exists(tx: Db = this.db): Promise<boolean> {
    const rows = await tx.select({ id: users.id }).from(users).limit(1);
    return rows.length > 0;
  }

  /** Live active listings: what the public sees of a seller. */
  async countPublicListings(userId: string, tx: Db = this.db): Promise<number> {
    const [row] = await tx
      .select({ n: count() })
      .from(listings)
      .where(
        and(
          eq(listings.sellerId, userId),
          eq(listings.environment, 'live'),
          eq(listings.status, 'active'),
        ),
      );
    return Number(row?.n ?? 0);
  }
}
