/**
 * Refreshing an OAuth 2.0 access token (RFC 6749 §6) from a server-side integration: the
 * client secret must never reach a browser. Each refresh rotates the refresh token: store the
 * new one before using the new access token, since the one sent stops working, and presenting it
 * again revokes the user's whole authorization (reuse detection, OpenAPI `/oauth/token`).
 */
import { errorFromResponse } from './errors.js';
import type { components } from './types.js';

export type OAuthTokenResponse = components['schemas']['OAuthTokenResponse'];

export interface RefreshOptions {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  refreshToken: string;
  /**
   * Narrower scopes for the new access token, space-separated; default: all of the authorization's.
   */
  scope?: string;
  fetch?: (request: Request) => Promise<Response>;
}

/**
 * POST /oauth/token with `grant_type=refresh_token` and client_secret_basic. Resolves to the new
 * tokens (`refresh_token` is the rotated one); rejects with a MarketplaceApiError whose `code` is
 * the RFC 6749 error (`invalid_grant`: expired, revoked or reused; the user must authorize again).
 */
export async function refreshAccessToken(
  options: RefreshOptions,
): Promise<OAuthTokenResponse & { refresh_token: string }> {
  const form = new URLSearchParams({
    grant_type: 'refresh_token',
    refresh_token: options.refreshToken,
  });
  if (options.scope !== undefined) form.set('scope', options.scope);
  const basic = `${encodeURIComponent(options.clientId)}:${encodeURIComponent(options.clientSecret)}`;
  const request = new Request(new URL('/oauth/token', options.baseUrl), {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${btoa(basic)}`,
    },
    body: form.toString(),
  });
  const response = await (options.fetch ?? fetch)(request);
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's error page): errorFromResponse reports it as unexpected_response.
  }
  if (!response.ok) throw errorFromResponse(response, body);
  return body as OAuthTokenResponse & { refresh_token: string };
}
