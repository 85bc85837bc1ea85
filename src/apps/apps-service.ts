import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../errors.ts';
import type { UsersRepository } from '../accounts/users-repository.ts';
import { generateSecret, hashSecret, displayPrefix, PREFIX } from '../lib/secrets.ts';
import type { Db } from '../db/client.ts';
import type { AppsRepository } from './apps-repository.ts';
import type { AppRow } from '../db/schema.ts';

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
   * An app of this owner. Another owner's app is not found, with the same words as an unknown
   * id: the portal reveals nothing about apps that are not the user's.
   */
  async getOwned(appId: string, ownerId: string): Promise<AppRow & { ownerUsername: string }> {
    const app = UUID.test(appId) ? await this.apps.findById(appId) : undefined;
    if (!app || app.ownerId !== ownerId) throw new NotFoundError(`No app with id ${appId}.`);
    return app;
  }

  /** The owner's apps, oldest first. */
  listOwned(ownerId: string): Promise<AppRow[]> {
    return this.apps.listByOwner(ownerId);
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
    this.heldCredentials.invalidate();
    return { id: app.id, deleted: true };
  }
}
