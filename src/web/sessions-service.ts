/**
 * Sign-in sessions of the pages (OAuth sign-in and consent, the account pages, later the
 * portal). The browser holds a random token; the database holds only its SHA-256, so a
 * database dump signs nobody in. Sessions end after SESSION_TTL_SECONDS, or at sign-out.
 */
import { randomBytes } from 'node:crypto';
import type { UserRow } from '../db/schema.ts';
import { hashSecret, safeEqual } from '../lib/secrets.ts';
import { secondsFromNow, type SessionsRepository } from './sessions-repository.ts';

/** Twelve hours: a working day, then sign in again (consent pages act for the user). */
export const SESSION_TTL_SECONDS = 12 * 60 * 60;
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export class SessionsService {
  constructor(private readonly sessions: SessionsRepository) {}

  /** A new session for the user; the token goes in the cookie and is never stored. */
  async create(userId: string): Promise<{ token: string }> {
    const token = randomBytes(32).toString('base64url');
    await this.sessions.deleteExpired(userId);
    await this.sessions.insert({
      tokenHash: hashSecret(token),
      userId,
      expiresAt: secondsFromNow(SESSION_TTL_SECONDS),
    });
    return { token };
  }

  /** The signed-in user, or null for an unknown, expired or malformed token. */
  async resolve(token: string | undefined): Promise<UserRow | null> {
    if (token === undefined || !TOKEN_PATTERN.test(token)) return null;
    const digest = hashSecret(token);
    const found = await this.sessions.findUser(digest);
    return found && safeEqual(found.tokenHash, digest) ? found.user : null;
  }

  async destroy(token: string | undefined): Promise<void> {
    if (token === undefined || !TOKEN_PATTERN.test(token)) return;
    await this.sessions.delete(hashSecret(token));
  }
}
