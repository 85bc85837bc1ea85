/** The portal's URLs, in one place (routes register these patterns; views link to them). */
import { SITE_STYLESHEET_PATH } from '../web/html.ts';
import { SIGNUP_PATH } from '../web/login.ts';

export const PORTAL_PATH = '/portal';
export const PORTAL_CSS_PATH = SITE_STYLESHEET_PATH;
export const PORTAL_JS_PATH = '/assets/portal.js';

export type AppTab =
  | 'overview'
  | 'keys'
  | 'oauth'
  | 'webhooks'
  | 'events'
  | 'saved-searches'
  | 'logs'
  | 'inventory'
  | 'members'
  | 'audit'
  | 'settings';

export const paths = {
  home: PORTAL_PATH,
  signup: SIGNUP_PATH,
  apps: `${PORTAL_PATH}/apps`,
  app: (appId: string) => `${PORTAL_PATH}/apps/${appId}`,
  productionRequest: (appId: string) => `${PORTAL_PATH}/apps/${appId}/production-request`,
  keys: (appId: string) => `${PORTAL_PATH}/apps/${appId}/keys`,
  keyRevoke: (appId: string) => `${PORTAL_PATH}/apps/${appId}/keys/revoke`,
  key: (appId: string, keyId: string) => `${PORTAL_PATH}/apps/${appId}/keys/${keyId}`,
  keyRename: (appId: string, keyId: string) => `${PORTAL_PATH}/apps/${appId}/keys/${keyId}/name`,
  keyRoll: (appId: string, keyId: string) => `${PORTAL_PATH}/apps/${appId}/keys/${keyId}/roll`,
  oauth: (appId: string) => `${PORTAL_PATH}/apps/${appId}/oauth`,
  redirectUris: (appId: string) => `${PORTAL_PATH}/apps/${appId}/oauth/redirect-uris`,
  redirectUriRemove: (appId: string) => `${PORTAL_PATH}/apps/${appId}/oauth/redirect-uris/remove`,
  clientSecret: (appId: string) => `${PORTAL_PATH}/apps/${appId}/oauth/secret`,
  webhooks: (appId: string) => `${PORTAL_PATH}/apps/${appId}/webhooks`,
  endpoint: (appId: string, endpointId: string) =>
    `${PORTAL_PATH}/apps/${appId}/webhooks/${endpointId}`,
  endpointPing: (appId: string, endpointId: string) =>
    `${PORTAL_PATH}/apps/${appId}/webhooks/${endpointId}/ping`,
  endpointTestEvent: (appId: string, endpointId: string) =>
    `${PORTAL_PATH}/apps/${appId}/webhooks/${endpointId}/test-event`,
  endpointRedeliver: (appId: string, endpointId: string) =>
    `${PORTAL_PATH}/apps/${appId}/webhooks/${endpointId}/redeliver`,
  endpointRotate: (appId: string, endpointId: string) =>
    `${PORTAL_PATH}/apps/${appId}/webhooks/${endpointId}/secret`,
  endpointEnable: (appId: string, endpointId: string) =>
    `${PORTAL_PATH}/apps/${appId}/webhooks/${endpointId}/enable`,
  endpointDisable: (appId: string, endpointId: string) =>
    `${PORTAL_PATH}/apps/${appId}/webhooks/${endpointId}/disable`,
  endpointEdit: (appId: string, endpointId: string) =>
    `${PORTAL_PATH}/apps/${appId}/webhooks/${endpointId}/edit`,
  endpointDelete: (appId: string, endpointId: string) =>
    `${PORTAL_PATH}/apps/${appId}/webhooks/${endpointId}/delete`,
  events: (appId: string) => `${PORTAL_PATH}/apps/${appId}/events`,
  event: (appId: string, eventId: string) => `${PORTAL_PATH}/apps/${appId}/events/${eventId}`,
  eventRedeliver: (appId: string, eventId: string) =>
    `${PORTAL_PATH}/apps/${appId}/events/${eventId}/redeliver`,
  savedSearches: (appId: string) => `${PORTAL_PATH}/apps/${appId}/saved-searches`,
  savedSearchDelete: (appId: string) => `${PORTAL_PATH}/apps/${appId}/saved-searches/delete`,
  logs: (appId: string) => `${PORTAL_PATH}/apps/${appId}/logs`,
  log: (appId: string, logId: string) => `${PORTAL_PATH}/apps/${appId}/logs/${logId}`,
  inventory: (appId: string) => `${PORTAL_PATH}/apps/${appId}/inventory`,
  members: (appId: string) => `${PORTAL_PATH}/apps/${appId}/members`,
  memberInvite: (appId: string) => `${PORTAL_PATH}/apps/${appId}/members/invite`,
  memberRole: (appId: string) => `${PORTAL_PATH}/apps/${appId}/members/role`,
  memberRemove: (appId: string) => `${PORTAL_PATH}/apps/${appId}/members/remove`,
  invitationRevoke: (appId: string) => `${PORTAL_PATH}/apps/${appId}/members/revoke-invitation`,
  invitationAnswer: (invitationId: string, answer: 'accept' | 'decline') =>
    `${PORTAL_PATH}/invitations/${invitationId}/${answer}`,
  audit: (appId: string) => `${PORTAL_PATH}/apps/${appId}/audit`,
  settings: (appId: string) => `${PORTAL_PATH}/apps/${appId}/settings`,
  appRename: (appId: string) => `${PORTAL_PATH}/apps/${appId}/settings/name`,
  appDelete: (appId: string) => `${PORTAL_PATH}/apps/${appId}/settings/delete`,
  appTransfer: (appId: string) => `${PORTAL_PATH}/apps/${appId}/settings/transfer`,
} as const;

/**
 * Route patterns, relative to PORTAL_PATH: the portal plugin registers the routes under that
 * prefix.
 */
export const ROUTES = { home: '/', signup: '/signup', apps: '/apps' } as const;
/** The per-app pages (Fastify syntax). */
export const APP_ROUTE = '/apps/:appId';
