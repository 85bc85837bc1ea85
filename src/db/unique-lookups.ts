/**
 * Single-row lookups take their unique index whatever the planner's statistics say
 * (docs/architecture.md, "The database"). Statistics lag behind a table that grows between two
 * ANALYZEs: a seller's inventory, an app's keys, a grant's tokens. When they say such an owner
 * holds a row or two, every index that leads with the owner's column looks as cheap as the
 * unique one, and a lookup planned on it reads all of the owner's rows (the key lookup on
 * listings_seller_updated_idx: 23,238 rows, 49 ms a lookup).
 *
 * So a lookup names its unique index's columns as plain equalities, and writes every other
 * condition on the row, and the column its row joins another table's primary key by, through
 * `unindexed`: an expression the planner cannot match to any index. Only the unique index can
 * then serve the lookup (and only the other table's primary key the join, after it).
 * test/db/unique-lookups.test.ts checks each lookup's plan on tables analyzed while empty.
 *
 * The listing by external_id (findByExternalIds) names external_id alone: its unique index
 * leads with it (drizzle/0013), where four other listings indexes lead with (seller_id,
 * environment). It reads the listings that share the external_id across sellers: one for an
 * Idempotency-Key, as many as the sellers that use it for a shared one.
 */
import { sql, type Column, type SQL } from 'drizzle-orm';

/**
 * `column` as an expression no index is built on: `coalesce(c, c)`, which is the column's value
 * (null stays null) and which PostgreSQL 15 to 18 neither matches to an index nor simplifies
 * away (test/db/unique-lookups.test.ts would show it if a later version did).
 */
export function unindexed(column: Column | string): SQL {
  const c = typeof column === 'string' ? sql.raw(column) : sql`${column}`;
  return sql`coalesce(${c}, ${c})`;
}
