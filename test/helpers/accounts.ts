/** Accounts for tests, made through the same services as the CLI and the portal. */
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { isHeartbeat, KEY_CHANGES_CHANNEL } from '../../src/apps/key-cache.ts';
import { waitUntil } from './wait.ts';

export interface Developer {
  userId: string;
  username: string;
  password: string;
  appId: string;
}

export async function createDeveloper(
  app: FastifyInstance,
  username = `dev_${randomBytes(4).toString('hex')}`,
): Promise<Developer> {
  const password = 'correct horse battery';
  const user = await app.services.users.create({
    username,
    password,
    email: `${username}@example.com`,
  });
  const created = await app.services.apps.create({
    ownerUsername: username,
    name: `${username}'s app`,
  });
  return { userId: user.id, username, password, appId: created.id };
}

export async function createKey(
  app: FastifyInstance,
  developer: Developer,
  env: 'sandbox' | 'live',
  scopes?: string,
): Promise<string> {
  if (env === 'live') await app.services.apps.completeMilestone(developer.appId, 'sandbox_listing');
  return (await app.services.keys.create({ appId: developer.appId, env, scopes })).key;
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/**
 * Runs `change` (SQL that stops or changes a key, as another process would) and resolves once
 * the server has heard it: the key cache drops what it held on the api_key_changes notification
 * (src/apps/key-cache.ts), which arrives just after the commit, not with it.
 */
export async function keyChangeHeard(
  app: FastifyInstance,
  change: () => Promise<unknown>,
): Promise<void> {
  let heard!: () => void;
  const notified = new Promise<void>((resolve) => (heard = resolve));
  // Registered after the server's own listener, so it runs after the server dropped the key.
  const unlisten = await app.database.listen(
    KEY_CHANGES_CHANNEL,
    (payload) => isHeartbeat(payload) || heard(),
    () => {},
  );
  try {
    await change();
    await notified;
  } finally {
    await unlisten();
  }
}

/** Payloads of the test's own notifications (settle()): not counted. */
const MARK = 'test-mark:';

/**
 * Every notification on the credential channel, as any server instance hears them. settle()
 * sends one of its own and waits for it: one connection hears notifications in commit order, so
 * by then every one committed before it has been heard (a "nothing notified" check needs no
 * pause).
 */
export async function listenToCredentialChanges(
  app: FastifyInstance,
): Promise<{ count(): number; settle(): Promise<void> }> {
  let count = 0;
  const marks = new Set<string>();
  await app.database.listen(
    KEY_CHANGES_CHANNEL,
    (payload) => {
      if (payload.startsWith(MARK)) marks.add(payload);
      else if (!isHeartbeat(payload)) count += 1;
    },
    () => {},
  );
  let sent = 0;
  return {
    count: () => count,
    async settle() {
      const mark = `${MARK}${(sent += 1)}`;
      await app.db.execute(sql`select pg_notify(${KEY_CHANGES_CHANNEL}, ${mark})`);
      await waitUntil('our own notification', () => marks.has(mark), { timeoutMs: 5000 });
    },
  };
}

/**
 * Revokes a key or an access token with the triggers off for that one statement (a replica's
 * role): nothing announces it, so a server that holds the credential keeps answering from it.
 */
export async function revokeUnannounced(
  app: FastifyInstance,
  table: 'api_keys' | 'oauth_tokens',
  id: string,
): Promise<void> {
  await app.db.transaction(async (tx) => {
    await tx.execute(sql`set local session_replication_role = replica`);
    await tx.execute(sql`update ${sql.identifier(table)} set revoked_at = now() where id = ${id}`);
  });
}
