/**
 * Webhook endpoints as each door shows them (the API's WebhookEndpoint, the CLI's `webhook show`,
 * the portal's details), their deliveries, and enabled_events and the endpoints' page cursor as
 * the doors give them (endpoints-service.ts holds the rules).
 */
import { ValidationError } from '../errors.ts';
import { ENABLED_EVENT_TYPE_VALUES } from '../generated/constants.ts';
import type {
  EnabledEventType,
  Environment,
  EventType,
  WebhookEndpoint,
} from '../generated/schemas.ts';
import { isTimestamp } from '../lib/timestamps.ts';
import type { EndpointRow } from '../db/outbox-schema.ts';

/** Where a page of endpoints starts: after this one (newest first). */
export interface EndpointPageKey {
  /** created_at at full precision (ISO 8601, microseconds). */
  createdAt: string;
  id: string;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface DeliveryRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  type: EventType;
  environment: Environment;
  status: DeliveryStatus;
  attempts: number;
  last_response_code: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
  /** When the next attempt is due (pending deliveries only). */
  next_attempt_at: string | null;
  created_at: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Why an endpoint is disabled when no other reason was kept. */
export const OPERATOR_REASON = 'Disabled by an operator.';

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

/** Every event type, the default of enabled_events. */
const ALL_EVENTS = '*';
const EVENT_TYPES: readonly string[] = ENABLED_EVENT_TYPE_VALUES;

/**
 * enabled_events as given (the API's array, the CLI's and the portal's list): known types, or
 * `*` alone; duplicates folded, in the document's order. Undefined: every type.
 */
export function parseEnabledEvents(
  raw: string | readonly string[] | undefined,
): EnabledEventType[] {
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
export function encodeCursor(key: EndpointPageKey): string {
  return Buffer.from(`${key.createdAt}|${key.id}`).toString('base64url');
}

const CURSOR = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)\|([0-9a-f-]{36})$/;

export function decodeCursor(cursor: string): EndpointPageKey {
  const match = CURSOR.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  // The time is compared in SQL: PostgreSQL's reading of it, not Date.parse's (timestamps.ts).
  if (!match || !UUID.test(match[2]!) || !isTimestamp(match[1]))
    throw ValidationError.field(
      '/query/cursor',
      'must be the meta.next_cursor of a previous page, as it was given',
    );
  return { createdAt: match[1]!, id: match[2]! };
}

/** The stored list, as the API shows it (rows before drizzle/0017 hold `{*}`). */
const enabledEventsOf = (row: EndpointRow) => row.enabledEvents as EnabledEventType[];

/** An endpoint as the API shows it (OpenAPI WebhookEndpoint): never its secret. */
export function apiView(row: EndpointRow): WebhookEndpoint {
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

export function endpointView(row: EndpointRow): EndpointView {
  return {
    id: row.id,
    url: row.url,
    env: row.environment,
    active: row.active,
    last_error: row.lastError,
    last_failure_at: row.lastFailureAt ? row.lastFailureAt.toISOString() : null,
  };
}

export function endpointDetails(row: EndpointRow, now = new Date()): EndpointDetails {
  const overlap = row.previousSecretExpiresAt && row.previousSecretExpiresAt > now;
  return {
    ...endpointView(row),
    enabled_events: enabledEventsOf(row),
    disabled_reason: row.active ? null : (row.disabledReason ?? OPERATOR_REASON),
    disabled_at: row.disabledAt ? row.disabledAt.toISOString() : null,
    previous_secret_expires_at: overlap ? row.previousSecretExpiresAt!.toISOString() : null,
  };
}

export function deliveryView(row: DeliveryRow): DeliveryView {
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
