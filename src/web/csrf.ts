/**
 * CSRF tokens for every form (OWASP "signed double-submit cookie"): the token is an HMAC,
 * keyed with SESSION_SECRET, of what the browser's cookies bind it to (a random per-browser
 * value, plus the session token once signed in). A cross-site page can neither read those
 * cookies nor compute the HMAC, and a token stops working at sign-in and sign-out.
 */
import { createHmac } from 'node:crypto';
import { safeEqual } from '../lib/secrets.ts';

export const CSRF_FIELD = 'csrf_token';

export class Csrf {
  constructor(private readonly secret: string) {}

  token(binding: string): string {
    return createHmac('sha256', this.secret)
      .update(`csrf:v1:${binding}`, 'utf8')
      .digest('base64url');
  }

  /** Constant-time check of a presented token against the binding. */
  verify(binding: string, presented: unknown): boolean {
    if (typeof presented !== 'string' || presented.length === 0) return false;
    return safeEqual(this.token(binding), presented);
  }
}
