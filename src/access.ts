/**
 * The access model: who is calling, in which environment, and what they may see or change.
 * Every rule about visibility lives here (OpenAPI "Environments and isolation"); services and
 * repositories ask, they never re-derive it. The auth plugin's hook (src/plugins/auth.ts) puts
 * the caller on the request, once.
 */
import { ForbiddenError, NotFoundError, UnauthorizedError } from './errors.ts';
import type { Environment, EventType, ListingStatus } from './generated/schemas.ts';
import { APP_ROLES, type AppRole } from './lib/roles.ts';

/**
 * The scopes of the document's oauth2 scheme (generated), which OAuth clients may request; API
 * keys carry the same ones plus the key-only scopes (KEY_SCOPES: webhooks:write, audit:read).
 */
export { KEY_SCOPES, SCOPES, type KeyScope, type Scope } from './generated/constants.ts';

export interface Caller {
  /**
   * anonymous: no credential; api_key: acts as the key's app owner; oauth: acts as the authorizing
   * user.
   */
  kind: 'anonymous' | 'api_key' | 'oauth';
  environment: Environment;
  /** The user the caller acts as (the seller of what it writes). */
  userId: string | null;
  /** The app the credential belongs to. */
  appId: string | null;
  /**
   * The developer account that owns that app (for an API key, the same as userId): whose share
   * of the process's long-poll places the caller's waits take (src/events/event-waiters.ts).
   */
  appOwnerId: string | null;
  credentialId: string | null;
  scopes: readonly string[];
}

export const ANONYMOUS: Caller = Object.freeze({
  kind: 'anonymous',
  environment: 'live',
  userId: null,
  appId: null,
  appOwnerId: null,
  credentialId: null,
  scopes: Object.freeze([]) as readonly string[],
});

/**
 * Which events GET /api/v1/events lists to the caller (OpenAPI listEvents, "Scopes"): `read`
 * covers all of the app's events the credential may see, `listing.matched` included; `searches`
 * without `read` covers only `listing.matched`, the events of saved searches. The operation's
 * security admits either scope; this narrows what `searches` alone sees. Returns the type to
 * list (undefined: every type); a `type` the scopes do not cover is 403 insufficient_scope.
 */
export function listedEventType(
  caller: Caller,
  type: EventType | undefined,
): EventType | undefined {
  if (caller.scopes.includes('read')) return type;
  if (type === undefined || type === 'listing.matched') return 'listing.matched';
  throw ForbiddenError.insufficientScope(
    ['read'],
    `${type} events need the scope read; the scope searches covers only listing.matched.`,
  );
}

/** What a caller's GET /listings returns (OpenAPI "Environments and isolation"). */
export type FeedScope =
  /** The public feed: live, active listings of every seller. */
  | { kind: 'public' }
  /**
   * A sandbox key: all of its owner's sandbox listings, every status; only the active ones
   * (`onlyActive`) for a key without listings:write, which covers unpublished listings.
   */
  | { kind: 'seller'; sellerId: string; environment: Environment; onlyActive?: true };

/**
 * The scope that covers a seller's unpublished listings (drafts and archived ones) as well as
 * changing them (OpenAPI "Authentication", "Scopes"): managing listings includes seeing the ones
 * nobody else sees. `read` covers the profile and the app's events, never an unpublished listing.
 */
const OWNER_VIEW_SCOPE = 'listings:write';

/** Whether the caller may see its own listings of every status (the owner view). */
function seesUnpublished(caller: Caller): boolean {
  return caller.scopes.includes(OWNER_VIEW_SCOPE);
}

/** The owner view without its scope: 403 insufficient_scope, for keys and tokens alike. */
function assertOwnerView(caller: Caller, what: string): void {
  if (!seesUnpublished(caller))
    throw ForbiddenError.insufficientScope(
      [OWNER_VIEW_SCOPE],
      `${what} includes drafts and archived listings: it needs the scope ${OWNER_VIEW_SCOPE}.`,
    );
}

export function feedScope(caller: Caller): FeedScope {
  if (caller.environment === 'sandbox' && caller.userId) {
    // A sandbox key's feed is its owner's sandbox (there is no public sandbox feed, and the spec
    // gives every sandbox key one): every status with listings:write, else its active listings,
    // as a read by id shows them.
    const scope = { kind: 'seller', sellerId: caller.userId, environment: 'sandbox' } as const;
    return seesUnpublished(caller) ? scope : { ...scope, onlyActive: true };
  }
  return { kind: 'public' };
}

/**
 * GET /listings?seller=me, the owner view: every listing of the user the credential acts for,
 * in its environment, every status. 401 without a credential, 403 insufficient_scope without
 * listings:write.
 */
export function ownerViewScope(caller: Caller): Extract<FeedScope, { kind: 'seller' }> {
  if (!caller.userId)
    throw new UnauthorizedError('seller=me lists your own listings: send a credential.');
  assertOwnerView(caller, 'seller=me');
  return { kind: 'seller', sellerId: caller.userId, environment: caller.environment };
}

/**
 * Whether the caller's reads may be served a little behind the latest writes, by a read replica
 * within DATABASE_REPLICA_MAX_LAG_MS (docs/operations.md "Read replica"): anonymous ones only.
 * Their answers are the same for everyone and any cache may keep them 5 seconds
 * (listings-handlers.ts `cacheable`), so the replica's bound spends the same staleness budget. A
 * credential (API key, OAuth token) always reads the primary, so it reads its own writes; an
 * anonymous caller writes nothing.
 */
export function mayReadBehind(caller: Caller): boolean {
  return caller.kind === 'anonymous';
}

/** The facts about a listing that visibility depends on. */
export interface ListingAccess {
  sellerId: string;
  environment: Environment;
  status: ListingStatus;
}

export function isOwner(caller: Caller, listing: ListingAccess): boolean {
  return (
    caller.userId !== null &&
    caller.userId === listing.sellerId &&
    caller.environment === listing.environment
  );
}

/**
 * GET /listings/{id}: anonymous sees live active listings; a sandbox key its own sandbox
 * listings; a live key or OAuth token live active listings plus its own live listings of any
 * status. Its own drafts and archived listings only with listings:write (OWNER_VIEW_SCOPE):
 * without it they are 404, as to anyone else.
 */
function canSee(caller: Caller, listing: ListingAccess): boolean {
  if (isOwner(caller, listing) && (listing.status === 'active' || seesUnpublished(caller)))
    return true;
  return (
    caller.environment === 'live' && listing.environment === 'live' && listing.status === 'active'
  );
}

/** Writes: 404 when the caller cannot see the listing, 403 when it can but does not own it. */
export function assertCanWrite(
  caller: Caller,
  listing: ListingAccess | undefined,
): asserts listing is ListingAccess {
  if (!listing || !canSee(caller, listing)) throw new NotFoundError('No listing with this id.');
  if (!isOwner(caller, listing))
    throw new ForbiddenError('Only the seller who owns this listing can change it.');
}

/**
 * Reads: 404 for anything the caller cannot see (another environment, another seller's private
 * listing).
 */
export function assertCanSee(
  caller: Caller,
  listing: ListingAccess | undefined,
): asserts listing is ListingAccess {
  if (!listing || !canSee(caller, listing)) throw new NotFoundError('No listing with this id.');
}

/* ---------------------------------------------------------------- members of an app */

export { APP_ROLES, type AppRole };

/**
 * What a member of an app may do in the portal (and what `admin app member` lets an operator
 * grant): every app-scoped page and form names one of these, and `mayDo` is the only place a
 * role is compared. docs/portal.md "Members and roles" is this table in words.
 */
export const APP_ACTIONS = {
  /** The overview (usage, go-live checklist), keys and endpoints listed (never a secret). */
  'app.view': 'viewer',
  'logs.view': 'viewer',
  'events.view': 'viewer',
  'inventory.view': 'viewer',
  'saved_searches.view': 'viewer',
  'members.view': 'viewer',
  /** Sandbox keys created, renamed, rolled, revoked; sandbox endpoints, their secrets too. */
  'sandbox.credentials': 'developer',
  'events.redeliver': 'developer',
  'saved_searches.delete': 'developer',
  /** Live keys and live endpoints (and their secrets), the OAuth client secret and settings. */
  'live.credentials': 'admin',
  'oauth.manage': 'admin',
  'members.manage': 'admin',
  'app.rename': 'admin',
  /** The audit log: who changed what, from which address. */
  'audit.view': 'admin',
  /**
   * Owners alone: the app deleted, its account holder changed (AppsService.transfer), production
   * approval asked, another owner made or removed.
   */
  'app.delete': 'owner',
  'app.transfer': 'owner',
  'production.request': 'owner',
  'owners.manage': 'owner',
} as const satisfies Record<string, AppRole>;
export type AppAction = keyof typeof APP_ACTIONS;

/** Whether a member with this role may do this (roles are ordered: owner ⊇ admin ⊇ …). */
export function mayDo(role: AppRole, action: AppAction): boolean {
  return APP_ROLES.indexOf(role) <= APP_ROLES.indexOf(APP_ACTIONS[action]);
}

/** 403 unless the role may do the action, with the role it needs in the words. */
export function assertMayDo(role: AppRole, action: AppAction): void {
  if (!mayDo(role, action))
    throw new ForbiddenError(
      `Your role on this app, ${role}, does not allow this: it needs ${APP_ACTIONS[action]} or above.`,
    );
}

/**
 * The credentials action of an environment: sandbox ones are developers', live ones admins'
 * (anything but `live`, refused later by its own validation, counts as sandbox).
 */
export function credentialsAction(environment: Environment | string): AppAction {
  return environment === 'live' ? 'live.credentials' : 'sandbox.credentials';
}

/**
 * What creating a key needs: its environment's credentials action, and for a key that reads the
 * audit log (audit:read, OpenAPI "Audit log") the role that may read it in the portal, so that
 * no member makes a key that reads more than they may (a developer's sandbox key included).
 */
export function keyCreationActions(
  environment: Environment | string,
  scopes: readonly string[],
): AppAction[] {
  const actions = [credentialsAction(environment)];
  if (scopes.includes('audit:read')) actions.push('audit.view');
  return actions;
}

/**
 * The action a change of a member's role needs (a new member: from null; a removal: to null):
 * owners alone make or unmake owners, admins manage the rest.
 */
export function memberChangeAction(from: AppRole | null, to: AppRole | null): AppAction {
  return from === 'owner' || to === 'owner' ? 'owners.manage' : 'members.manage';
}
