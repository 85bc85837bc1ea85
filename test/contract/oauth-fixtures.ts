/**
 * Real OAuth values for the contract tests: registered client apps (client_id, redirect URI,
 * client secret), a user who signs in through the real sign-in page and consents on the real
 * consent page (test/oauth/support.ts's Browser, CSRF included), fresh one-time codes (with or
 * without a PKCE challenge) and access tokens issued by POST /oauth/token through the recorder.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Browser } from '../helpers/browser.ts';
import {
  authorizePath,
  basicAuth,
  createClient,
  createEndUser,
  obtainCode,
  s256,
  type Client,
  type EndUser,
} from '../oauth/support.ts';
import type { Asserter, ContractRecorder } from './recorder.ts';

export const FORM = 'application/x-www-form-urlencoded';

/** A form-urlencoded body; undefined fields are left out, arrays repeat the field. */
export function form(fields: Record<string, string | readonly string[] | undefined>): {
  rawBody: string;
  contentType: string;
} {
  const body = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    for (const v of typeof value === 'string' ? [value] : value) body.append(name, v);
  }
  return { rawBody: body.toString(), contentType: FORM };
}

/** client_secret_post: the client's credentials as body fields. */
export const postAuth = (client: Client) => ({
  client_id: client.clientId,
  client_secret: client.clientSecret,
});
/** client_secret_basic: the client's credentials in an Authorization: Basic header. */
export const basicHeader = (client: Client) => basicAuth(client.clientId, client.clientSecret);

let addresses = 0;
/**
 * A client address of its own for each /oauth/token and /oauth/revoke request: those endpoints
 * are limited per IP (30 per minute), which is not what these scenarios exercise.
 */
export const nextAddress = () => `203.0.113.${(addresses = (addresses % 250) + 1)}`;
let browserAddresses = 0;
/** Same for the consent form posts of the browser (sign-in form posts: 10 per minute per IP). */
const nextBrowserAddress = () => `192.0.2.${(browserAddresses = (browserAddresses % 250) + 1)}`;

export interface CodeOptions {
  client?: Client;
  /** The PKCE challenge the authorization request carries (method S256); none when absent. */
  challenge?: string;
  scope?: string;
}

export class OAuthFixtures {
  private constructor(
    private readonly app: FastifyInstance,
    private readonly contract: ContractRecorder,
    /** The app the examples use: client_id, its registered redirect URI and client secret. */
    readonly client: Client,
    /** Another registered app, for codes and tokens that belong to someone else. */
    readonly otherClient: Client,
    /** An app whose registered redirect URI has a query of its own. */
    readonly queryClient: Client,
    /**
     * The user who authorizes the apps: a seller of their own, distinct from the API keys' owner.
     */
    readonly user: EndUser,
    /** That user's browser, signed in once through the sign-in page of /oauth/authorize. */
    readonly browser: Browser,
  ) {}

  static async create(app: FastifyInstance, contract: ContractRecorder): Promise<OAuthFixtures> {
    const client = await createClient(app, 'https://client.example.com/callback');
    const otherClient = await createClient(app, 'https://other.example.com/oauth/cb');
    const queryClient = await createClient(app, 'https://client.example.com/callback?tenant=7');
    const user = await createEndUser(app);
    const browser = new Browser(app);
    const consent = await browser.signIn(
      authorizePath({
        response_type: 'code',
        client_id: client.clientId,
        redirect_uri: client.redirectUri,
      }),
      user,
    );
    if (!consent.body.includes('name="decision"'))
      throw new Error(`signed in, but no consent page: ${consent.statusCode}`);
    return new OAuthFixtures(app, contract, client, otherClient, queryClient, user, browser);
  }

  /** The Cookie header of the signed-in browser. */
  sessionCookie(): string {
    return [...this.browser.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  /**
   * The signed-in session in a browser of its own client address: each consent is a form post
   * to /oauth/authorize, limited per IP like sign-in posts.
   */
  private sessionBrowser(): Browser {
    const browser = new Browser(this.app, nextBrowserAddress());
    for (const [name, value] of this.browser.cookies) browser.cookies.set(name, value);
    return browser;
  }

  /** A fresh code: the user's browser loads the authorization request and presses Allow. */
  code(options: CodeOptions = {}): Promise<string> {
    const client = options.client ?? this.client;
    return obtainCode(this.sessionBrowser(), client, this.user, {
      state: 'contract-state',
      scope: options.scope,
      code_challenge: options.challenge,
      code_challenge_method: options.challenge === undefined ? undefined : 'S256',
    });
  }

  /** A code with a PKCE challenge, and its verifier. */
  async pkceCode(
    options: Omit<CodeOptions, 'challenge'> = {},
  ): Promise<{ code: string; verifier: string }> {
    const verifier = randomBytes(32).toString('base64url');
    return { code: await this.code({ ...options, challenge: s256(verifier) }), verifier };
  }

  /**
   * A fresh access token of `client` for the user, issued by POST /oauth/token
   * (client_secret_post).
   */
  async token(
    t: Asserter,
    label: string,
    options: { scope?: string; client?: Client } = {},
  ): Promise<string> {
    return (await this.tokens(t, label, options)).access;
  }

  /** A fresh access token and refresh token of `client` for the user, from one code exchange. */
  async tokens(
    t: Asserter,
    label: string,
    options: { scope?: string; client?: Client } = {},
  ): Promise<{ access: string; refresh: string }> {
    const client = options.client ?? this.client;
    const code = await this.code({ client, scope: options.scope });
    const res = await this.contract.send(t, {
      op: 'oauthToken',
      label: `fixture: ${label}`,
      ...form({
        grant_type: 'authorization_code',
        code,
        redirect_uri: client.redirectUri,
        ...postAuth(client),
      }),
      remoteAddress: nextAddress(),
      expect: 200,
    });
    const { access_token: access, refresh_token: refresh } = res.json ?? {};
    if (typeof access !== 'string' || typeof refresh !== 'string')
      throw new Error(`no tokens for ${label}: ${res.status} ${res.text.slice(0, 200)}`);
    return { access, refresh };
  }

  /** Revokes a token through POST /oauth/revoke (client_secret_basic). */
  async revoke(
    t: Asserter,
    token: string,
    label: string,
    client: Client = this.client,
  ): Promise<void> {
    await this.contract.send(t, {
      op: 'oauthRevoke',
      label: `fixture: ${label}`,
      headers: basicHeader(client),
      ...form({ token }),
      remoteAddress: nextAddress(),
      expect: 200,
    });
  }
}
