/**
 * The portal's frame and its small parts: the header navigation with sign-out, the tabs of an
 * app, notices, timestamps, and the "shown once" box for secrets with its copy button. The
 * pages work without JavaScript; portal.js only un-hides and wires the copy buttons.
 */
import type { AppAction } from '../access.ts';
import type { Environment } from '../generated/schemas.ts';
import { CSRF_FIELD } from '../web/csrf.ts';
import { html, type Page, type SafeHtml } from '../web/html.ts';
import { siteNav } from '../web/site-nav.ts';
import { may, type AppContext, type PortalContext } from './context.ts';
import { paths, PORTAL_CSS_PATH, PORTAL_JS_PATH, type AppTab } from './paths.ts';

export interface PortalView {
  title: string;
  body: SafeHtml;
  /** A line confirming what was just done (role=status). */
  notice?: string | undefined;
  /** Why the last form was refused, in the service's words (role=alert). */
  error?: string | undefined;
}

/** The tabs of an app; one whose page needs more than a viewer's role names its action. */
const TABS: readonly {
  tab: AppTab;
  label: string;
  href: (appId: string) => string;
  action?: AppAction;
}[] = [
  { tab: 'overview', label: 'Overview', href: paths.app },
  { tab: 'keys', label: 'API keys', href: paths.keys },
  { tab: 'oauth', label: 'OAuth', href: paths.oauth },
  { tab: 'webhooks', label: 'Webhooks', href: paths.webhooks },
  { tab: 'events', label: 'Events', href: paths.events },
  { tab: 'saved-searches', label: 'Saved searches', href: paths.savedSearches },
  { tab: 'logs', label: 'Request logs', href: paths.logs },
  { tab: 'inventory', label: 'Inventory', href: paths.inventory },
  { tab: 'members', label: 'Members', href: paths.members },
  { tab: 'audit', label: 'Audit log', href: paths.audit, action: 'audit.view' },
  { tab: 'settings', label: 'Settings', href: paths.settings, action: 'app.rename' },
];

export function csrfInput(token: string): SafeHtml {
  return html`<input type="hidden" name="${CSRF_FIELD}" value="${token}">`;
}

function messages(view: { notice?: string | undefined; error?: string | undefined }): SafeHtml {
  return html`${view.error ? html`<p class="alert" role="alert">${view.error}</p>` : ''}${view.notice ? html`<p class="notice" role="status">${view.notice}</p>` : ''}`;
}

const signedInNav = (ctx: PortalContext): SafeHtml =>
  siteNav({ username: ctx.user.username, csrfToken: ctx.csrfToken });

const signedOutNav = (): SafeHtml => siteNav(null);

const frame = (title: string, nav: SafeHtml, body: SafeHtml): Page => ({
  title,
  body,
  nav,
  wide: true,
  stylesheets: [PORTAL_CSS_PATH],
  scripts: [PORTAL_JS_PATH],
});

/** A page of a signed-out visitor (landing, sign-up). */
export function publicPage(view: PortalView): Page {
  return frame(view.title, signedOutNav(), html`${messages(view)}${view.body}`);
}

/** A signed-in page outside any app (the list of apps). */
export function userPage(ctx: PortalContext, view: PortalView): Page {
  return frame(view.title, signedInNav(ctx), html`${messages(view)}${view.body}`);
}

/** Disabled webhook endpoints, first thing on every page of the app, with why and where. */
function disabledBanner(ctx: AppContext): SafeHtml {
  if (ctx.disabledEndpoints.length === 0) return html``;
  return html`<section class="banner-warning" aria-labelledby="disabled-endpoints-heading">
<h2 id="disabled-endpoints-heading">${ctx.disabledEndpoints.length === 1 ? 'A webhook endpoint is disabled' : `${ctx.disabledEndpoints.length} webhook endpoints are disabled`}</h2>
<ul>
${ctx.disabledEndpoints.map((e) => html`<li><a href="${paths.endpoint(ctx.app.id, e.id)}">${e.url}</a> (${e.env}): ${e.disabled_reason ?? ''} It receives no deliveries until you re-enable it.</li>`)}
</ul>
</section>`;
}

/** A page of one app: its name, client id and tabs above the section. */
export function appPage(ctx: AppContext, tab: AppTab, view: PortalView): Page {
  const { app } = ctx;
  return frame(
    `${view.title} · ${app.name}`,
    signedInNav(ctx),
    html`<p class="crumbs"><a href="${paths.apps}">Your apps</a> <span aria-hidden="true">›</span> ${app.name}</p>
<h1>${app.name}</h1>
${disabledBanner(ctx)}
<nav class="tabs" aria-label="App sections">
<ul>
${TABS.filter((t) => !t.action || may(ctx, t.action)).map((t) => html`<li><a href="${t.href(app.id)}"${t.tab === tab ? html` aria-current="page"` : ''}>${t.label}</a></li>`)}
</ul>
</nav>
${messages(view)}
${view.body}`,
  );
}

/** `<time>` in UTC, minutes precision; "never" (or the given word) for null. */
export function when(value: Date | string | null | undefined, none = 'never'): SafeHtml {
  if (value === null || value === undefined) return html`<span class="muted">${none}</span>`;
  const iso = typeof value === 'string' ? value : value.toISOString();
  return html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`;
}

/**
 * `<time>` on one line, relative to `now` ("3 min ago"), with the exact UTC time in its title
 * (shown on hover) and datetime attribute.
 */
export function ago(iso: string, now = Date.now()): SafeHtml {
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  const text =
    seconds < 60
      ? `${seconds} s ago`
      : seconds < 3600
        ? `${Math.floor(seconds / 60)} min ago`
        : seconds < 86_400
          ? `${Math.floor(seconds / 3600)} h ago`
          : `${Math.floor(seconds / 86_400)} d ago`;
  const exact = `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
  return html`<time class="ago" datetime="${iso}" title="${exact}">${text}</time>`;
}

/** A copy button for the element with `targetId` (hidden until portal.js runs). */
function copyButton(targetId: string, label: string): SafeHtml {
  return html`<button type="button" class="copy" data-copy="${targetId}" aria-label="${label}" hidden>Copy</button><span class="copy-status" role="status" aria-live="polite"></span>`;
}

/** A command or value to copy: monospace, wrapped, with its copy button. */
export function codeBlock(id: string, label: string, text: string): SafeHtml {
  return html`<div class="code-row"><pre class="code"><code id="${id}">${text}</code></pre>${copyButton(id, `Copy ${label}`)}</div>`;
}

/**
 * A secret shown exactly once, right after it was made: it is in this response only (never in
 * a URL, never logged), and the page says so plainly.
 */
export function secretOnce(view: {
  id: string;
  heading: string;
  label: string;
  secret: string;
  stored: string;
  after?: SafeHtml;
}): SafeHtml {
  return html`<section class="secret-once" aria-labelledby="${view.id}-heading">
<h2 id="${view.id}-heading">${view.heading}</h2>
<p class="warning"><strong>Copy it now: you will not see this again.</strong> ${view.stored}</p>
<label for="${view.id}">${view.label}</label>
<div class="code-row"><input type="text" id="${view.id}" class="mono" value="${view.secret}" readonly autocomplete="off" spellcheck="false">${copyButton(view.id, `Copy ${view.label}`)}</div>
${view.after ?? ''}
</section>`;
}

/** Messages after a redirect, chosen by a fixed code in the query (nothing user-made is echoed). */
export function noticeFor(
  table: Readonly<Record<string, string>>,
  code: unknown,
): string | undefined {
  return typeof code === 'string' && Object.hasOwn(table, code) ? table[code] : undefined;
}

/**
 * Sandbox or live, a link to each and the one shown marked (the Events, Logs and Saved searches
 * pages); `linkTo` keeps whatever else the page's link carries.
 */
export function envSwitch(current: string, linkTo: (env: Environment) => string): SafeHtml {
  return html`<nav class="env-switch" aria-label="Environment">
${(['sandbox', 'live'] as const).map(
  (e) =>
    html`<a href="${linkTo(e)}"${e === current ? html` aria-current="page"` : ''}>${e === 'sandbox' ? 'Sandbox' : 'Live'}</a> `,
)}
</nav>`;
}
