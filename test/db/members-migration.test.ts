/**
 * Issue #61, members and roles: at its next start an existing deployment's apps each get their
 * account holder (apps.owner_id) as their first `owner` member (drizzle/0023), on either
 * database, so every app keeps exactly the access it had.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { deploymentBefore } from '../helpers/migrations.ts';

/** The migrations before drizzle/0023_app_members.sql. */
const BEFORE = 23;

const SEED = `
  insert into users (username, display_name, password_hash)
  values ('before_0023_a', 'A', 'x'), ('before_0023_b', 'B', 'x');
  insert into apps (owner_id, name) select id, 'a1' from users where username = 'before_0023_a';
  insert into apps (owner_id, name) select id, 'a2' from users where username = 'before_0023_a';
  insert into apps (owner_id, name, deleted_at)
  select id, 'b1', now() from users where username = 'before_0023_b';`;

t.test("each app's account holder becomes its owner", async (t) => {
  const open = await deploymentBefore(t, BEFORE, SEED);
  const handle = await open();
  t.teardown(() => handle.close());
  const rows = await queryRows<{ name: string; username: string; role: string; added_by: null }>(
    handle.db,
    sql`select a.name, u.username, m.role, m.added_by from app_members m
        join apps a on a.id = m.app_id join users u on u.id = m.user_id order by a.name`,
  );
  t.same(rows, [
    { name: 'a1', username: 'before_0023_a', role: 'owner', added_by: null },
    { name: 'a2', username: 'before_0023_a', role: 'owner', added_by: null },
    { name: 'b1', username: 'before_0023_b', role: 'owner', added_by: null },
  ]);
});
