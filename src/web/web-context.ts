/**
 * What every page needs about the browser in front of it: who is signed in (session cookie),
 * the CSRF token of its forms, and sign-in throttling. Built once by the web plugin and
 * shared by the OAuth pages and, later, the portal.
 *
 * Cookies (CONTRACT §5): HttpOnly, SameSite=Lax, Path=/, and Secure with the `__Host-` prefix
 * when BASE_URL is https (the prefix makes the browser refuse a cookie set by a sibling host).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { UserRow } from '../accounts/users-repository.ts';
import { randomBytes } from 'node:crypto';
import { Csrf } from './csrf.ts';
import { DEFAULT_THROTTLE_LIMITS, LoginThrottle, type ThrottleLimits } from './login-throttle.ts';
import { SESSION_TTL_SECONDS, type SessionsService } from './sessions.ts';

export interface WebContextOptions {
  baseUrl: string;
  sessionSecret: string;
  throttleLimits?: ThrottleLimits;
}

/** Per-request state: the user once looked up, and cookies set during this request. */
interface RequestState {
  user?: Promise<UserRow | null>;
  session?: string | null;
  browser?: string;
}

const BROWSER_ID_PATTERN = /^[A-Za-z0-9_-]{32}$/;

export class WebContext {
  readonly secure: boolean;
  readonly cookieNames: { session: string; browser: string };
  readonly csrf: Csrf;
  readonly throttle: LoginThrottle;
  private readonly state = new WeakMap<FastifyRequest, RequestState>();

  constructor(
    readonly sessions: SessionsService,
    options: WebContextOptions,
  ) {
    this.secure = new URL(options.baseUrl).protocol === 'https:';
    const prefix = this.secure ? '__Host-' : '';
    this.cookieNames = { session: `${prefix}svc_session`, browser: `${prefix}svc_browser` };
    this.csrf = new Csrf(options.sessionSecret);
    this.throttle = new LoginThrottle(options.throttleLimits ?? DEFAULT_THROTTLE_LIMITS);
  }

  /** The signed-in user, looked up once per request. */
  currentUser(request: FastifyRequest): Promise<UserRow | null> {
    const state = this.stateOf(request);
    state.user ??= this.sessions.resolve(this.sessionToken(request) ?? undefined);
    return state.user;
  }

  /** Signs the user in: a fresh session (never a reused one: no fixation), the old one ended. */
  async startSession(request: FastifyRequest, reply: FastifyReply, user: UserRow): Promise<void> {
    await this.sessions.destroy(this.sessionToken(request) ?? undefined);
    const { token } = await this.sessions.create(user.id);
    reply.setCookie(this.cookieNames.session, token, { ...this.cookieOptions(), maxAge: SESSION_TTL_SECONDS });
    const state = this.stateOf(request);
    state.session = token;
    state.user = Promise.resolve(user);
  }

  async endSession(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    await this.sessions.destroy(this.sessionToken(request) ?? undefined);
    reply.clearCookie(this.cookieNames.session, this.cookieOptions());
    const state = this.stateOf(request);
    state.session = null;
    state.user = Promise.resolve(null);
  }

  /** The CSRF token for this browser's forms; gives the browser its random id on first sight. */
  csrfToken(request: FastifyRequest, reply: FastifyReply): string {
    const state = this.stateOf(request);
    let browser = this.browserId(request);
    if (browser === undefined) {
      browser = randomBytes(24).toString('base64url');
      state.browser = browser;
      reply.setCookie(this.cookieNames.browser, browser, this.cookieOptions());
    }
    return this.csrf.token(this.binding(browser, this.sessionToken(request)));
  }

  /** Whether a posted form carries the token of this browser (and session). */
  verifyCsrf(request: FastifyRequest, presented: unknown): boolean {
    const browser = this.browserId(request);
    if (browser === undefined) return false;
    return this.csrf.verify(this.binding(browser, this.sessionToken(request)), presented);
  }

  private binding(browser: string, session: string | null): string {
    return `${browser}|${session ?? ''}`;
  }

  private cookieOptions() {
    return { path: '/', httpOnly: true, sameSite: 'lax' as const, secure: this.secure };
  }

  private sessionToken(request: FastifyRequest): string | null {
    const state = this.stateOf(request);
    if (state.session !== undefined) return state.session;
    return request.cookies[this.cookieNames.session] ?? null;
  }

  private browserId(request: FastifyRequest): string | undefined {
    const value = this.stateOf(request).browser ?? request.cookies[this.cookieNames.browser];
    return value !== undefined && BROWSER_ID_PATTERN.test(value) ? value : undefined;
  }

  private stateOf(request: FastifyRequest): RequestState {
    let state = this.state.get(request);
    if (!state) {
      state = {};
      this.state.set(request, state);
    }
    return state;
  }
}
