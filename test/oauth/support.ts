/**
 * OAuth test support: a registered client app, an end user, and a small "browser" that keeps
 * cookies across app.inject calls and reads the CSRF token of the page it was shown.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';

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

export async function createEndUser(app: FastifyInstance, username = `user_${suffix()}`): Promise<EndUser> {
  const password = 'a long enough password';
  const email = `${username}@example.com`;
  const user = await app.services.users.create({ username, password, email, displayName: `User ${username}` });
  return { id: user.id, username, password, email };
}

/** An app of another user (the developer), with a redirect URI and a client secret. */
export async function createClient(app: FastifyInstance, redirectUri = 'https://client.example.com/callback'): Promise<Client> {
  const owner = await createEndUser(app, `dev_${suffix()}`);
  const name = `Listings Sync ${suffix()}`;
  const created = await app.services.apps.create({ ownerUsername: owner.username, name, redirectUris: [redirectUri] });
  const { client_secret } = await app.services.apps.rotateClientSecret(created.id);
  return { clientId: created.id, clientSecret: client_secret, redirectUri, ownerUsername: owner.username, name };
}

export function authorizePath(params: Record<string, string | undefined>): string {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) query.append(k, v);
  return `/oauth/authorize?${query.toString()}`;
}

export const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

/** The CSRF token of the first form of a page. */
export function csrfOf(html: string): string {
  const match = /name="csrf_token" value="([^"]+)"/.exec(html);
  if (!match?.[1]) throw new Error('no CSRF token on the page');
  return match[1];
}

/** Decodes what the HTML template escaped, to reuse a form's action. */
export function formActionOf(html: string): string {
  const match = /<form method="post" action="([^"]+)"/.exec(html);
  if (!match?.[1]) throw new Error('no form on the page');
  return match[1].replaceAll('&amp;', '&').replaceAll('&quot;', '"').replaceAll('&#39;', "'").replaceAll('&lt;', '<').replaceAll('&gt;', '>');
}

let browsers = 0;

/**
 * Cookies kept across requests, as a browser would (path / only, which is all this server
 * sets). Each browser has its own client IP, so sign-in limits per IP stay per browser.
 */
export class Browser {
  readonly cookies = new Map<string, string>();
  /** The last page shown (to read its CSRF token). */
  page = '';

  constructor(
    private readonly app: FastifyInstance,
    readonly remoteAddress = `198.51.100.${(browsers += 1) % 250}`,
  ) {}

  private cookieHeader(): string | undefined {
    if (this.cookies.size === 0) return undefined;
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  private keep(res: LightMyRequestResponse): LightMyRequestResponse {
    for (const c of res.cookies as { name: string; value: string; maxAge?: number; expires?: Date }[]) {
      const expired = c.maxAge === 0 || (c.expires !== undefined && c.expires.getTime() <= Date.now()) || c.value === '';
      if (expired) this.cookies.delete(c.name);
      else this.cookies.set(c.name, c.value);
    }
    if (String(res.headers['content-type'] ?? '').startsWith('text/html')) this.page = res.body;
    return res;
  }

  async get(url: string): Promise<LightMyRequestResponse> {
    const cookie = this.cookieHeader();
    return this.keep(await this.app.inject({ method: 'GET', url, remoteAddress: this.remoteAddress, headers: cookie ? { cookie } : {} }));
  }

  async post(url: string, form: Record<string, string>): Promise<LightMyRequestResponse> {
    const cookie = this.cookieHeader();
    return this.keep(
      await this.app.inject({
        method: 'POST',
        url,
        remoteAddress: this.remoteAddress,
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
        payload: new URLSearchParams(form).toString(),
      }),
    );
  }

  /** Submits the form of the current page with its CSRF token. */
  submit(fields: Record<string, string>, action = formActionOf(this.page)): Promise<LightMyRequestResponse> {
    return this.post(action, { csrf_token: csrfOf(this.page), ...fields });
  }

  /** Signs in on the sign-in page shown by `authorizeUrl`, then lands on its consent page. */
  async signIn(authorizeUrl: string, user: EndUser): Promise<LightMyRequestResponse> {
    await this.get(authorizeUrl);
    const res = await this.submit({ username: user.username, password: user.password });
    if (res.statusCode !== 303) throw new Error(`sign-in failed: ${res.statusCode}`);
    return this.get(String(res.headers.location));
  }

  /** The whole browser side: sign in if needed, then press a consent button; returns the redirect. */
  async authorize(authorizeUrl: string, user: EndUser, decision: 'allow' | 'deny' = 'allow'): Promise<URL> {
    let page = await this.get(authorizeUrl);
    if (!page.body.includes('name="decision"')) page = await this.signIn(authorizeUrl, user);
    if (page.statusCode !== 200) throw new Error(`consent page: ${page.statusCode}`);
    const res = await this.submit({ decision });
    if (res.statusCode !== 303) throw new Error(`consent: ${res.statusCode} ${res.body.slice(0, 300)}`);
    return new URL(String(res.headers.location));
  }
}

/** Code for an authorization request (the query of the redirect). */
export async function obtainCode(
  browser: Browser,
  client: Client,
  user: EndUser,
  extra: Record<string, string | undefined> = {},
): Promise<string> {
  const location = await browser.authorize(
    authorizePath({ response_type: 'code', client_id: client.clientId, redirect_uri: client.redirectUri, state: 'st', ...extra }),
    user,
  );
  const code = location.searchParams.get('code');
  if (!code) throw new Error(`no code in ${location}`);
  return code;
}

export function tokenRequest(app: FastifyInstance, form: Record<string, string | undefined>, headers: Record<string, string> = {}) {
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
export async function exchange(app: FastifyInstance, client: Client, code: string, extra: Record<string, string> = {}) {
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
