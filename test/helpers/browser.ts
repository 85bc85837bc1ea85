/**
 * A small browser over app.inject for the OAuth, sign-in and portal tests: it keeps cookies
 * across requests, remembers the last HTML page (to read its CSRF token and form action) and
 * walks the sign-in and consent pages.
 */
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';

/** A form; repeated fields (checkboxes) as arrays. */
export type Form = Record<string, string | readonly string[]>;

export interface Credentials {
  username: string;
  password: string;
}

let browsers = 0;

/**
 * Cookies kept as a browser would (path / only, which is all this server sets). Each browser
 * has its own client IP, so sign-in limits per IP stay per browser.
 */
export class Browser {
  readonly cookies = new Map<string, string>();
  /** The last HTML page shown. */
  page = '';
  /** The Origin header its form posts send, if any (a real browser sends its page's). */
  origin: string | undefined;
  /**
   * Every URL requested, and every Location answered, by every browser (to look for secrets in
   * them).
   */
  static readonly urls: string[] = [];

  constructor(
    private readonly app: FastifyInstance,
    readonly remoteAddress = `198.51.100.${((browsers += 1) % 250) + 1}`,
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    return { ...(cookie ? { cookie } : {}), ...extra };
  }

  private keep(res: LightMyRequestResponse): LightMyRequestResponse {
    for (const c of res.cookies as {
      name: string;
      value: string;
      maxAge?: number;
      expires?: Date;
    }[]) {
      const expired =
        c.maxAge === 0 ||
        (c.expires !== undefined && c.expires.getTime() <= Date.now()) ||
        c.value === '';
      if (expired) this.cookies.delete(c.name);
      else this.cookies.set(c.name, c.value);
    }
    if (typeof res.headers.location === 'string') Browser.urls.push(res.headers.location);
    if (String(res.headers['content-type'] ?? '').startsWith('text/html')) this.page = res.body;
    return res;
  }

  async get(url: string): Promise<LightMyRequestResponse> {
    Browser.urls.push(url);
    return this.keep(
      await this.app.inject({
        method: 'GET',
        url,
        remoteAddress: this.remoteAddress,
        headers: this.headers(),
      }),
    );
  }

  async post(url: string, form: Form): Promise<LightMyRequestResponse> {
    Browser.urls.push(url);
    const body = new URLSearchParams();
    for (const [name, value] of Object.entries(form))
      for (const v of typeof value === 'string' ? [value] : value) body.append(name, v);
    return this.keep(
      await this.app.inject({
        method: 'POST',
        url,
        remoteAddress: this.remoteAddress,
        headers: this.headers({
          'content-type': 'application/x-www-form-urlencoded',
          ...(this.origin === undefined ? {} : { origin: this.origin }),
        }),
        payload: body.toString(),
      }),
    );
  }

  /**
   * Posts a form of the current page with its CSRF token, to `action` (default: the page's first
   * form).
   */
  submit(form: Form = {}, action = formActionOf(this.page)): Promise<LightMyRequestResponse> {
    return this.post(action, { csrf_token: csrfOf(this.page), ...form });
  }

  /** Shows `pageUrl`, then posts one of its forms to `action`. */
  async act(pageUrl: string, action: string, form: Form = {}): Promise<LightMyRequestResponse> {
    await this.get(pageUrl);
    return this.submit(form, action);
  }

  /**
   * Signs in on the sign-in page shown by `url` (an authorize URL), then follows the redirect (its
   * consent page).
   */
  async signIn(url: string, user: Credentials): Promise<LightMyRequestResponse> {
    await this.get(url);
    const res = await this.submit({ username: user.username, password: user.password });
    if (res.statusCode !== 303) throw new Error(`sign-in failed: ${res.statusCode}`);
    return this.get(String(res.headers.location));
  }

  /**
   * The whole browser side of an authorization: sign in if needed, press a consent button; returns
   * the redirect.
   */
  async authorize(
    authorizeUrl: string,
    user: Credentials,
    decision: 'allow' | 'deny' = 'allow',
  ): Promise<URL> {
    let page = await this.get(authorizeUrl);
    if (!page.body.includes('name="decision"')) page = await this.signIn(authorizeUrl, user);
    if (page.statusCode !== 200) throw new Error(`consent page: ${page.statusCode}`);
    const res = await this.submit({ decision });
    if (res.statusCode !== 303)
      throw new Error(`consent: ${res.statusCode} ${res.body.slice(0, 300)}`);
    return new URL(String(res.headers.location));
  }
}

/** The CSRF token of the first form of a page. */
export function csrfOf(html: string): string {
  const match = /name="csrf_token" value="([^"]+)"/.exec(html);
  if (!match?.[1]) throw new Error('no CSRF token on the page');
  return match[1];
}

/** The action of the first form of a page, unescaped (to post to it). */
export function formActionOf(html: string): string {
  const match = /<form method="post" action="([^"]+)"/.exec(html);
  if (!match?.[1]) throw new Error('no form on the page');
  return unescapeHtml(match[1]);
}

/** Decodes what the HTML templates escape. */
export function unescapeHtml(text: string): string {
  return text
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replaceAll('&quot;', '"')
    .replaceAll('&#39;', "'")
    .replaceAll('&amp;', '&');
}
