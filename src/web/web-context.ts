/**
 * What every page needs about the browser in front of it: who is signed in (session cookie),
 * the CSRF token of its forms, whether it is a known browser of a username, and the counters
 * of failed sign-ins. Built once by the web plugin and shared by the OAuth pages and the portal.
 *
 * Cookies (docs/oauth.md, "Pages and sessions"): HttpOnly, SameSite=Lax, Path=/, and Secure with
 * the `__Host-` prefix when BASE_URL is https (the prefix makes the browser refuse a cookie set by
 * a sibling host).
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { UserRow } from '../db/schema.ts';
import { ResilientStore } from '../lib/rate-limit-store.ts';
import { safeEqual } from '../lib/secrets.ts';
import { Csrf } from './csrf.ts';
import { LoginThrottle, normalizeUsername } from './login-throttle.ts';
import { SESSION_TTL_SECONDS, type SessionsService } from './sessions-service.ts';

export interface WebContextOptions {
  baseUrl: string;
  sessionSecret: string;
  /** The failed sign-in counters (default: in this process's memory, default limits). */
  throttle?: LoginThrottle;
}

/**
 * How long a browser stays known for a username after signing in with it (renewed at each sign-in).
 */
const KNOWN_BROWSER_TTL_SECONDS = 180 * 24 * 60 * 60;

/** Per-request state: the user once looked up, and cookies set during this request. */
interface RequestState {
  user?: Promise<UserRow | null>;
  session?: string | null;
  browser?: string;
}

const BROWSER_ID_PATTERN = /^[A-Za-z0-9_-]{32}$/;

export class WebContext {
  readonly secure: boolean;
  readonly cookieNames: { session: string; browser: string; device: string };
  readonly csrf: Csrf;
  readonly throttle: LoginThrottle;
  private readonly secret: string;
  private readonly state = new WeakMap<FastifyRequest, RequestState>();

  constructor(
    readonly sessions: SessionsService,
    options: WebContextOptions,
  ) {
    this.secure = new URL(options.baseUrl).protocol === 'https:';
    const prefix = this.secure ? '__Host-' : '';
    this.cookieNames = {
      session: `${prefix}svc_session`,
      browser: `${prefix}svc_browser`,
      device: `${prefix}svc_device`,
    };
    this.csrf = new Csrf(options.sessionSecret);
    this.secret = options.sessionSecret;
    this.throttle = options.throttle ?? new LoginThrottle(new ResilientStore(null));
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
    reply.setCookie(this.cookieNames.session, token, {
      ...this.cookieOptions(),
      maxAge: SESSION_TTL_SECONDS,
    });
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

  /**
   * This browser's id when `username` signed in with it before (OWASP device cookie): its
   * failed sign-ins are then counted per browser, not per IP, and a guesser elsewhere cannot
   * get it refused. The mark is an HMAC of the browser id and the username: nobody else can
   * make it, and it is worthless without the browser id it was made for.
   */
  knownBrowser(request: FastifyRequest, username: string): string | undefined {
    const browser = this.browserId(request);
    const mark = request.cookies[this.cookieNames.device];
    if (browser === undefined || mark === undefined) return undefined;
    return safeEqual(this.browserMark(browser, username), mark) ? browser : undefined;
  }

  /** After a successful sign-in: marks this browser as known for the username. */
  rememberBrowser(request: FastifyRequest, reply: FastifyReply, username: string): void {
    const browser = this.browserId(request);
    if (browser === undefined) return;
    reply.setCookie(this.cookieNames.device, this.browserMark(browser, username), {
      ...this.cookieOptions(),
      maxAge: KNOWN_BROWSER_TTL_SECONDS,
    });
  }

  private browserMark(browser: string, username: string): string {
    return createHmac('sha256', this.secret)
      .update(`known-browser:v1:${browser}|${normalizeUsername(username)}`, 'utf8')
      .digest('base64url');
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
