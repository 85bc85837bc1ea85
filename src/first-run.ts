import { randomBytes } from 'node:crypto';
import type { Services } from './services.ts';

export interface FirstRunAccount {
  username: string;
  password: string;
  appId: string;
  sandboxKey: string;
}

/**
 * First run on the embedded database: PGlite is single-process, so the admin CLI cannot
 * open it while the server runs. When the embedded database has no users yet, the server
 * creates a demo developer, an app and a sandbox key, and prints them once (the key is
 * stored hashed and cannot be shown again).
 */
export async function createFirstRunAccount(services: Services): Promise<FirstRunAccount | null> {
  if (await services.users.any()) return null;
  const password = randomBytes(12).toString('base64url');
  const user = await services.users.create({
    username: 'demo',
    password,
    displayName: 'Demo developer',
  });
  const app = await services.apps.create({
    ownerUsername: user.username,
    name: 'Demo app',
    redirectUris: ['http://localhost:8080/callback'],
  });
  const key = await services.keys.create({ appId: app.id, env: 'sandbox' });
  return { username: user.username, password, appId: app.id, sandboxKey: key.key };
}
