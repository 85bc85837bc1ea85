/**
 * Webhook endpoints (OpenAPI "Webhooks and events", docs/webhooks.md, docs/cli.md): per app and
 * environment, https only, never an internal address, live only for production-approved apps; the
 * signing secret is shown once. The admin CLI, the portal and the API call this; none of them holds
 * a rule of its own.
 */
import type { AppsService } from '../apps/apps-service.ts';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../errors.ts';
import { ENABLED_EVENT_TYPE_VALUES } from '../generated/constants.ts';
import type { EnabledEventType, Environment, WebhookEndpoint } from '../generated/schemas.ts';
import { randomBytes } from 'node:crypto';
import { generateSecret, PREFIX } from '../lib/secrets.ts';
import type { DeliveriesRepository, DeliveryRow, DeliveryStatus } from './deliveries-repository.ts';
import type { EndpointPageKey, EndpointsRepository } from './endpoints-repository.ts';
import type { EndpointRow } from '../db/activity-schema.ts';
import { PING_MESSAGE, type EventsRecorder } from './events-recorder.ts';
import { sendWebhook } from './sender.ts';
import { webhookBody, webhookHeaders } from './signing.ts';
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
  /** `svc_whsec_…`: shown once, at creation. */
  secret: string;
}

export interface EndpointView {
  id: string;
  url: string;
  env: Environment;
  active: boolean;
  last_error: string | null;
  last_failure_at: string | null;
}

/** What the portal shows of an endpoint besides CONTRACT.md's `webhook show` fields. */
export interface EndpointDetails extends EndpointView {
  /** The event types it receives, or `*` (docs/webhooks.md, "Choosing events"). */
  enabled_events: EnabledEventType[];
  /** Why it is disabled (410 Gone, failing for 3 days, an operator, the app's deletion). */
  disabled_reason: string | null;
  disabled_at: string | null;
  /** While a rotation's overlap lasts: when the previous secret stops signing. */
  previous_secret_expires_at: string | null;
}

/** A delivery as the CLI and the portal show it: the endpoint and environment are the context. */
export type DeliveryView = Omit<DeliveryRow, 'endpoint_id' | 'environment'>;

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
const OPERATOR_REASON = 'Disabled by an operator.';
const DEVELOPER_REASON = "Disabled by the app's developer.";
const DELETED_REASON = 'Deleted.';

/** Every event type, the default of enabled_events. */
const ALL_EVENTS = '*';
const EVENT_TYPES: readonly string[] = ENABLED_EVENT_TYPE_VALUES;

/**
 * enabled_events as given (the API's array, the CLI's and the portal's list): known types, or
 * `*` alone; duplicates folded, in the document's order. Undefined: every type.
 */
function parseEnabledEvents(raw: string | readonly string[] | undefined): EnabledEventType[] {
  if (raw === undefined) return [ALL_EVENTS];
  const given = (typeof raw === 'string' ? raw.split(/[\s,]+/) : [...raw]).filter(Boolean);
  if (given.length === 0)
    throw ValidationError.say(
      '/enabled_events',
      'Choose at least one event type, or * for every type.',
    );
  const unknown = given.filter((type) => !EVENT_TYPES.includes(type));
  if (unknown.length > 0)
    throw ValidationError.say(
      '/enabled_events',
      `There is no event type ${unknown.join(', ')}; choose from ${EVENT_TYPES.join(', ')}.`,
    );
  if (given.includes(ALL_EVENTS) && given.some((type) => type !== ALL_EVENTS))
    throw ValidationError.say(
      '/enabled_events',
      '* stands for every event type: send it alone, or list the types.',
    );
  return ENABLED_EVENT_TYPE_VALUES.filter((type) => given.includes(type));
}

/** A page of endpoints' cursor: opaque (base64url of created_at and id), as the API sends it. */
function encodeCursor(key: EndpointPageKey): string {
  return Buffer.from(`${key.createdAt}|${key.id}`).toString('base64url');
}

const CURSOR = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)\|([0-9a-f-]{36})$/;

function decodeCursor(cursor: string): EndpointPageKey {
  const match = CURSOR.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match || !UUID.test(match[2]!) || Number.isNaN(Date.parse(match[1]!)))
    throw ValidationError.field(
      '/query/cursor',
      'must be the meta.next_cursor of a previous page, as it was given',
    );
  return { createdAt: match[1]!, id: match[2]! };
}

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
  /** `svc_whsec_…`: shown once. */
  secret: string;
  /** Until then the previous secret signs every delivery too. */
  previous_secret_expires_at: string;
}

/** The stored list, as the API shows it (rows before drizzle/0017 hold `{*}`). */
const enabledEventsOf = (row: EndpointRow) => row.enabledEvents as EnabledEventType[];

/** An endpoint as the API shows it (OpenAPI WebhookEndpoint): never its secret. */
function apiView(row: EndpointRow): WebhookEndpoint {
  const details = endpointDetails(row);
  return {
    id: row.id,
    url: row.url,
    environment: row.environment,
    enabled_events: enabledEventsOf(row),
    disabled: !row.active,
    disabled_reason: details.disabled_reason,
    disabled_at: details.disabled_at,
    last_error: row.lastError,
    last_failure_at: details.last_failure_at,
    previous_secret_expires_at: details.previous_secret_expires_at,
    created_at: row.createdAt.toISOString(),
  };
}

function endpointView(row: EndpointRow): EndpointView {
  return {
    id: row.id,
    url: row.url,
    env: row.environment,
    active: row.active,
    last_error: row.lastError,
    last_failure_at: row.lastFailureAt ? row.lastFailureAt.toISOString() : null,
  };
}

function endpointDetails(row: EndpointRow, now = new Date()): EndpointDetails {
  const overlap = row.previousSecretExpiresAt && row.previousSecretExpiresAt > now;
  return {
    ...endpointView(row),
    enabled_events: enabledEventsOf(row),
    disabled_reason: row.active ? null : (row.disabledReason ?? OPERATOR_REASON),
    disabled_at: row.disabledAt ? row.disabledAt.toISOString() : null,
    previous_secret_expires_at: overlap ? row.previousSecretExpiresAt!.toISOString() : null,
  };
}

function deliveryView(row: DeliveryRow): DeliveryView {
  return {
    id: row.id,
    event_id: row.event_id,
    type: row.type,
    status: row.status,
    attempts: row.attempts,
    last_response_code: row.last_response_code,
    last_error: row.last_error,
    last_attempt_at: row.last_attempt_at,
    next_attempt_at: row.next_attempt_at,
    created_at: row.created_at,
  };
}

export class EndpointsService {
  constructor(
    private readonly endpoints: EndpointsRepository,
    private readonly deliveries: DeliveriesRepository,
    private readonly recorder: EventsRecorder,
    private readonly apps: AppsService,
    private readonly options: WebhookOptions,
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
  }): Promise<CreatedEndpoint> {
    // CONTRACT.md's output of `admin webhook create`, exactly; the events are the ones given.
    const { row, secret } = await this.insert(input);
    return { id: row.id, url: row.url, env: row.environment, secret };
  }

  /** POST /api/v1/webhook_endpoints: the API's view, with the secret (shown only here). */
  async createForApi(input: {
    appId: string;
    env: Environment;
    url: string;
    enabledEvents?: readonly string[] | undefined;
  }): Promise<WebhookEndpoint & { secret: string }> {
    const { row, secret } = await this.insert(input);
    return { ...apiView(row), secret };
  }

  private async insert(input: {
    appId: string;
    env: string;
    url: string;
    enabledEvents?: string | readonly string[] | undefined;
  }): Promise<{ row: EndpointRow; secret: string }> {
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
    await this.checkUrl(input.url, app.id);
    const secret = generateSecret(PREFIX.webhookSecret);
    const row = await this.endpoints.insertWithin(MAX_ACTIVE_ENDPOINTS, {
      appId: app.id,
      environment: env,
      url: input.url,
      secret,
      enabledEvents,
    });
    if (!row) throw capReached(env);
    return { row, secret };
  }

  /** https, and a host on the public internet (ssrf.ts), else 400 on /url. */
  private async checkUrl(url: string, appId: string): Promise<void> {
    try {
      await checkDestination(parseWebhookUrl(url), this.options);
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
  ): Promise<Pick<EndpointDetails, 'id' | 'url' | 'env' | 'enabled_events' | 'active'>> {
    const endpoint = await this.get(endpointId, scope);
    const enabledEvents =
      changes.enabledEvents === undefined ? undefined : parseEnabledEvents(changes.enabledEvents);
    if (changes.url !== undefined && changes.url !== endpoint.url)
      await this.checkUrl(changes.url, endpoint.appId);
    await this.endpoints.update(endpoint.id, {
      ...(changes.url !== undefined ? { url: changes.url } : {}),
      ...(enabledEvents !== undefined ? { enabledEvents } : {}),
    });
    const { id, url, env, enabled_events, active } = await this.details(endpoint.id, scope);
    return { id, url, env, enabled_events, active };
  }

  /**
   * PATCH /api/v1/webhook_endpoints/{id}: url and events, then the state (`disabled`), each
   * through the portal's own rules (disable; enable after a check ping). Sending the state it
   * already has changes nothing.
   */
  async updateForApi(
    endpointId: string,
    changes: {
      url?: string | undefined;
      enabledEvents?: readonly string[] | undefined;
      disabled?: boolean | undefined;
    },
    scope: AppScope & { appId: string; environment: Environment },
  ): Promise<WebhookEndpoint> {
    const endpoint = await this.get(endpointId, scope);
    if (changes.url !== undefined || changes.enabledEvents !== undefined)
      await this.update(endpoint.id, changes, scope);
    if (changes.disabled === true && endpoint.active) await this.disable(endpoint.id, scope);
    if (changes.disabled === false && !endpoint.active) await this.enable(endpoint.id, scope);
    return apiView(await this.get(endpoint.id, scope));
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

  async list(appId: string): Promise<EndpointDetails[]> {
    const app = await this.apps.get(appId);
    return (await this.endpoints.listByApp(app.id)).map((row) => endpointDetails(row));
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
    this.recorder.hint();
    return { delivery_id: current.id, status: updated?.status ?? 'pending' };
  }

  /**
   * A new signing secret, shown once. The previous one keeps signing every delivery for
   * SECRET_OVERLAP_SECONDS (a second rotation within that time drops the oldest secret), so a
   * receiver can switch without missing a delivery.
   */
  async rotateSecret(endpointId: string, scope: AppScope = {}): Promise<RotatedSecret> {
    const endpoint = await this.get(endpointId, scope);
    const secret = generateSecret(PREFIX.webhookSecret);
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
  async enable(
    endpointId: string,
    scope: AppScope = {},
  ): Promise<{ id: string; active: true; ping_response_code: number }> {
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
    if (!(await this.endpoints.enable(endpoint, MAX_ACTIVE_ENDPOINTS)))
      throw capReached(endpoint.environment);
    return { id: endpoint.id, active: true, ping_response_code: result.responseCode };
  }
}
