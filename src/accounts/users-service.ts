import { ConflictError, NotFoundError, ValidationError } from '../errors.ts';
import type { PrivateProfile, Profile } from '../generated/schemas.ts';
import { dummyPasswordHash, hashPassword, verifyPassword } from '../lib/passwords.ts';
import { passwordProblem } from './password-policy.ts';
import type { UsersRepository } from './users-repository.ts';
import type { UserRow } from '../db/schema.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { isoTimestamp } from '../db/rows.ts';

const USERNAME_PATTERN = /^[a-z0-9_]{3,30}$/;

export interface CreateUserInput {
  username: string;
  password: string;
  displayName?: string | undefined;
  email?: string | undefined;
}

/** How many sign-ins the account page shows (docs/portal.md, "Accounts"). */
const SIGN_INS_SHOWN = 20;

export type SignInOutcome = 'succeeded' | 'failed' | 'throttled';

export interface SignInView {
  at: string;
  outcome: SignInOutcome;
  ip: string | null;
  user_agent: string | null;
}

export class UsersService {
  constructor(private readonly users: UsersRepository) {}

  /**
   * Records a sign-in to an existing account (an unknown username has no history to keep), with
   * where it came from and how it ended.
   */
  async recordSignIn(
    username: string,
    outcome: SignInOutcome,
    client: { ip: string | null; userAgent: string | null },
  ): Promise<void> {
    const user = await this.users.findByUsername(username);
    if (!user) return;
    await this.users.insertSignIn({
      userId: user.id,
      outcome,
      ip: client.ip,
      userAgent: client.userAgent?.slice(0, 512) ?? null,
    });
  }

  /** The user's last sign-ins, newest first: their account page's history. */
  async signIns(userId: string): Promise<SignInView[]> {
    const rows = await this.users.lastSignIns(userId, SIGN_INS_SHOWN);
    return rows.map((r) => ({
      at: r.createdAt.toISOString(),
      outcome: r.outcome,
      ip: r.ip,
      user_agent: r.userAgent,
    }));
  }

  async create(input: CreateUserInput): Promise<UserRow> {
    if (!USERNAME_PATTERN.test(input.username)) {
      throw ValidationError.say(
        '/username',
        'Choose a username of 3 to 30 characters: lowercase letters, digits and _.',
      );
    }
    const weak = await passwordProblem(input.password, { username: input.username });
    if (weak) throw ValidationError.say('/password', weak);
    const displayName = (input.displayName ?? input.username).trim();
    if (displayName.length < 1 || displayName.length > 80) {
      throw ValidationError.say('/display_name', 'Keep the display name to 1 to 80 characters.');
    }
    if (input.email !== undefined && !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(input.email)) {
      throw ValidationError.say('/email', 'Enter an email address, like ana@example.com.');
    }
    const passwordHash = await hashPassword(input.password);
    try {
      return await this.users.insert({
        username: input.username,
        displayName,
        email: input.email ?? null,
        passwordHash,
      });
    } catch (err) {
      if (isUniqueViolation(err))
        throw new ConflictError(`The username ${input.username} is taken.`);
      throw err;
    }
  }

  /** Whether any account exists yet (first run). */
  any(): Promise<boolean> {
    return this.users.exists();
  }

  async getByUsername(username: string): Promise<UserRow> {
    // A name that cannot exist is not looked up: PostgreSQL rejects some text (U+0000) outright.
    const user = USERNAME_PATTERN.test(username)
      ? await this.users.findByUsername(username)
      : undefined;
    if (!user) throw new NotFoundError(`No user named ${username}.`);
    return user;
  }

  async getById(id: string): Promise<UserRow> {
    const user = await this.users.findById(id);
    if (!user) throw new NotFoundError('No such user.');
    return user;
  }

  /** Verifies a sign-in without revealing whether the username exists (same work either way). */
  async verifyCredentials(username: string, password: string): Promise<UserRow | null> {
    const user = USERNAME_PATTERN.test(username)
      ? await this.users.findByUsername(username)
      : undefined;
    const ok = await verifyPassword(password, user?.passwordHash ?? (await dummyPasswordHash()));
    return user && ok ? user : null;
  }

  /** The public profile resource (the OpenAPI Profile schema). */
  async profile(user: UserRow): Promise<Profile> {
    return {
      id: user.id,
      username: user.username,
      display_name: user.displayName,
      avatar_url: user.avatarUrl,
      bio: user.bio,
      listing_count: await this.users.countPublicListings(user.id),
      created_at: isoTimestamp(user.createdAt),
    };
  }

  /** The owner's own profile: the public one plus email (GET /me, /oauth/userinfo). */
  async privateProfile(user: UserRow): Promise<PrivateProfile> {
    return { ...(await this.profile(user)), email: user.email };
  }
}
