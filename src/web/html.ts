/**
 * Server-rendered HTML for the sign-in, consent and account pages (and, later, the portal):
 * a tagged template that escapes every interpolated value, one page layout with the local
 * stylesheet, and the security headers every page carries.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { toApiError } from '../failures.ts';

/** HTML that is already safe: built by `html` or `raw`. Anything else is escaped on the way in. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function render(value: unknown): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/**
 * `html\`<p>${userText}</p>\``: values are escaped (attributes included, they are always quoted
 * here).
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new SafeHtml(out);
}

export const STYLESHEET_PATH = '/assets/web.css';
/**
 * The portal's stylesheet (served by the portal plugin): every page wears it after the shared
 * one, so /login, the consent page and /account/apps look like the portal.
 */
export const SITE_STYLESHEET_PATH = '/assets/portal.css';
/** The site icon (a browser asks for /favicon.ico, and logs a 404, when a page names none). */
export const ICON_PATH = '/assets/icon.svg';

export interface Page {
  title: string;
  body: SafeHtml;
  /**
   * Origins a form on this page may end up at besides our own: CSP form-action also covers the
   * redirect after a form post in some browsers, so the consent page names the client's origin.
   */
  formActionOrigins?: readonly string[];
  /** More local stylesheets after the shared one (the portal's). */
  stylesheets?: readonly string[];
  /**
   * Local scripts (progressive enhancement only, e.g. copy buttons): the page works without
   * them. Pages that list none keep a CSP without script-src, i.e. no script at all.
   */
  scripts?: readonly string[];
  /** Navigation in the site header (after the brand). */
  nav?: SafeHtml;
  /** A wider main column (tables). */
  wide?: boolean;
}

function renderPage(page: Page): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${page.title} · Marketplace</title>
<link rel="icon" href="${ICON_PATH}" type="image/svg+xml">
<link rel="stylesheet" href="${STYLESHEET_PATH}">
<link rel="stylesheet" href="${SITE_STYLESHEET_PATH}">
${(page.stylesheets ?? []).filter((href) => href !== SITE_STYLESHEET_PATH).map((href) => html`<link rel="stylesheet" href="${href}">\n`)}${(page.scripts ?? []).map((src) => html`<script src="${src}" defer></script>\n`)}</head>
<body${page.wide ? html` class="wide"` : ''}>
<a class="skip" href="#main">Skip to content</a>
<header class="site"><span class="brand">Marketplace</span>${page.nav ?? ''} <a class="docs-link" href="/docs">API reference</a></header>
<main id="main" tabindex="-1">
${page.body}
</main>
</body>
</html>
`.value;
}

/**
 * Every page: no framing (RFC 6749 §10.13 clickjacking; CSP frame-ancestors plus the legacy
 * X-Frame-Options), no script (or, on pages that list some, only our own files), styles only
 * from our own files, no caching (pages carry CSRF tokens, personal data and secrets shown
 * once), and no Referer to another site, whose query may hold a code or state (same-origin: a
 * form post of ours carries this site's Origin, which the Origin check reads, web-plugin.ts).
 */
export function pageHeaders(
  formActionOrigins: readonly string[] = [],
  options: { scripts?: boolean } = {},
): Record<string, string> {
  const formAction = ["'self'", ...formActionOrigins].join(' ');
  // Scripts, where a page has any, come only from our own files: no inline script, no eval.
  const scriptSrc = options.scripts ? "script-src 'self'; " : '';
  return {
    'content-security-policy': `default-src 'none'; ${scriptSrc}style-src 'self'; img-src 'self'; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`,
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'same-origin',
    'cache-control': 'no-store',
  };
}

export function sendPage(reply: FastifyReply, statusCode: number, page: Page): FastifyReply {
  return reply
    .code(statusCode)
    .headers(pageHeaders(page.formActionOrigins, { scripts: (page.scripts?.length ?? 0) > 0 }))
    .type('text/html; charset=utf-8')
    .send(renderPage(page));
}

/** A page that explains a problem; the request id lets support find the log line. */
export function errorPage(request: FastifyRequest, title: string, message: string): Page {
  return {
    title,
    body: html`<section class="card">
<h1>${title}</h1>
<p>${message}</p>
<p class="muted">Request id ${request.id}</p>
</section>`,
  };
}

/** What a page says about a failure, by the status it answers with. */
const PAGE_OF_STATUS: Record<number, { title: string; message: string }> = {
  429: { title: 'Too many requests', message: 'Please wait a minute and try again.' },
  500: {
    title: 'Something went wrong',
    message: 'Please try again. If it keeps happening, quote the request id below.',
  },
  503: { title: 'Service unavailable', message: 'Please try again shortly.' },
};

/**
 * The HTML format of a failure (mapped once by src/failures.ts, or an OAuth error): a page
 * with the request id. A client error gets its status and `hint` (what to do next); any other
 * server error is logged and answers 500.
 */
export function sendErrorPage(
  request: FastifyRequest,
  reply: FastifyReply,
  failure: { statusCode: number },
  cause: unknown,
  hint = 'Go back, reload the page and try again.',
): FastifyReply {
  const { statusCode } = failure;
  const status = statusCode < 500 || statusCode === 503 ? statusCode : 500;
  if (status === 500) request.log.error({ err: cause }, 'page failed');
  const page = PAGE_OF_STATUS[status] ?? {
    title: 'This request could not be handled',
    message: hint,
  };
  return sendPage(reply, status, errorPage(request, page.title, page.message));
}

/** Route-level error handler of the HTML routes: every failure is a page, never JSON. */
export async function htmlErrorHandler(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  return sendErrorPage(request, reply, toApiError(error), error);
}
