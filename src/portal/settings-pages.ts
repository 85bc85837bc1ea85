/**
 * An app's settings: rename it, transfer its account to another member, and delete it.
 * Deleting asks for the app's name typed out, and then nothing of the app keeps working
 * (AppsService.delete: keys, OAuth tokens and the client secret revoked, endpoints disabled),
 * exactly as `admin app delete` does. A transfer (owners) is reviewed first: the form says what
 * will happen and asks for the new holder's username typed out (AppsService.transfer, as
 * `admin app transfer` does).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { asForm, field } from '../web/forms.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import type { MemberView } from '../apps/apps-service.ts';
import { ValidationError } from '../errors.ts';
import { appContext, type AppContext, audited, may } from './context.ts';
import { appPage, csrfInput, noticeFor } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';
import { postThenRedirect } from './post-redirect.ts';
import { roleSelect } from './members-pages.ts';

const NOTICES = {
  renamed: 'The app was renamed.',
  transferred: "The app's account was transferred: its keys act as the new holder from now on.",
} as const;

/** What a transfer form sends: the member to transfer to, the holder's role afterwards. */
interface TransferSent {
  username?: string;
  previousRole?: string;
  confirm?: string;
}

interface SettingsSent {
  name?: string;
  confirm?: string;
  members?: MemberView[];
}

function settingsBody(ctx: AppContext, sent: SettingsSent): SafeHtml {
  return html`<section class="card" aria-labelledby="rename-heading">
<h2 id="rename-heading">Name</h2>
<p>Users see it on the consent page when your app asks for access.</p>
<form method="post" action="${paths.appRename(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<label for="app-name">App name</label>
<input type="text" id="app-name" name="name" value="${sent.name ?? ctx.app.name}" required maxlength="100" autocomplete="off">
<div class="actions"><button type="submit">Rename app</button></div>
</form>
</section>
${may(ctx, 'app.transfer') ? transferSection(ctx, sent.members ?? []) : ''}
${may(ctx, 'app.delete') ? deleteSection(ctx, sent) : ''}`;
}

/** Step one: whom to transfer to, and the holder's role afterwards; nothing changes yet. */
function transferSection(ctx: AppContext, members: MemberView[]): SafeHtml {
  const holder = members.find((m) => m.account_holder);
  const others = members.filter((m) => !m.account_holder);
  return html`<section class="card" aria-labelledby="transfer-heading">
<h2 id="transfer-heading">Transfer the app's account</h2>
<p>The app's account holder is <strong>@${holder?.username ?? ctx.app.ownerUsername}</strong>: its API keys act as them. Another member can hold it instead; you review what changes before anything does.</p>
${
  others.length === 0
    ? html`<p>Invite the member first on the Members page: the account goes only to a member.</p>`
    : html`<form method="post" action="${paths.appTransfer(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<label for="transfer-username">New account holder</label>
<select id="transfer-username" name="username">
${others.map((m) => html`<option value="${m.username}">@${m.username} (${m.role})</option>`)}
</select>
<label for="transfer-previous-role">Role of @${holder?.username ?? ctx.app.ownerUsername} afterwards</label>
${roleSelect('transfer-previous-role', 'previous_role', 'owner')}
<div class="actions"><button type="submit">Review the transfer</button></div>
</form>`
}
</section>`;
}

/**
 * Step two: what will happen, in words, and the new holder's username typed out to confirm
 * (docs/portal.md, "Transferring the app").
 */
function transferReview(ctx: AppContext, sent: TransferSent): SafeHtml {
  const to = sent.username ?? '';
  const role = sent.previousRole ?? 'owner';
  const from = ctx.app.ownerUsername;
  return html`<section class="card danger-zone" aria-labelledby="review-heading">
<h2 id="review-heading">Transfer ${ctx.app.name} to @${to}?</h2>
<ul>
<li>@${to} becomes an owner and the app's account holder. From the next request on, the app's API keys (sandbox and live) act as @${to}: listings they create are @${to}'s, a sandbox key sees @${to}'s sandbox listings, and the app's quotas and fair shares (webhook deliveries, waiting polls, saved-search matches, apps per account) count against @${to}'s account.</li>
<li>The sandbox listings made so far stay with their seller, @${from}: the app's keys no longer see or change them. Live listings stay their sellers'. Keys, endpoints, saved searches and the OAuth client stay the app's, unchanged; your users' OAuth tokens keep acting as those users.</li>
<li>@${from} stays a member of the app, as ${role}.</li>
</ul>
<form method="post" action="${paths.appTransfer(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<input type="hidden" name="username" value="${to}">
<input type="hidden" name="previous_role" value="${role}">
<label for="transfer-confirm">Type the new holder's username, <strong>${to}</strong>, to confirm</label>
<input type="text" id="transfer-confirm" name="confirm" value="${sent.confirm ?? ''}" required autocomplete="off" spellcheck="false">
<div class="actions"><button type="submit" class="danger">Transfer the app</button> <a href="${paths.settings(ctx.app.id)}">Cancel</a></div>
</form>
</section>`;
}

function deleteSection(ctx: AppContext, sent: { confirm?: string }): SafeHtml {
  return html`<section class="card danger-zone" aria-labelledby="delete-heading">
<h2 id="delete-heading">Delete this app</h2>
<p>Deleting cannot be undone. At once, its API keys, its users' OAuth tokens and its client secret stop working (401), and its webhook endpoints are disabled. Its sandbox listings stay with you.</p>
<form method="post" action="${paths.appDelete(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<label for="confirm-name">Type the app's name, <strong>${ctx.app.name}</strong>, to confirm</label>
<input type="text" id="confirm-name" name="confirm" value="${sent.confirm ?? ''}" required autocomplete="off" spellcheck="false">
<div class="actions"><button type="submit" class="danger">Delete app</button></div>
</form>
</section>`;
}

export function registerSettingsPages(app: FastifyInstance): void {
  const { apps } = app.services;

  const show = async (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    view: { error?: string; notice?: string; name?: string; confirm?: string },
  ) => {
    const ctx = appContext(app, request, reply);
    const members = may(ctx, 'app.transfer') ? await apps.members(ctx.app.id) : [];
    return sendPage(
      reply,
      status,
      appPage(ctx, 'settings', {
        title: 'Settings',
        error: view.error,
        notice: view.notice,
        body: settingsBody(ctx, { ...view, members }),
      }),
    );
  };

  const review = async (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    sent: TransferSent & { error?: string },
  ) => {
    const ctx = appContext(app, request, reply);
    return sendPage(
      reply,
      status,
      appPage(ctx, 'settings', {
        title: 'Transfer the app',
        error: sent.error,
        body: transferReview(ctx, sent),
      }),
    );
  };

  /**
   * The transfer: without `confirm`, the review (nothing changes); with the new holder's username
   * typed out, the transfer itself, recorded in the audit log.
   */
  app.post(
    `${APP_ROUTE}/settings/transfer`,
    { config: { formBody: true, appAction: 'app.transfer' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const form = asForm(request.body);
      const sent = {
        username: field(form, 'username')?.trim() ?? '',
        previousRole: field(form, 'previous_role') ?? 'owner',
        confirm: field(form, 'confirm'),
      };
      if (sent.confirm === undefined) return review(request, reply, 200, sent);
      return postThenRedirect(reply, {
        run: async () => {
          if (sent.confirm!.trim() !== sent.username)
            throw new ValidationError(
              `Type the new holder's username, ${sent.username}, to confirm. Nothing was changed.`,
              [{ path: '/confirm', message: "must be the new holder's username" }],
            );
          return audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => apps.transfer(ctx.app.id, sent, { userId: ctx.user.id, role: ctx.app.role }),
            (r) => ({
              action: 'app.ownership_transferred',
              target: r.account_holder,
              details: {
                from: r.previous.username,
                to: r.account_holder,
                previous_role: r.previous.role,
              },
            }),
          );
        },
        refused: (error) => review(request, reply, error.status, { ...sent, error: error.message }),
        done: () => `${paths.settings(ctx.app.id)}?done=transferred`,
      });
    },
  );

  app.get<{ Querystring: { done?: string } }>(
    `${APP_ROUTE}/settings`,
    { config: { appAction: 'app.rename' } },
    async (request, reply) =>
      show(request, reply, 200, { notice: noticeFor(NOTICES, request.query.done) }),
  );

  app.post(
    `${APP_ROUTE}/settings/name`,
    { config: { formBody: true, appAction: 'app.rename' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const name = field(asForm(request.body), 'name') ?? '';
      return postThenRedirect(reply, {
        run: () =>
          audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => apps.rename(ctx.app.id, name),
            (r) => ({
              action: 'app.renamed',
              details: { from: ctx.app.name, to: r.name },
            }),
          ),
        refused: (error) => show(request, reply, error.status, { error: error.message, name }),
        done: () => `${paths.settings(ctx.app.id)}?done=renamed`,
      });
    },
  );

  app.post(
    `${APP_ROUTE}/settings/delete`,
    { config: { formBody: true, appAction: 'app.delete' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const confirm = field(asForm(request.body), 'confirm') ?? '';
      return postThenRedirect(reply, {
        run: () =>
          audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => apps.delete(ctx.app.id, confirm),
            () => ({
              action: 'app.deleted',
              details: { name: ctx.app.name },
            }),
          ),
        refused: (error) => show(request, reply, error.status, { error: error.message, confirm }),
        done: () => {
          request.log.info({ event: 'app_deleted', appId: ctx.app.id }, 'app deleted');
          return `${paths.apps}?done=deleted`;
        },
      });
    },
  );
}
