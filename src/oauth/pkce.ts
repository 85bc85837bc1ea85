/** PKCE (RFC 7636), S256 only: `plain` gives no protection when the challenge can be read. */
import { createHash } from 'node:crypto';
import { safeEqual } from '../lib/secrets.ts';

/** BASE64URL(SHA-256(verifier)) is always 43 characters (RFC 7636 §4.2). */
export const CODE_CHALLENGE_PATTERN = /^[A-Za-z0-9_-]{43}$/;
// The verifier's form (RFC 7636 §4.1: 43-128 unreserved characters) is the document's pattern
// on code_verifier, checked with the token request's schema.
export const CODE_CHALLENGE_METHODS = ['S256'] as const;

function s256Challenge(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

export function verifierMatches(verifier: string, challenge: string): boolean {
  return safeEqual(s256Challenge(verifier), challenge);
}
