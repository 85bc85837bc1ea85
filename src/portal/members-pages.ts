/**
 * An app's members (docs/portal.md, "Members and roles"): who they are, with their role, who
 * added them and since when; for those whose role allows it, invite by username with a role,
 * change a role, remove a member, revoke an open invitation; for everyone, leave. AppsService
 * decides every rule (the role each change needs, the account holder and last-owner rules), as
 * `admin app member` calls it; the invitee accepts or declines on their Apps page
 * (apps-pages.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { APP_ROLES } from '../access.ts';
import type { InvitationView, MemberView } from '../apps/apps-service.ts';
import { asForm, field } from '../web/forms.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, type AppContext, audited, may } from './context.ts';
import { appPage, csrfInput, noticeFor, when } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';
import { postThenRedirect } from './post-redirect.ts';

const NOTICES = {
  invited: 'The invitation was sent: it waits on their Apps page for 7 days.',
  changed: 'The role was changed.',
  removed: 'The member was removed: their access ended at once.',
  revoked: 'The invitation was revoked.',
} as const;

/** A role as the actor chose it: the selected one first known; AppsService refuses others. */
export function roleSelect(id: string, name: string, selected: string): SafeHtml {
  return html`<select id="${id}" name="${name}">
${APP_ROLES.map((r) => html`<option value="${r}"${r === selected ? html` selected` : ''}>${r}</option>`)}
</select>`;
}

function memberRow(ctx: AppContext, m: MemberView, manage: boolean): SafeHtml {
  const self = m.username === ctx.user.username;
  const changeForm = html`<form class="inline-form" method="post" action="${paths.memberRole(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<input type="hidden" name="username" value="${m.username}">
<label class="visually-hidden" for="role-${m.username}">Role of ${m.username}</label>
${roleSelect(`role-${m.username}`, 'role', m.role)}
<button type="submit">Change role</button>
</form>`;
  const removeForm = html`<form class="inline-form" method="post" action="${paths.memberRemove(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<input type="hidden" name="username" value="${m.username}">
<button type="submit" class="danger">${self ? 'Leave this app' : html`Remove <span class="visually-hidden">${m.username}</span>`}</button>
</form>`;
  return html`<tr>
<td>@${m.username}${m.account_holder ? html` <span class="muted">(account holder)</span>` : ''}</td>
<td>${m.role}</td>
<td>${m.added_by ? html`@${m.added_by}` : html`<span class="muted">—</span>`}</td>
<td>${when(m.added_at)}</td>
<td>${m.account_holder ? '' : html`${manage ? changeForm : ''}${manage || self ? removeForm : ''}`}</td>
</tr>`;
}

function membersBody(
  ctx: AppContext,
  members: MemberView[],
  invitations: InvitationView[],
  sent: { username?: string; role?: string },
): SafeHtml {
  const manage = may(ctx, 'members.manage');
  return html`<div class="table-wrap"><table>
<caption>Members</caption>
<thead><tr><th scope="col">User</th><th scope="col">Role</th><th scope="col">Added by</th><th scope="col">Since</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${members.map((m) => memberRow(ctx, m, manage))}
</tbody>
</table></div>
${
  invitations.length === 0
    ? ''
    : html`<div class="table-wrap"><table>
<caption>Open invitations</caption>
<thead><tr><th scope="col">User</th><th scope="col">Role</th><th scope="col">Invited by</th><th scope="col">Expires</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${invitations.map(
  (i) => html`<tr>
<td>@${i.username}</td>
<td>${i.role}</td>
<td>${i.invited_by ? html`@${i.invited_by}` : html`<span class="muted">an operator</span>`}</td>
<td>${when(i.expires_at)}</td>
<td>${
    manage
      ? html`<form class="inline-form" method="post" action="${paths.invitationRevoke(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<input type="hidden" name="invitation_id" value="${i.id}">
<button type="submit">Revoke <span class="visually-hidden">the invitation of ${i.username}</span></button>
</form>`
      : ''
  }</td>
</tr>`,
)}
</tbody>
</table></div>`
}
${
  manage
    ? html`<section class="card" aria-labelledby="invite-heading">
<h2 id="invite-heading">Invite someone</h2>
<p>They accept or decline on their Apps page; the invitation expires after 7 days.</p>
<form method="post" action="${paths.memberInvite(ctx.app.id)}">
${csrfInput(ctx.csrfToken)}
<label for="invite-username">Username</label>
<input type="text" id="invite-username" name="username" value="${sent.username ?? ''}" required maxlength="30" autocomplete="off" spellcheck="false">
<label for="invite-role">Role</label>
${roleSelect('invite-role', 'role', sent.role ?? 'developer')}
<div class="actions"><button type="submit" class="primary">Send invitation</button></div>
</form>
</section>`
    : ''
}`;
}

export function registerMembersPages(app: FastifyInstance): void {
  const { apps } = app.services;

  const show = async (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    view: { error?: string; notice?: string; username?: string; role?: string },
  ) => {
    const ctx = appContext(app, request, reply);
    const [members, invitations] = await Promise.all([
      apps.members(ctx.app.id),
      apps.invitations(ctx.app.id),
    ]);
    return sendPage(
      reply,
      status,
      appPage(ctx, 'members', {
        title: 'Members',
        error: view.error,
        notice: view.notice,
        body: membersBody(ctx, members, invitations, view),
      }),
    );
  };
  /** The member changing things, as AppsService judges them (their role read this request). */
  const actor = (ctx: AppContext) => ({ userId: ctx.user.id, role: ctx.app.role });
  const manage = { config: { formBody: true, appAction: 'members.manage' } } as const;

  app.get<{ Querystring: { done?: string } }>(
    `${APP_ROUTE}/members`,
    { config: { appAction: 'members.view' } },
    async (request, reply) =>
      show(request, reply, 200, { notice: noticeFor(NOTICES, request.query.done) }),
  );

  app.post(`${APP_ROUTE}/members/invite`, manage, async (request, reply) => {
    const ctx = appContext(app, request, reply);
    const form = asForm(request.body);
    const sent = { username: field(form, 'username') ?? '', role: field(form, 'role') ?? '' };
    return postThenRedirect(reply, {
      run: () =>
        audited(
          app,
          request,
          ctx.user,
          ctx.app.id,
          () => apps.invite(ctx.app.id, sent, actor(ctx)),
          (i) => ({
            action: 'invitation.sent',
            target: i.username,
            details: { role: i.role, expires_at: i.expires_at },
          }),
        ),
      refused: (error) => show(request, reply, error.status, { ...sent, error: error.message }),
      done: () => `${paths.members(ctx.app.id)}?done=invited`,
    });
  });

  app.post(`${APP_ROUTE}/members/role`, manage, async (request, reply) => {
    const ctx = appContext(app, request, reply);
    const form = asForm(request.body);
    const sent = { username: field(form, 'username') ?? '', role: field(form, 'role') ?? '' };
    return postThenRedirect(reply, {
      run: () =>
        audited(
          app,
          request,
          ctx.user,
          ctx.app.id,
          () => apps.setMemberRole(ctx.app.id, sent, actor(ctx)),
          (m) => ({
            action: 'member.role_changed',
            target: m.username,
            details: { role: m.role },
          }),
        ),
      refused: (error) => show(request, reply, error.status, { error: error.message }),
      done: () => `${paths.members(ctx.app.id)}?done=changed`,
    });
  });

  /** Anyone may leave (AppsService lets a member remove themselves); removing others: admins. */
  app.post(
    `${APP_ROUTE}/members/remove`,
    { config: { formBody: true, appAction: 'members.view' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const username = field(asForm(request.body), 'username') ?? '';
      const leaving = username.trim() === ctx.user.username;
      return postThenRedirect(reply, {
        run: () =>
          audited(
            app,
            request,
            ctx.user,
            ctx.app.id,
            () => apps.removeMember(ctx.app.id, username, actor(ctx)),
            (m) => ({
              action: 'member.removed',
              target: m.username,
            }),
          ),
        refused: (error) => show(request, reply, error.status, { error: error.message }),
        done: () =>
          leaving ? `${paths.apps}?done=left` : `${paths.members(ctx.app.id)}?done=removed`,
      });
    },
  );

  app.post(`${APP_ROUTE}/members/revoke-invitation`, manage, async (request, reply) => {
    const ctx = appContext(app, request, reply);
    const id = field(asForm(request.body), 'invitation_id') ?? '';
    return postThenRedirect(reply, {
      run: () =>
        audited(
          app,
          request,
          ctx.user,
          ctx.app.id,
          () => apps.revokeInvitation(ctx.app.id, id, actor(ctx)),
          (i) => ({
            action: 'invitation.revoked',
            target: i.id,
          }),
        ),
      refused: (error) => show(request, reply, error.status, { error: error.message }),
      done: () => `${paths.members(ctx.app.id)}?done=revoked`,
    });
  });
}
