/**
 * Client authentication at /oauth/token and /oauth/revoke (RFC 6749 §2.3.1): HTTP Basic
 * (`client_secret_basic`, each part form-urlencoded before base64) or `client_id` and
 * `client_secret` in the body (`client_secret_post`). One method per request (§2.3).
 */
import type { FastifyRequest } from 'fastify';
import { InvalidClientError, InvalidRequestError } from './oauth-errors.ts';
import type { OAuthService } from './oauth-service.ts';

type ClientAuthMethod = 'client_secret_basic' | 'client_secret_post';

interface PresentedCredentials {
  clientId: string;
  clientSecret: string;
  method: ClientAuthMethod;
}

/** application/x-www-form-urlencoded decoding of one Basic credential part (RFC 6749 §2.3.1). */
function formDecode(part: string): string {
  try {
    return decodeURIComponent(part.replaceAll('+', ' '));
  } catch {
    throw new InvalidClientError('The Basic credentials are not correctly encoded.', true);
  }
}

function parseBasic(header: string): { clientId: string; clientSecret: string } {
  const match = /^Basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(header);
  const decoded = match?.[1] ? Buffer.from(match[1], 'base64').toString('utf8') : '';
  const colon = decoded.indexOf(':');
  if (colon < 1) throw new InvalidClientError('The Basic credentials are malformed.', true);
  return {
    clientId: formDecode(decoded.slice(0, colon)),
    clientSecret: formDecode(decoded.slice(colon + 1)),
  };
}

function presentedCredentials(
  request: FastifyRequest,
  body: { client_id?: string; client_secret?: string },
): PresentedCredentials {
  const header = request.headers.authorization;
  if (header !== undefined && /^basic\b/i.test(header)) {
    const basic = parseBasic(header);
    if (body.client_secret !== undefined) {
      throw new InvalidRequestError(
        'Use one client authentication method: HTTP Basic or client_secret in the body, not both.',
      );
    }
    if (body.client_id !== undefined && body.client_id !== basic.clientId) {
      throw new InvalidRequestError(
        'The client_id in the body differs from the one in the Basic credentials.',
      );
    }
    return { ...basic, method: 'client_secret_basic' };
  }
  if (body.client_id !== undefined && body.client_secret !== undefined) {
    return {
      clientId: body.client_id,
      clientSecret: body.client_secret,
      method: 'client_secret_post',
    };
  }
  throw new InvalidClientError(
    'Client authentication is required: HTTP Basic, or client_id and client_secret in the body.',
  );
}

/** The authenticated client's id; 401 invalid_client for an unknown client or a wrong secret. */
export async function authenticateClient(
  oauth: OAuthService,
  request: FastifyRequest,
  body: { client_id?: string; client_secret?: string },
): Promise<string> {
  const presented = presentedCredentials(request, body);
  if (!(await oauth.authenticateClient(presented.clientId, presented.clientSecret))) {
    throw new InvalidClientError(
      'Client authentication failed.',
      presented.method === 'client_secret_basic',
    );
  }
  return presented.clientId.toLowerCase(); // client ids are UUIDs; grants store them lowercase
}

/** RFC 6749 §4.1.3 and RFC 7009 §2.1 requests are form-encoded; a JSON body is not one. */
export function requireFormBody(request: FastifyRequest): void {
  const type = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    throw new InvalidRequestError('The body must be application/x-www-form-urlencoded.');
  }
}

/** Token endpoint responses are never cached (RFC 6749 §5.1). */
export const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' } as const;
