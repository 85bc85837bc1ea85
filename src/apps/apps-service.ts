import { afterCommit } from '../db/unit-of-work.ts';
import { assertMayDo, memberChangeAction, type AppAction } from '../access.ts';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../errors.ts';
import { APP_ROLES, type AppRole } from '../lib/roles.ts';
import type { UsersRepository } from '../accounts/users-repository.ts';
import { generateSecret, hashSecret, displayPrefix, PREFIX } from '../lib/secrets.ts';
import type { Db } from '../db/client.ts';
import type { AppsRepository } from './apps-repository.ts';
import type { AppRow, UserRow } from '../db/schema.ts';

/**
 * Go-live milestones, in the order a developer meets them (docs/portal.md, the go-live checklist).
 */
export const MILESTONES = ['sandbox_listing'] as const;
export type MilestoneName = (typeof MILESTONES)[number];

/** What completes each milestone, in the words the CLI and the portal show. */
export const MILESTONE_STEPS: Record<MilestoneName, string> = {
  sandbox_listing: 'Create a listing with a sandbox key of this app',
};

/** The refusal when go-live milestones are missing: names each one and how to complete it. */
export function milestonesMissingError(
  what: string,
  missing: readonly MilestoneName[],
): ForbiddenError {
  return new ForbiddenError(
    `${what} every go-live milestone; not done yet: ${missing.join(', ')}. ` +
      `${missing.map((m) => MILESTONE_STEPS[m]).join('; ')} first.`,
  );
}

/**
 * The production-approval state of an app: requested by its owner, granted by an operator (`admin
 * app approve`).
 */
export interface ProductionStatus {
  approved: boolean;
  approved_at: string | null;
  requested_at: string | null;
}

export interface AppView {
  id: string;
  name: string;
  owner: string;
  redirect_uris: string[];
  production_approved: boolean;
  milestones: Record<MilestoneName, { done: boolean; completed_at: string | null }>;
}

/**
 * Apps one developer account may have (not deleted): per-app quotas (saved searches, webhook
 * endpoints, keys, long-poll places) are also counted per owner, and this bounds the rest
 * (OpenAPI "Saved searches", "Budgets"; docs/configuration.md, "Fixed limits").
 */
export const APPS_PER_OWNER = 25;

/** Members one app may have, open invitations counted (docs/configuration.md, "Fixed limits"). */
const MEMBERS_PER_APP = 50;

/** How long an invitation stays open (docs/portal.md, "Members and roles"). */
const INVITATION_DAYS = 7;

export interface InvitationView {
  id: string;
  username: string;
  role: AppRole;
  invited_by: string | null;
  expires_at: string;
}

/** An invitation as its invitee sees it (their Apps page). */
export interface ReceivedInvitation {
  id: string;
  app_id: string;
  app_name: string;
  role: AppRole;
  invited_by: string | null;
  expires_at: string;
}

const INVITATION_CLOSED =
  'This invitation is no longer open: it was accepted, declined, revoked or it expired.';

/**
 * Who changes an app's members: one of them (their role decides what they may change, by
 * src/access.ts), or an operator with the admin CLI (anything the rules below allow).
 */
export type MemberActor = { userId: string; role: AppRole } | 'admin_cli';

export interface MemberView {
  username: string;
  role: AppRole;
  /** The app's account holder (apps.owner_id): always an owner, never removed. */
  account_holder: boolean;
  added_by: string | null;
  added_at: string;
}

/** A role as sent (a form, the CLI): one of APP_ROLES, or 400 naming the field. */
function parseRole(raw: string | undefined, path = '/role'): AppRole {
  const role = APP_ROLES.find((r) => r === raw?.trim());
  if (!role) throw ValidationError.say(path, `Choose a role: ${APP_ROLES.join(', ')}.`);
  return role;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DEV_HOSTS = new Set(['localhost', '127.0.0.1']);

/**
 * Redirect URIs (docs/oauth.md, docs/portal.md): https, no fragment; plain http only for localhost
 * and 127.0.0.1 during development. Compared exactly at /oauth/authorize, so stored as given.
 */
export function checkRedirectUri(uri: string, path = '/redirect_uri'): string {
  let parsed: URL;
  try {
    parsed = new URL(uri);
  } catch {
    throw ValidationError.say(path, 'Enter an absolute URL, like https://example.com/callback.');
  }
  if (uri.length > 2048)
    throw ValidationError.say(path, 'Keep the redirect URI to 2,048 characters or fewer.');
  if (uri.includes('#'))
    throw ValidationError.say(path, 'Remove the #fragment: a redirect URI cannot have one.');
  if (parsed.username || parsed.password)
    throw ValidationError.say(path, 'Remove the user name and password from the redirect URI.');
  const devHttp = parsed.protocol === 'http:' && DEV_HOSTS.has(parsed.hostname);
  if (parsed.protocol !== 'https:' && !devHttp) {
    throw ValidationError.say(
      path,
      'Use an https redirect URI (plain http only for localhost and 127.0.0.1).',
    );
  }
  return uri;
}

/** An app's name: trimmed, 1-100 characters. */
function appName(raw: string): string {
  const name = raw.trim();
  if (name.length < 1 || name.length > 100)
    throw ValidationError.say('/name', 'Give the app a name of 1 to 100 characters.');
  return name;
}

/** 403 unless the actor may: an operator may do anything the rules of members allow. */
function authorize(actor: MemberActor, action: AppAction): void {
  if (actor !== 'admin_cli') assertMayDo(actor.role, action);
}

export class AppsService {
  constructor(
    private readonly apps: AppsRepository,
    private readonly users: UsersRepository,
    /** The key cache (src/apps/key-cache.ts): a deleted app's keys stop at once here too. */
    private readonly heldCredentials: { invalidate(): void },
  ) {}

  async create(input: {
    ownerUsername: string;
    name: string;
    redirectUris?: string[];
  }): Promise<AppRow & { ownerUsername: string }> {
    const name = appName(input.name);
    const uris = (input.redirectUris ?? []).map((uri, i) =>
      checkRedirectUri(uri, `/redirect_uris/${i}`),
    );
    const owner = await this.users.findByUsername(input.ownerUsername);
    if (!owner) throw new NotFoundError(`No user named ${input.ownerUsername}.`);
    return this.apps.transaction(async (tx) => {
      if ((await this.apps.lockAndCountOwned(owner.id, tx)) >= APPS_PER_OWNER)
        throw new ConflictError(
          `${owner.username} has ${APPS_PER_OWNER} apps, the most one developer may have: ` +
            'delete one first.',
        );
      const app = await this.apps.insert({ ownerId: owner.id, name }, tx);
      await this.apps.insertMember({ appId: app.id, userId: owner.id, role: 'owner' }, tx);
      await this.apps.addRedirectUris(app.id, uris, tx);
      return { ...app, ownerUsername: owner.username };
    });
  }

  async get(appId: string): Promise<AppRow & { ownerUsername: string }> {
    const app = UUID.test(appId) ? await this.apps.findById(appId) : undefined;
    if (!app) throw new NotFoundError(`No app with id ${appId}.`);
    return app;
  }

  /**
   * An app this user is a member of, with their role, read afresh on every call (the portal asks
   * on every request: a removed member's next one is refused). An app they are not a member of
   * is not found, with the same words as an unknown id: the portal reveals nothing about it.
   */
  async getAsMember(
    appId: string,
    userId: string,
  ): Promise<AppRow & { ownerUsername: string; role: AppRole }> {
    const app = UUID.test(appId) ? await this.apps.findMembership(appId, userId) : undefined;
    if (!app) throw new NotFoundError(`No app with id ${appId}.`);
    return app;
  }

  /** The owner's apps, oldest first. */
  listOwned(ownerId: string): Promise<AppRow[]> {
    return this.apps.listByOwner(ownerId);
  }

  /** The apps this user is a member of (their own among them), with their role, oldest first. */
  listMemberships(userId: string): Promise<(AppRow & { role: AppRole })[]> {
    return this.apps.listForMember(userId);
  }

  async members(appId: string): Promise<MemberView[]> {
    const app = await this.get(appId);
    const rows = await this.apps.listMembers(app.id);
    return rows.map((m) => ({
      username: m.username,
      role: m.role,
      account_holder: m.userId === app.ownerId,
      added_by: m.addedBy,
      added_at: m.createdAt.toISOString(),
    }));
  }

  /**
   * Makes a user a member with a role (an accepted invitation, or `admin app member add`).
   * 409 when they already are one.
   */
  async addMember(
    appId: string,
    input: { username: string; role: string },
    actor: MemberActor,
  ): Promise<MemberView> {
    const app = await this.get(appId);
    const role = parseRole(input.role);
    authorize(actor, memberChangeAction(null, role));
    const user = await this.users.findByUsername(input.username.trim());
    if (!user) throw ValidationError.say('/username', `No user named ${input.username}.`);
    return this.apps.transaction(async (tx) => {
      await this.apps.lockApp(app.id, tx);
      if (await this.apps.memberRole(app.id, user.id, tx))
        throw new ConflictError(`${user.username} is already a member of this app.`);
      if ((await this.apps.listMembers(app.id, tx)).length >= MEMBERS_PER_APP)
        throw new ConflictError(
          `This app has ${MEMBERS_PER_APP} members, the most it may have: remove one first.`,
        );
      const addedBy = actor === 'admin_cli' ? null : actor.userId;
      await this.apps.insertMember({ appId: app.id, userId: user.id, role, addedBy }, tx);
      return this.memberOf(app, user.id, tx);
    });
  }

  /**
   * Invites a user by username to be a member with a role: open for INVITATION_DAYS, until they
   * accept or decline it on their Apps page or it is revoked. Inviting needs the role the
   * membership would (src/access.ts memberChangeAction). 409 for a member, or one invited already.
   */
  async invite(
    appId: string,
    input: { username: string; role: string },
    actor: MemberActor,
  ): Promise<InvitationView> {
    const app = await this.get(appId);
    const role = parseRole(input.role);
    authorize(actor, memberChangeAction(null, role));
    const username = input.username.trim();
    if (username === '') throw ValidationError.say('/username', 'Enter the username to invite.');
    const user = await this.users.findByUsername(username);
    if (!user) throw ValidationError.say('/username', `No user named ${username}.`);
    return this.apps.transaction(async (tx) => {
      await this.apps.lockApp(app.id, tx);
      if (await this.apps.memberRole(app.id, user.id, tx))
        throw new ConflictError(`${user.username} is already a member of this app.`);
      const open = await this.apps.openInvitation(app.id, user.id, tx);
      if (open && !open.expired)
        throw new ConflictError(
          `${user.username} is invited already: revoke that invitation to send another.`,
        );
      if (open) await this.apps.resolveInvitation(open.id, { open: 'any' }, 'expired', tx);
      const taken =
        (await this.apps.listMembers(app.id, tx)).length +
        (await this.apps.pendingInvitations(app.id, tx)).length;
      if (taken >= MEMBERS_PER_APP)
        throw new ConflictError(
          `This app has ${MEMBERS_PER_APP} members and open invitations, the most it may have: ` +
            'remove one first.',
        );
      const invitedBy = actor === 'admin_cli' ? null : actor.userId;
      const row = await this.apps.insertInvitation(
        { appId: app.id, userId: user.id, role, invitedBy },
        INVITATION_DAYS,
        tx,
      );
      const views = await this.apps.pendingInvitations(app.id, tx);
      const view = views.find((v) => v.id === row.id)!;
      return {
        id: row.id,
        username: user.username,
        role,
        invited_by: view.invitedBy,
        expires_at: row.expiresAt.toISOString(),
      };
    });
  }

  /** The app's open invitations, oldest first. */
  async invitations(appId: string): Promise<InvitationView[]> {
    const app = await this.get(appId);
    const rows = await this.apps.pendingInvitations(app.id);
    return rows.map((r) => ({
      id: r.id,
      username: r.username,
      role: r.role,
      invited_by: r.invitedBy,
      expires_at: r.expiresAt.toISOString(),
    }));
  }

  /** Revokes an open invitation of this app (needs what sending it needed). */
  async revokeInvitation(
    appId: string,
    invitationId: string,
    actor: MemberActor,
  ): Promise<{ id: string; revoked: true }> {
    const app = await this.get(appId);
    const found = UUID.test(invitationId)
      ? await this.apps.findInvitation(invitationId)
      : undefined;
    if (!found || found.appId !== app.id) throw new NotFoundError('No such invitation.');
    authorize(actor, memberChangeAction(null, found.role));
    const revoked = await this.apps.resolveInvitation(
      found.id,
      { appId: app.id, open: 'unexpired' },
      'revoked',
    );
    if (!revoked) throw new ConflictError(INVITATION_CLOSED);
    return { id: found.id, revoked: true };
  }

  /** The user's open invitations (their Apps page), oldest first. */
  async invitationsFor(userId: string): Promise<ReceivedInvitation[]> {
    const rows = await this.apps.invitationsFor(userId);
    return rows.map((r) => ({
      id: r.id,
      app_id: r.appId,
      app_name: r.appName,
      role: r.role,
      invited_by: r.invitedBy,
      expires_at: r.expiresAt.toISOString(),
    }));
  }

  /**
   * The invitee accepts (a member with the invitation's role from now) or declines. Only their
   * own invitation, while open: an expired or revoked one is refused (409) and changes nothing.
   */
  async answerInvitation(
    invitationId: string,
    userId: string,
    answer: 'accept' | 'decline',
  ): Promise<{ app_id: string; role: AppRole; answer: 'accepted' | 'declined' }> {
    const found = UUID.test(invitationId)
      ? await this.apps.findInvitation(invitationId)
      : undefined;
    if (!found || found.userId !== userId) throw new NotFoundError('No such invitation.');
    const app = await this.get(found.appId).catch(() => {
      throw new ConflictError(INVITATION_CLOSED);
    });
    return this.apps.transaction(async (tx) => {
      await this.apps.lockApp(app.id, tx);
      const resolution = answer === 'accept' ? 'accepted' : 'declined';
      const open = await this.apps.resolveInvitation(
        found.id,
        { userId, open: 'unexpired' },
        resolution,
        tx,
      );
      if (!open) throw new ConflictError(INVITATION_CLOSED);
      if (answer === 'accept') {
        if (await this.apps.memberRole(app.id, userId, tx))
          throw new ConflictError('You are already a member of this app.');
        await this.apps.insertMember(
          { appId: app.id, userId, role: open.role, addedBy: open.invitedBy },
          tx,
        );
      }
      return { app_id: app.id, role: open.role, answer: resolution };
    });
  }

  /** Gives a member another role. The account holder stays an owner. */
  async setMemberRole(
    appId: string,
    input: { username: string; role: string },
    actor: MemberActor,
  ): Promise<MemberView> {
    const app = await this.get(appId);
    const role = parseRole(input.role);
    const user = await this.users.findByUsername(input.username.trim());
    return this.apps.transaction(async (tx) => {
      const userId = await this.changeMember(app, input.username, user, actor, role, tx);
      return this.memberOf(app, userId, tx);
    });
  }

  /**
   * Removes a member (or a member leaves: removing yourself needs no role). Their access ends with
   * it: the portal reads membership on every request. What they made stays the app's.
   */
  async removeMember(
    appId: string,
    username: string,
    actor: MemberActor,
  ): Promise<{ username: string; removed: true }> {
    const app = await this.get(appId);
    const user = await this.users.findByUsername(username.trim());
    await this.apps.transaction((tx) => this.changeMember(app, username, user, actor, null, tx));
    return { username: username.trim(), removed: true };
  }

  /**
   * One member's role changed (null: removed), under the app's lock: the actor's role must allow
   * it (src/access.ts memberChangeAction), the account holder stays an owner, and an app keeps
   * at least one owner. Returns the member's user id.
   */
  private async changeMember(
    app: AppRow,
    rawUsername: string,
    user: UserRow | undefined,
    actor: MemberActor,
    role: AppRole | null,
    tx: Db,
  ): Promise<string> {
    const username = rawUsername.trim();
    await this.apps.lockApp(app.id, tx);
    const current = user ? await this.apps.memberRole(app.id, user.id, tx) : undefined;
    if (!user || !current) throw new NotFoundError(`${username} is not a member of this app.`);
    const leaving = role === null && actor !== 'admin_cli' && actor.userId === user.id;
    if (!leaving) authorize(actor, memberChangeAction(current, role));
    if (user.id === app.ownerId && role !== 'owner')
      throw new ConflictError(
        `${user.username} holds the app's account (its keys act as them), so stays an owner: ` +
          'they cannot be removed or given another role until an owner transfers the account to ' +
          'another member (Settings, or admin app transfer).',
      );
    if (role === null) await this.apps.deleteMember(app.id, user.id, tx);
    else await this.apps.setMemberRole(app.id, user.id, role, tx);
    if ((await this.apps.countOwners(app.id, tx)) === 0)
      throw new ConflictError('An app keeps at least one owner: make another owner first.');
    return user.id;
  }

  /**
   * Transfers the app's account (apps.owner_id) to another member, by an owner (or the admin CLI):
   * they become an `owner` and the account its keys act as from the next request on (the seller
   * of the listings they write, whose sandbox they see, whose quotas and fair shares the app's
   * use counts against); the previous holder stays a member with `previousRole` (default owner).
   * The listings made so far stay their seller's (docs/portal.md, "Transferring the app"). One
   * transaction under the app's lock; every credential cache forgets the app's keys at commit.
   */
  async transfer(
    appId: string,
    input: { username: string; previousRole?: string | undefined },
    actor: MemberActor,
  ): Promise<{
    id: string;
    account_holder: string;
    previous: { username: string; role: AppRole };
  }> {
    const app = await this.get(appId);
    authorize(actor, 'app.transfer');
    const previousRole = parseRole(input.previousRole ?? 'owner', '/previous_role');
    const username = input.username.trim();
    if (username === '')
      throw ValidationError.say('/username', 'Enter the username of the member to transfer to.');
    const user = await this.users.findByUsername(username);
    if (!user) throw ValidationError.say('/username', `No user named ${username}.`);
    const result = await this.apps.transaction(async (tx) => {
      await this.apps.lockApp(app.id, tx);
      const holder = await this.apps.findById(app.id, tx);
      if (!holder) throw new NotFoundError(`No app with id ${app.id}.`);
      if (holder.ownerId === user.id)
        throw new ConflictError(`${user.username} holds this app's account already.`);
      if (!(await this.apps.memberRole(app.id, user.id, tx)))
        throw new ConflictError(
          `${user.username} is not a member of this app: the account goes only to a member. ` +
            'Invite them first.',
        );
      if ((await this.apps.lockAndCountOwned(user.id, tx)) >= APPS_PER_OWNER)
        throw new ConflictError(
          `${user.username} holds ${APPS_PER_OWNER} apps, the most one developer may have: ` +
            'they must delete one first.',
        );
      await this.apps.setOwner(app.id, user.id, tx);
      await this.apps.setMemberRole(app.id, user.id, 'owner', tx);
      await this.apps.setMemberRole(app.id, holder.ownerId, previousRole, tx);
      return {
        id: app.id,
        account_holder: user.username,
        previous: { username: holder.ownerUsername, role: previousRole },
      };
    });
    // This process's caches forget once it commits (with its audit entry, when audited); the
    // others when the trigger's notification arrives.
    afterCommit(() => this.heldCredentials.invalidate());
    return result;
  }

  private async memberOf(app: AppRow, userId: string, tx: Db): Promise<MemberView> {
    const rows = await this.apps.listMembers(app.id, tx);
    const row = rows.find((m) => m.userId === userId)!;
    return {
      username: row.username,
      role: row.role,
      account_holder: row.userId === app.ownerId,
      added_by: row.addedBy,
      added_at: row.createdAt.toISOString(),
    };
  }

  async show(appId: string): Promise<AppView> {
    const app = await this.get(appId);
    const [redirectUris, milestones] = await Promise.all([
      this.apps.redirectUris(app.id),
      this.milestones(app.id),
    ]);
    return {
      id: app.id,
      name: app.name,
      owner: app.ownerUsername,
      redirect_uris: redirectUris,
      production_approved: app.productionApproved,
      milestones,
    };
  }

  async milestones(appId: string): Promise<AppView['milestones']> {
    const rows = await this.apps.milestones(appId);
    const view = {} as AppView['milestones'];
    for (const name of MILESTONES) {
      const row = rows.find((r) => r.name === name);
      view[name] = {
        done: row !== undefined,
        completed_at: row ? row.completedAt.toISOString() : null,
      };
    }
    return view;
  }

  /** The milestones still to complete before live credentials may be issued. */
  async missingMilestones(appId: string): Promise<MilestoneName[]> {
    const done = new Set((await this.apps.milestones(appId)).map((r) => r.name));
    return MILESTONES.filter((m) => !done.has(m));
  }

  completeMilestone(appId: string, name: MilestoneName, tx?: Db): Promise<void> {
    return this.apps.completeMilestone(appId, name, tx);
  }

  /** Creates or rotates the client secret; the plaintext is returned once and never stored. */
  async rotateClientSecret(appId: string): Promise<{ client_id: string; client_secret: string }> {
    const app = await this.get(appId);
    const secret = generateSecret(PREFIX.clientSecret);
    await this.apps.transaction((tx) =>
      this.apps.replaceClientSecret(
        app.id,
        hashSecret(secret),
        displayPrefix(secret, PREFIX.clientSecret),
        tx,
      ),
    );
    return { client_id: app.id, client_secret: secret };
  }

  /** The active client secret's shown prefix and creation time, or null when the app has none. */
  async clientSecretInfo(appId: string): Promise<{ prefix: string; created_at: string } | null> {
    const app = await this.get(appId);
    const secret = await this.apps.activeClientSecret(app.id);
    return secret ? { prefix: secret.prefix, created_at: secret.createdAt.toISOString() } : null;
  }

  productionStatus(app: AppRow): ProductionStatus {
    return {
      approved: app.productionApproved,
      approved_at: app.productionApprovedAt?.toISOString() ?? null,
      requested_at: app.productionRequestedAt?.toISOString() ?? null,
    };
  }

  /**
   * The owner asks for production approval (live webhooks; docs/portal.md). Only once every go-live
   * milestone is done; asking again keeps the first request's time. An operator grants it with
   * `admin app approve` after seeing it in `admin app requests`.
   */
  async requestProduction(appId: string): Promise<{ id: string; production_requested_at: string }> {
    const app = await this.get(appId);
    if (app.productionApproved)
      throw new ConflictError('This app is already approved for production.');
    const missing = await this.missingMilestones(app.id);
    if (missing.length > 0) throw milestonesMissingError('Production approval needs', missing);
    const requestedAt = await this.apps.setProductionRequested(app.id);
    return { id: app.id, production_requested_at: (requestedAt ?? new Date()).toISOString() };
  }

  /** Pending production requests, oldest first (for operators). */
  async productionRequests(): Promise<
    { id: string; name: string; owner: string; requested_at: string }[]
  > {
    const rows = await this.apps.pendingProductionRequests();
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      owner: r.ownerUsername,
      requested_at: r.productionRequestedAt!.toISOString(),
    }));
  }

  async approve(appId: string): Promise<{ id: string; production_approved: true }> {
    const app = await this.get(appId);
    await this.apps.setProductionApproved(app.id);
    return { id: app.id, production_approved: true };
  }

  async addRedirectUri(appId: string, uri: string): Promise<string[]> {
    const app = await this.get(appId);
    await this.apps.addRedirectUris(app.id, [checkRedirectUri(uri)]);
    return this.apps.redirectUris(app.id);
  }

  async removeRedirectUri(appId: string, uri: string): Promise<string[]> {
    const app = await this.get(appId);
    if (!(await this.apps.removeRedirectUri(app.id, uri)))
      throw new NotFoundError('That redirect URI is not registered.');
    return this.apps.redirectUris(app.id);
  }

  async rename(appId: string, rawName: string): Promise<{ id: string; name: string }> {
    const app = await this.get(appId);
    const name = appName(rawName);
    await this.apps.rename(app.id, name);
    return { id: app.id, name };
  }

  /**
   * Deletes an app once its exact name is typed as confirmation (portal and CLI alike): nothing of
   * it keeps working (docs/portal.md, deleting an app). One transaction.
   */
  async delete(appId: string, confirmation: string): Promise<{ id: string; deleted: true }> {
    const app = await this.get(appId);
    if (confirmation.trim() !== app.name)
      throw new ValidationError(
        `Type the app's name, ${app.name}, to confirm. Nothing was deleted.`,
        [{ path: '/confirm', message: "must be the app's name" }],
      );
    await this.apps.transaction((tx) => this.apps.markDeleted(app.id, tx));
    afterCommit(() => this.heldCredentials.invalidate());
    return { id: app.id, deleted: true };
  }
}
