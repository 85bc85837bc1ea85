/**
 * Webhook endpoints (OpenAPI "Webhooks and events", docs/webhooks.md, docs/cli.md): per app and
 * environment, https only, never an internal address, live only for production-approved apps; the
 * signing secret is shown once. The admin CLI, the portal and the API call this; none of them holds
 * a rule of its own.
 */
import type { AppsService } from '../apps/apps-service.ts';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../errors.ts';
import type { Environment, WebhookEndpoint } from '../generated/schemas.ts';
import type { WakeUps } from '../lib/wake-ups.ts';
import { randomBytes } from 'node:crypto';
import type { DeliveriesRepository, DeliveryStatus } from './deliveries-repository.ts';
import type { EndpointsRepository } from './endpoints-repository.ts';
import type { EndpointRow } from '../db/outbox-schema.ts';
import { madeByWords, madeColumns, type Maker } from '../lib/made-by.ts';
import {
  apiView,
  decodeCursor,
  deliveryView,
  encodeCursor,
  endpointDetails,
  endpointView,
  OPERATOR_REASON,
  parseEnabledEvents,
  type DeliveryView,
  type EndpointDetails,
  type EndpointView,
} from './endpoint-views.ts';
import { PING_MESSAGE, type EventsRecorder } from './events-recorder-service.ts';
import { sendWebhook } from './sender.ts';
import { TEST_EVENT_TYPES, testEventData, type TestEventType } from './test-events.ts';
import { newSigningSecret, webhookBody, webhookHeaders } from './signing.ts';
import {
  checkDestination,
  parseWebhookUrl,
  UnsafeDestinationError,
  type Resolver,
} from './ssrf.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DELIVERY_ID = /^[0-9a-f]{32}$/;

export interface CreatedEndpoint {
  id: string;
  url: string;
  env: Environment;
  /** `svc_whsec_` + base64 of 32 bytes (signing.ts newSigningSecret): shown once, at creation. */
  secret: string;
}

/**
 * Limits a call to one app's endpoints and deliveries (the portal; the API, also to its key's
 * environment); the CLI passes none.
 */
export interface AppScope {
  appId?: string;
  environment?: Environment;
}

export interface WebhookOptions {
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS (development and tests only). */
  allowPrivateNetworks: boolean;
  /** DNS, replaceable in tests. */
  resolver?: Resolver | undefined;
  /** WEBHOOK_TIMEOUT_MS, for the check ping of a re-enable. */
  timeoutMs?: number | undefined;
  /** Where refusals are explained to the operator (the server's logger). */
  log?: { info(details: object, message: string): void } | undefined;
}

/** How long a rotated-out secret keeps signing (docs/webhooks.md). */
const SECRET_OVERLAP_SECONDS = 24 * 3600;
const DEVELOPER_REASON = "Disabled by the app's developer.";
const DELETED_REASON = 'Deleted.';

/**
 * Active endpoints an app may have per environment (Stripe's limit too): one write fans out to
 * at most this many deliveries. Disabled endpoints do not count (they receive nothing).
 */
export const MAX_ACTIVE_ENDPOINTS = 16;

const capReached = (env: Environment) =>
  new ConflictError(
    `This app already has ${MAX_ACTIVE_ENDPOINTS} active ${env} webhook endpoints, the most one app may have in an environment. Disable one before adding or enabling another.`,
  );

/** Why a disabled endpoint refuses pings and redeliveries, in the same words everywhere. */
function disabledError(endpoint: EndpointRow): ConflictError {
  return new ConflictError(
    `This endpoint is disabled (${endpoint.disabledReason ?? OPERATOR_REASON}) Re-enable it first.`,
  );
}

export interface RotatedSecret {
  id: string;
  /** `svc_whsec_` + base64 of 32 bytes: shown once. */
  secret: string;
  /** Until then the previous secret signs every delivery too. */
  previous_secret_expires_at: string;
}

type UpdatedEndpoint = Pick<EndpointDetails, 'id' | 'url' | 'env' | 'enabled_events' | 'active'>;
type EnabledEndpoint = { id: string; active: true; ping_response_code: number };

export class EndpointsService {
  constructor(
    private readonly endpoints: EndpointsRepository,
    private readonly deliveries: DeliveriesRepository,
    private readonly recorder: EventsRecorder,
    private readonly apps: AppsService,
    private readonly options: WebhookOptions,
    private readonly wakeUps: WakeUps,
  ) {}

  /** Pending deliveries, the oldest one's age and disabled endpoints (the operator's metrics). */
  deliveryBacklog(): Promise<{ pending: number; oldestAgeSeconds: number; disabled: number }> {
    return this.deliveries.backlog();
  }

  async create(input: {
    appId: string;
    env: string;
    url: string;
    /** Default: every type (`*`). */
    enabledEvents?: string | readonly string[] | undefined;
    /** Who makes it (the portal's "Made by"): a member on the portal, or the admin CLI. */
    by?: Maker | undefined;
  }): Promise<CreatedEndpoint> {
    return (await this.planCreate(input))();
  }

  /**
   * A create's checks, the URL's DNS among them (ssrf.ts), made now, before any unit of work; the
   * insert it returns runs in the caller's (an audited change, AuditService.audited), so a slow
   * resolver never holds its transaction.
   */
  async planCreate(input: {
    appId: string;
    env: string;
    url: string;
    enabledEvents?: string | readonly string[] | undefined;
    by?: Maker | undefined;
  }): Promise<() => Promise<CreatedEndpoint>> {
    const insert = await this.planInsert(input);
    // CONTRACT.md's output of `admin webhook create`, exactly; the events are the ones given.
    return async () => {
      const { row, secret } = await insert();
      return { id: row.id, url: row.url, env: row.environment, secret };
    };
  }

  /** POST /api/v1/webhook_endpoints, planned as planCreate: the API's view, with the secret. */
  async planCreateForApi(input: {
    appId: string;
    env: Environment;
    url: string;
    enabledEvents?: readonly string[] | undefined;
  }): Promise<() => Promise<WebhookEndpoint & { secret: string }>> {
    const insert = await this.planInsert({ ...input, by: { via: 'api_key' } });
    return async () => {
      const { row, secret } = await insert();
      return { ...apiView(row), secret };
    };
  }

  private async planInsert(input: {
    appId: string;
    env: string;
    url: string;
    enabledEvents?: string | readonly string[] | undefined;
    by?: Maker | undefined;
  }): Promise<() => Promise<{ row: EndpointRow; secret: string }>> {
    if (input.env !== 'sandbox' && input.env !== 'live')
      throw ValidationError.say('/env', 'Choose the sandbox or live environment.');
    const env: Environment = input.env;
    const app = await this.apps.get(input.appId);
    if (env === 'live' && !app.productionApproved) {
      throw new ForbiddenError(
        'Live webhook endpoints need a production-approved app; use a sandbox endpoint until the app is approved.',
      );
    }
    const enabledEvents = parseEnabledEvents(input.enabledEvents);
    const url = await this.checkUrl(input.url, app.id);
    return async () => {
      const secret = newSigningSecret();
      const row = await this.endpoints.insertWithin(MAX_ACTIVE_ENDPOINTS, {
        appId: app.id,
        environment: env,
        url,
        secret,
        enabledEvents,
        ...madeColumns(input.by),
      });
      if (!row) throw capReached(env);
      return { row, secret };
    };
  }

  /**
   * https, and a host on the public internet (ssrf.ts), else 400 on /url; the URL as it is
   * stored: its WHATWG serialization.
   */
  private async checkUrl(raw: string, appId: string): Promise<string> {
    try {
      const url = parseWebhookUrl(raw);
      await checkDestination(url, this.options);
      return url.href;
    } catch (err) {
      if (err instanceof UnsafeDestinationError) {
        // The operator's log says why; the developer gets the same words for every refusal.
        if (err.detail !== err.message)
          this.options.log?.info({ appId, refused: err.detail }, 'webhook endpoint refused');
        throw ValidationError.say('/url', `The URL ${err.message}.`);
      }
      throw err;
    }
  }

  /**
   * Changes an endpoint's URL (checked as at creation) and/or its event types; deliveries
   * already created are sent as they are. A deleted endpoint is not found.
   */
  async update(
    endpointId: string,
    changes: { url?: string | undefined; enabledEvents?: string | readonly string[] | undefined },
    scope: AppScope = {},
  ): Promise<UpdatedEndpoint> {
    return (await this.planUpdate(endpointId, changes, scope))();
  }

  /**
   * An update's checks, a new URL's DNS among them, made now, before any unit of work; the
   * update it returns runs in the caller's (as planCreate).
   */
  async planUpdate(
    endpointId: string,
    changes: { url?: string | undefined; enabledEvents?: string | readonly string[] | undefined },
    scope: AppScope = {},
  ): Promise<() => Promise<UpdatedEndpoint>> {
    const endpoint = await this.get(endpointId, scope);
    const enabledEvents =
      changes.enabledEvents === undefined ? undefined : parseEnabledEvents(changes.enabledEvents);
    const newUrl =
      changes.url === undefined || changes.url === endpoint.url
        ? undefined
        : await this.checkUrl(changes.url, endpoint.appId);
    return async () => {
      await this.endpoints.update(endpoint.id, {
        ...(newUrl !== undefined ? { url: newUrl } : {}),
        ...(enabledEvents !== undefined ? { enabledEvents } : {}),
      });
      const { id, url, env, enabled_events, active } = await this.details(endpoint.id, scope);
      return { id, url, env, enabled_events, active };
    };
  }

  /** GET /api/v1/webhook_endpoints/{id}. */
  async getForApi(endpointId: string, scope: AppScope): Promise<WebhookEndpoint> {
    return apiView(await this.get(endpointId, scope));
  }

  /**
   * GET /api/v1/webhook_endpoints: a page of the app's endpoints in one environment, newest first,
   * keyset-paged on (created_at, id) with an opaque cursor.
   */
  async page(
    scope: { appId: string; environment: Environment },
    query: { limit: number; cursor?: string | undefined },
  ): Promise<{ items: WebhookEndpoint[]; nextCursor: string | null }> {
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    const rows = await this.endpoints.page(scope.appId, scope.environment, query.limit, after);
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    return {
      items: page.map(apiView),
      nextCursor:
        rows.length > query.limit && last
          ? encodeCursor({ createdAt: last.createdAtText, id: last.id })
          : null,
    };
  }

  /**
   * Deletes an endpoint (DELETE /api/v1/webhook_endpoints/{id}, `admin webhook delete`): nothing
   * is sent to it again, its pending deliveries fail at once, it no longer counts toward the cap,
   * and every door answers 404 for it. The row stays, without its secrets, because its
   * deliveries name it.
   */
  async delete(endpointId: string, scope: AppScope = {}): Promise<{ id: string; deleted: true }> {
    const endpoint = await this.get(endpointId, scope);
    if (!(await this.endpoints.delete(endpoint.id, DELETED_REASON)))
      throw new NotFoundError(`No webhook endpoint with id ${endpointId}.`);
    return { id: endpoint.id, deleted: true };
  }

  /**
   * `scope.appId`: only an endpoint of that app (the portal acts for one app's owner), and
   * `scope.environment` only of that environment (the API: its key's); another app's endpoint,
   * another environment's or a deleted one is not found, in the same words as an unknown id.
   */
  async get(endpointId: string, scope: AppScope = {}): Promise<EndpointRow> {
    const row = UUID.test(endpointId) ? await this.endpoints.findById(endpointId) : undefined;
    if (
      !row ||
      row.deletedAt !== null ||
      (scope.appId !== undefined && row.appId !== scope.appId) ||
      (scope.environment !== undefined && row.environment !== scope.environment)
    )
      throw new NotFoundError(`No webhook endpoint with id ${endpointId}.`);
    return row;
  }

  async show(endpointId: string, scope: AppScope = {}): Promise<EndpointView> {
    return endpointView(await this.get(endpointId, scope));
  }

  /** The portal's view of one endpoint of the app. */
  async details(endpointId: string, scope: AppScope = {}): Promise<EndpointDetails> {
    return endpointDetails(await this.get(endpointId, scope));
  }

  /** The portal's list: each endpoint with who made it ("Made by", src/lib/made-by.ts). */
  async list(appId: string): Promise<(EndpointDetails & { made_by: string })[]> {
    const app = await this.apps.get(appId);
    return (await this.endpoints.listByApp(app.id)).map((row) => ({
      ...endpointDetails(row),
      made_by: madeByWords(row),
    }));
  }

  /** The app's disabled endpoints (the banner at the top of its pages). */
  async disabled(appId: string): Promise<EndpointDetails[]> {
    return (await this.endpoints.listDisabled(appId)).map((row) => endpointDetails(row));
  }

  /**
   * Sends a ping event to one endpoint (docs/webhooks.md: always delivered to an active endpoint).
   */
  async ping(endpointId: string, scope: AppScope = {}): Promise<{ delivery_id: string }> {
    const endpoint = await this.get(endpointId, scope);
    if (!endpoint.active) throw disabledError(endpoint);
    const event = await this.recorder.recordPing({
      id: endpoint.id,
      appId: endpoint.appId,
      environment: endpoint.environment,
    });
    const delivery = event.deliveries[0];
    if (!delivery) throw new ConflictError('This endpoint was disabled meanwhile.');
    return { delivery_id: delivery.id };
  }

  /**
   * A test event (POST /api/v1/events/test, the portal's button, `trigger`): sandbox only, to
   * the app's active sandbox endpoints that enabled the type, or to the one `endpointId` names
   * (which must be such an endpoint); never in live (403).
   */
  async sendTestEvent(
    scope: { appId: string; environment: Environment },
    type: string,
    endpointId?: string,
  ): Promise<{ event_id: string; deliveries: number }> {
    if (scope.environment !== 'sandbox')
      throw new ForbiddenError('Test events are sandbox only; use a sandbox key.');
    if (!(TEST_EVENT_TYPES as readonly string[]).includes(type))
      throw ValidationError.say('/type', `Choose a type: ${TEST_EVENT_TYPES.join(', ')}.`);
    let only: string | undefined;
    if (endpointId !== undefined) {
      const endpoint = await this.get(endpointId, scope);
      if (!endpoint.active) throw disabledError(endpoint);
      if (!endpoint.enabledEvents.some((enabled) => enabled === '*' || enabled === type))
        throw ValidationError.say(
          '/type',
          `This endpoint did not enable ${type}; it receives ${endpoint.enabledEvents.join(', ')}.`,
        );
      only = endpoint.id;
    }
    const event = await this.recorder.recordTest(
      scope.appId,
      type as TestEventType,
      testEventData(type as TestEventType),
      only,
    );
    return { event_id: event.id, deliveries: event.deliveries.length };
  }

  /** Recent deliveries of an endpoint, newest first. */
  async recentDeliveries(
    endpointId: string,
    limit = 20,
    scope: AppScope = {},
  ): Promise<{ endpoint_id: string; deliveries: DeliveryView[] }> {
    if (!Number.isInteger(limit) || limit < 1 || limit > 100)
      throw ValidationError.say('/limit', 'The limit is a whole number from 1 to 100.');
    const endpoint = await this.get(endpointId, scope);
    const rows = await this.deliveries.recent(endpoint.id, limit);
    return { endpoint_id: endpoint.id, deliveries: rows.map(deliveryView) };
  }

  /**
   * Sends a finished (succeeded or failed) delivery again, with the same id and a fresh retry
   * schedule. A pending delivery is refused: it is already scheduled, maybe being sent now.
   */
  async redeliver(
    deliveryId: string,
    scope: AppScope = {},
  ): Promise<{ delivery_id: string; status: DeliveryStatus }> {
    const current = DELIVERY_ID.test(deliveryId)
      ? await this.deliveries.find(deliveryId)
      : undefined;
    const endpoint = current ? await this.endpoints.findById(current.endpoint_id) : undefined;
    if (!current || !endpoint || (scope.appId !== undefined && endpoint.appId !== scope.appId)) {
      throw new NotFoundError(`No webhook delivery with id ${deliveryId}.`);
    }
    if (endpoint.deletedAt !== null)
      throw new ConflictError('The endpoint of this delivery was deleted.');
    if (current.status === 'pending') {
      throw new ConflictError(
        `Delivery ${deliveryId} is still pending; its next attempt is due at ${current.next_attempt_at}.`,
      );
    }
    if (!endpoint.active) throw disabledError(endpoint);
    const updated = await this.deliveries.redeliver(current.id);
    this.wakeUps.now('deliveries');
    return { delivery_id: current.id, status: updated?.status ?? 'pending' };
  }

  /**
   * A new signing secret, shown once. The previous one keeps signing every delivery for
   * SECRET_OVERLAP_SECONDS (a second rotation within that time drops the oldest secret), so a
   * receiver can switch without missing a delivery.
   */
  async rotateSecret(endpointId: string, scope: AppScope = {}): Promise<RotatedSecret> {
    const endpoint = await this.get(endpointId, scope);
    const secret = newSigningSecret();
    const expiresAt = await this.endpoints.rotateSecret(
      endpoint.id,
      secret,
      SECRET_OVERLAP_SECONDS,
    );
    return { id: endpoint.id, secret, previous_secret_expires_at: expiresAt.toISOString() };
  }

  /**
   * A stop, by an operator (the CLI) or by the app's developer (the portal, which passes its
   * scope): nothing is sent until it is re-enabled; pending deliveries fail.
   */
  async disable(
    endpointId: string,
    scope: AppScope = {},
  ): Promise<{ id: string; active: false; disabled_reason: string }> {
    const endpoint = await this.get(endpointId, scope);
    if (!endpoint.active) throw new ConflictError('This endpoint is already disabled.');
    const reason = scope.appId === undefined ? OPERATOR_REASON : DEVELOPER_REASON;
    await this.endpoints.disable(endpoint.id, reason);
    return { id: endpoint.id, active: false, disabled_reason: reason };
  }

  /**
   * Re-enables a disabled endpoint once a check ping, sent now with its current signing
   * secret(s), is answered 2xx. The check is not queued, retried or listed among the events;
   * deliveries that failed while it was disabled can be redelivered afterwards.
   */
  async enable(endpointId: string, scope: AppScope = {}): Promise<EnabledEndpoint> {
    return (await this.planEnable(endpointId, scope))();
  }

  /**
   * An enable's checks and its check ping, sent and answered now, before any unit of work; the
   * enable it returns runs in the caller's (as planCreate), so the ping never holds its
   * transaction.
   */
  async planEnable(
    endpointId: string,
    scope: AppScope = {},
  ): Promise<() => Promise<EnabledEndpoint>> {
    const endpoint = await this.get(endpointId, scope);
    if (endpoint.active) throw new ConflictError('This endpoint is already enabled.');
    const app = await this.apps.get(endpoint.appId);
    if (app.deletedAt)
      throw new ConflictError('This app was deleted; its endpoints stay disabled.');
    // Checked before the ping is sent, and again (locked) when it is enabled.
    if ((await this.endpoints.activeCount(app.id, endpoint.environment)) >= MAX_ACTIVE_ENDPOINTS)
      throw capReached(endpoint.environment);
    const id = randomBytes(16).toString('hex');
    const body = webhookBody({
      deliveryId: id,
      eventId: id,
      type: 'ping',
      createdAt: new Date().toISOString(),
      data: JSON.stringify({ message: PING_MESSAGE }),
    });
    const previous =
      endpoint.previousSecret &&
      endpoint.previousSecretExpiresAt &&
      endpoint.previousSecretExpiresAt > new Date()
        ? endpoint.previousSecret
        : null;
    const headers = webhookHeaders({
      deliveryId: id,
      type: 'ping',
      body,
      secrets: previous ? [previous, endpoint.secret] : [endpoint.secret],
      timestamp: Math.floor(Date.now() / 1000),
    });
    const result = await sendWebhook(endpoint.url, body, headers, {
      allowPrivateNetworks: this.options.allowPrivateNetworks,
      ...(this.options.resolver ? { resolver: this.options.resolver } : {}),
      timeoutMs: this.options.timeoutMs ?? 8000,
    });
    if (result.kind !== 'success') {
      const answer =
        result.responseCode === null
          ? `failed (${result.error})`
          : `was answered ${result.responseCode}`;
      throw new ConflictError(`The check ping ${answer}; the endpoint stays disabled.`);
    }
    const answered = result.responseCode;
    return async () => {
      if (!(await this.endpoints.enable(endpoint, MAX_ACTIVE_ENDPOINTS)))
        throw capReached(endpoint.environment);
      return { id: endpoint.id, active: true, ping_response_code: answered };
    };
  }
}
