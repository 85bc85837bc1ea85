/**
 * Portal test support: a small "browser" over app.inject that keeps cookies and reads the
 * CSRF token of the page it was shown, sign-up and app helpers that go through the pages, an
 * app whose log lines are kept (to look for secrets in them), and a free port.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildApp, serverOptions } from '../../src/app.ts';
import { testConfig, type TestLike } from '../helpers/app.ts';

export type Form = Record<string, string | readonly string[]>;

let browsers = 0;

/** Cookies kept across requests (all of this server's cookies have Path=/). One client IP per browser. */
export class Browser {
  readonly cookies = new Map<string, string>();
  /** The last HTML page shown. */
  page = '';
  /** Every URL requested, and every Location answered, by every browser (to look for secrets in them). */
  static readonly urls: string[] = [];
  readonly urls = Browser.urls;

  constructor(
    private readonly app: FastifyInstance,
    readonly remoteAddress = `203.0.113.${((browsers += 1) % 250) + 1}`,
  ) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    return { ...(cookie ? { cookie } : {}), ...extra };
  }

  private keep(res: LightMyRequestResponse): LightMyRequestResponse {
    for (const c of res.cookies as { name: string; value: string; maxAge?: number; expires?: Date }[]) {
      const expired = c.maxAge === 0 || (c.expires !== undefined && c.expires.getTime() <= Date.now()) || c.value === '';
      if (expired) this.cookies.delete(c.name);
      else this.cookies.set(c.name, c.value);
    }
    if (typeof res.headers.location === 'string') this.urls.push(res.headers.location);
    if (String(res.headers['content-type'] ?? '').startsWith('text/html')) this.page = res.body;
    return res;
  }

  async get(url: string): Promise<LightMyRequestResponse> {
    this.urls.push(url);
    return this.keep(await this.app.inject({ method: 'GET', url, remoteAddress: this.remoteAddress, headers: this.headers() }));
  }

  /** Posts a form; repeated fields (checkboxes) as arrays. */
  async post(url: string, form: Form): Promise<LightMyRequestResponse> {
    this.urls.push(url);
    const body = new URLSearchParams();
    for (const [name, value] of Object.entries(form)) for (const v of typeof value === 'string' ? [value] : value) body.append(name, v);
    return this.keep(
      await this.app.inject({
        method: 'POST',
        url,
        remoteAddress: this.remoteAddress,
        headers: this.headers({ 'content-type': 'application/x-www-form-urlencoded' }),
        payload: body.toString(),
      }),
    );
  }

  /** Posts with the CSRF token of the current page, as its forms do. */
  submit(url: string, form: Form = {}): Promise<LightMyRequestResponse> {
    return this.post(url, { csrf_token: csrfOf(this.page), ...form });
  }

  /** Shows `pageUrl`, then posts one of its forms. */
  async act(pageUrl: string, action: string, form: Form = {}): Promise<LightMyRequestResponse> {
    await this.get(pageUrl);
    return this.submit(action, form);
  }
}

export function csrfOf(html: string): string {
  const match = /name="csrf_token" value="([^"]+)"/.exec(html);
  if (!match?.[1]) throw new Error('no CSRF token on the page');
  return match[1];
}

/** The text of the page's role=alert paragraph, unescaped. */
export function alertOf(html: string): string | undefined {
  const match = /<p class="alert" role="alert">([^<]*)<\/p>/.exec(html);
  return match?.[1] === undefined ? undefined : unescape(match[1]);
}

export function noticeOf(html: string): string | undefined {
  const match = /<p class="notice" role="status">([^<]*)<\/p>/.exec(html);
  return match?.[1] === undefined ? undefined : unescape(match[1]);
}

export function unescape(text: string): string {
  return text.replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&quot;', '"').replaceAll('&#39;', "'").replaceAll('&amp;', '&');
}

/** The value of the read-only input that shows a secret once. */
export function shownSecret(html: string, id: string): string | undefined {
  const match = new RegExp(`id="${id}" class="mono" value="([^"]+)"`).exec(html);
  return match?.[1];
}

export interface PortalUser {
  browser: Browser;
  username: string;
  password: string;
}

const suffix = () => randomBytes(4).toString('hex');

/** Signs up through the page; the browser is signed in afterwards. */
export async function signUp(app: FastifyInstance, username = `dev_${suffix()}`): Promise<PortalUser> {
  const browser = new Browser(app);
  const password = `pw ${suffix()} long enough`;
  await browser.get('/portal/signup');
  const res = await browser.submit('/portal/signup', { username, password, return_to: '/portal/apps' });
  if (res.statusCode !== 303) throw new Error(`sign-up failed: ${res.statusCode} ${alertOf(res.body)}`);
  return { browser, username, password };
}

/** Creates an app through the page; returns its id. */
export async function createApp(user: PortalUser, name = `App ${suffix()}`): Promise<string> {
  const res = await user.browser.act('/portal/apps', '/portal/apps', { name });
  const match = /^\/portal\/apps\/([0-9a-f-]{36})\?done=created$/.exec(String(res.headers.location));
  if (res.statusCode !== 303 || !match?.[1]) throw new Error(`app creation failed: ${res.statusCode} ${alertOf(res.body)}`);
  return match[1];
}

/** An app with every log line kept, at trace level, through the production logger options. */
export async function appWithLog(t: TestLike, env: Record<string, string> = {}): Promise<{ app: FastifyInstance; log: () => string }> {
  const config = await testConfig(t, { RATE_LIMIT_MAX: '1000000', ...env });
  let lines = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines += chunk.toString();
      done();
    },
  });
  const options = serverOptions({ ...config, logLevel: 'trace' });
  const logger = { ...(options.logger as object), level: 'trace', stream };
  const app = await buildApp(config, { logger });
  t.teardown(() => app.close());
  return { app, log: () => lines };
}

export function portalApp(t: TestLike, env: Record<string, string> = {}): Promise<FastifyInstance> {
  return appWithLog(t, env).then((r) => r.app);
}

