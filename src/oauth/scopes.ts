/**
 * Scopes an app may request (OpenAPI "Authentication"): the same two as API keys. The consent page
 * shows each in plain words.
 */
import { SCOPES, type Scope } from '../access.ts';
import { SCOPE_CONSENT_TEXT } from '../generated/constants.ts';
import { InvalidRequestError, InvalidScopeError } from './oauth-errors.ts';

/** docs/oauth.md: an authorization request without scope gets `read`. */
const DEFAULT_SCOPES: readonly Scope[] = ['read'];

/**
 * What the user is agreeing to, in the words of the consent page (the document's x-consent-text).
 */
export const SCOPE_WORDS: Record<Scope, string> = SCOPE_CONSENT_TEXT;

/**
 * Parses a space-separated scope parameter (RFC 6749 §3.3). Duplicates are folded; the order
 * is the canonical one, so the granted scope string is stable.
 */
export function parseScopeParameter(raw: string | undefined): Scope[] {
  if (raw === undefined) return [...DEFAULT_SCOPES];
  if (!/^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/.test(raw)) {
    if (raw.trim() === '') return [...DEFAULT_SCOPES];
    throw new InvalidRequestError(
      'The scope parameter must be scope names separated by single spaces.',
    );
  }
  const requested = new Set(raw.split(' '));
  const unknown = [...requested].filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0) {
    throw new InvalidScopeError(
      `Unknown scope ${unknown.join(', ')}; this server supports: ${SCOPES.join(', ')}.`,
    );
  }
  return SCOPES.filter((s) => requested.has(s));
}

export const formatScopes = (scopes: readonly string[]): string => scopes.join(' ');
