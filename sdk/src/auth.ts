/**
 * Credentials as openapi-fetch middleware: each sets `Authorization: Bearer …` on every request
 * (the document's `apiKey` and `oauth2` security schemes). The prefixes are checked up front so
 * that a secret pasted into the wrong place fails in your code, not as a 401 in production.
 */
import type { Middleware } from 'openapi-fetch';

export type Authenticator = Middleware & { readonly kind: 'api_key' | 'oauth_token' };

const API_KEY = /^svc_(sandbox|live)_[A-Za-z0-9_-]{32,}$/;
const OAUTH_TOKEN = /^svc_oauth_[A-Za-z0-9_-]+$/;

/** The environment an API key acts in, read from its prefix. */
export function keyEnvironment(key: string): 'sandbox' | 'live' {
  if (!API_KEY.test(key))
    throw new TypeError(
      'Not an API key: expected svc_sandbox_… or svc_live_… followed by at least 32 characters.',
    );
  return key.startsWith('svc_sandbox_') ? 'sandbox' : 'live';
}

/** An app's API key (`svc_sandbox_…` or `svc_live_…`). */
export function apiKeyAuth(key: string): Authenticator {
  keyEnvironment(key);
  return {
    kind: 'api_key',
    onRequest({ request }) {
      request.headers.set('authorization', `Bearer ${key}`);
      return request;
    },
  };
}

/**
 * An OAuth 2.0 access token (`svc_oauth_…`), or a function returning the current one (called
 * before every request, so a token store can swap tokens after a new authorization).
 */
export function oauthTokenAuth(token: string | (() => string | Promise<string>)): Authenticator {
  const check = (value: string): string => {
    if (!OAUTH_TOKEN.test(value))
      throw new TypeError('Not an OAuth access token: expected svc_oauth_….');
    return value;
  };
  if (typeof token === 'string') check(token);
  return {
    kind: 'oauth_token',
    async onRequest({ request }) {
      const value = check(typeof token === 'string' ? token : await token());
      request.headers.set('authorization', `Bearer ${value}`);
      return request;
    },
  };
}
