/**
 * OAuth test support: a registered client app, an end user, authorization and token requests
 * (the browser side is test/helpers/browser.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Browser } from '../helpers/browser.ts';

export interface Client {
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  ownerUsername: string;
  name: string;
}

export interface EndUser {
  id: string;
  username: string;
  password: string;
  email: string;
}

const suffix = () => randomBytes(4).toString('hex');

export async function createEndUser(
  app: FastifyInstance,
  username = `user_${suffix()}`,
): Promise<EndUser> {
  const password = 'a long enough password';
  const email = `${username}@example.com`;
  const user = await app.services.users.create({
    username,
    password,
    email,
    displayName: `User ${username}`,
  });
  return { id: user.id, username, password, email };
}

/** An app of another user (the developer), with a redirect URI and a client secret. */
export async function createClient(
  app: FastifyInstance,
  redirectUri = 'https://client.example.com/callback',
): Promise<Client> {
  const owner = await createEndUser(app, `dev_${suffix()}`);
  const name = `Listings Sync ${suffix()}`;
  const created = await app.services.apps.create({
    ownerUsername: owner.username,
    name,
    redirectUris: [redirectUri],
  });
  const { client_secret } = await app.services.apps.rotateClientSecret(created.id);
  return {
    clientId: created.id,
    clientSecret: client_secret,
    redirectUri,
    ownerUsername: owner.username,
    name,
  };
}

export function authorizePath(params: Record<string, string | undefined>): string {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) query.append(k, v);
  return `/oauth/authorize?${query.toString()}`;
}

export const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

/** Code for an authorization request (the query of the redirect). */
export async function obtainCode(
  browser: Browser,
  client: Client,
  user: EndUser,
  extra: Record<string, string | undefined> = {},
): Promise<string> {
  const location = await browser.authorize(
    authorizePath({
      response_type: 'code',
      client_id: client.clientId,
      redirect_uri: client.redirectUri,
      state: 'st',
      ...extra,
    }),
    user,
  );
  const code = location.searchParams.get('code');
  if (!code) throw new Error(`no code in ${location}`);
  return code;
}

export function tokenRequest(
  app: FastifyInstance,
  form: Record<string, string | undefined>,
  headers: Record<string, string> = {},
) {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(form)) if (v !== undefined) body.append(k, v);
  return app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    payload: body.toString(),
  });
}

export const basicAuth = (id: string, secret: string) => ({
  authorization: `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`,
});

/** A code exchanged for a token with client_secret_post. */
export async function exchange(
  app: FastifyInstance,
  client: Client,
  code: string,
  extra: Record<string, string> = {},
) {
  return tokenRequest(app, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: client.redirectUri,
    client_id: client.clientId,
    client_secret: client.clientSecret,
    ...extra,
  });
}

/** The RFC 6749 `error` a client library rejected with (its errors carry the server's answer). */
export async function oauthErrorOf(pending: Promise<unknown>): Promise<unknown> {
  try {
    await pending;
  } catch (error) {
    return (error as { error?: unknown }).error;
  }
  return 'no error';
}
