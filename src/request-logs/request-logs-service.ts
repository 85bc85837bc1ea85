/**
 * Reading the request log of an app (the portal's Request logs pages, `admin app logs`): one
 * environment at a time, filtered by status class, method, path prefix and credential, newest
 * first. The filters are checked here, for both doors, in the same words.
 */
import { NotFoundError, ValidationError } from '../errors.ts';
import type { Environment } from '../generated/schemas.ts';
import { isTimestamp } from '../lib/timestamps.ts';
import { RequestLogBuffer, type BufferOptions } from './request-log-buffer.ts';
import { periodOf, report, type Outcome, type UsageReport } from './usage.ts';
import { BODY_CAP_BYTES } from './logged-body.ts';
import type {
  RequestLogDetail,
  RequestLogFilter,
  RequestLogRow,
  RequestLogsRepository,
} from './request-logs-repository.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const METHODS = ['GET', 'POST', 'PATCH', 'PUT', 'DELETE', 'HEAD', 'OPTIONS'];
/** How often logs past their 14 days are deleted. */
const PRUNE_EVERY_MS = 3_600_000;
/** The status filters: the classes, and the chart's outcomes (usage.ts: 4xx there is not 429). */
export const STATUS_FILTERS = {
  '2xx': { from: 200, to: 300 },
  '3xx': { from: 300, to: 400 },
  '4xx': { from: 400, to: 500 },
  '4xx-not-429': { from: 400, to: 500, except: 429 },
  '429': { from: 429, to: 430 },
  '5xx': { from: 500, to: 600 },
} as const;
/** The status filter that shows a chart outcome's requests. */
export const STATUS_OF_OUTCOME: Record<Outcome, keyof typeof STATUS_FILTERS> = {
  '2xx': '2xx',
  '3xx': '3xx',
  '4xx': '4xx-not-429',
  '429': '429',
  '5xx': '5xx',
};
const HOUR = /^(\d{4}-\d{2}-\d{2}T\d{2}):00(:00(\.0+)?)?Z$/;
const DAY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * The filter's bounds from `start` (ms), or undefined when either is not a time PostgreSQL reads
 * (the day 0000-01-01, or one whose end is in the year 10000).
 */
function periodFrom(start: number, length: number): { since: string; until: string } | undefined {
  if (Number.isNaN(start)) return undefined;
  const since = new Date(start).toISOString();
  const until = new Date(start + length).toISOString();
  return isTimestamp(since) && isTimestamp(until) ? { since, until } : undefined;
}
/** What `--days` may ask of the usage: 1 is the last 24 hours per hour, more are days. */
const MAX_USAGE_DAYS = 14;

/** What `credential` may be besides a key id: requests made with OAuth tokens. */
export const OAUTH_CREDENTIAL = 'oauth';

export interface LogQuery {
  env?: string | undefined;
  /** A key of STATUS_FILTERS: "2xx", "4xx", "429", "4xx-not-429"... */
  status?: string | undefined;
  /** One UTC hour (2026-11-26T20:00Z) or day (2026-11-26): the chart's bars link to them. */
  hour?: string | undefined;
  day?: string | undefined;
  method?: string | undefined;
  path?: string | undefined;
  /** A key id, or "oauth". */
  credential?: string | undefined;
  limit?: number | undefined;
  cursor?: string | undefined;
}

/** A logged request as the portal and the CLI show it: the JSON columns parsed. */
export interface RequestLogView extends Omit<
  RequestLogRow,
  'error_details' | 'rate_limit' | 'app_id'
> {
  error_details: unknown;
  rate_limit: { limit: number; remaining: number; reset: number } | null;
}

function view(row: RequestLogRow): RequestLogView {
  const { app_id: _, error_details, rate_limit, ...rest } = row;
  return {
    ...rest,
    error_details: error_details ? (JSON.parse(error_details) as unknown) : null,
    rate_limit: rate_limit ? (JSON.parse(rate_limit) as RequestLogView['rate_limit']) : null,
  };
}

/**
 * A body as kept (logged-body.ts): its text, redacted; its whole size in bytes; and whether the
 * text is only its first 8 KB (then it is not whole JSON).
 */
export interface BodyView {
  text: string;
  size: number;
  cut: boolean;
}

/** One logged request with its bodies (the portal's request page, `admin app logs --id`). */
export interface RequestLogDetailView extends RequestLogView {
  request_body: BodyView | null;
  response_body: BodyView | null;
}

function bodyView(text: string | null, size: number | null): BodyView | null {
  if (text === null || size === null) return null;
  return { text, size, cut: size > BODY_CAP_BYTES };
}

function detailView(row: RequestLogDetail): RequestLogDetailView {
  const { request_body, request_body_size, response_body, response_body_size, ...rest } = row;
  return {
    ...view(rest),
    request_body: bodyView(request_body, request_body_size),
    response_body: bodyView(response_body, response_body_size),
  };
}

export interface LogPage {
  environment: Environment;
  items: RequestLogView[];
  next_cursor: string | null;
  /** Requests not logged because the buffer was full. */
  dropped: { dropped: number; last_dropped_at: string } | null;
}

export class RequestLogsService {
  constructor(
    private readonly logs: RequestLogsRepository,
    /** The buffer's writes: a connection outside the request pool where there is one. */
    private readonly writer: RequestLogsRepository = logs,
  ) {}

  async list(appId: string, query: LogQuery): Promise<LogPage> {
    const environment = query.env ?? 'sandbox';
    if (environment !== 'sandbox' && environment !== 'live')
      throw ValidationError.say('/env', 'Choose the sandbox or live environment.');
    const filter: RequestLogFilter = { appId, environment };
    if (query.status) {
      if (!Object.hasOwn(STATUS_FILTERS, query.status))
        throw ValidationError.say(
          '/status',
          'Choose a status: 2xx, 3xx, 4xx, 4xx-not-429, 429 or 5xx.',
        );
      filter.status = STATUS_FILTERS[query.status as keyof typeof STATUS_FILTERS];
    }
    if (query.hour) {
      const match = HOUR.exec(query.hour);
      const start = match ? Date.parse(`${match[1]}:00:00Z`) : NaN;
      const period = periodFrom(start, 3_600_000);
      if (!period)
        throw ValidationError.say('/hour', 'An hour is written 2026-11-26T20:00Z (UTC).');
      Object.assign(filter, period);
    } else if (query.day) {
      const start = DAY.test(query.day) ? Date.parse(`${query.day}T00:00:00Z`) : NaN;
      const period = periodFrom(start, 86_400_000);
      if (!period) throw ValidationError.say('/day', 'A day is written 2026-11-26 (UTC).');
      Object.assign(filter, period);
    }
    if (query.method) {
      const method = query.method.toUpperCase();
      if (!METHODS.includes(method))
        throw ValidationError.say('/method', `Choose a method: ${METHODS.join(', ')}.`);
      filter.method = method;
    }
    if (query.path) {
      if (!query.path.startsWith('/') || query.path.length > 200)
        throw ValidationError.say(
          '/path',
          'A path prefix starts with / (for example /api/v1/listings).',
        );
      filter.pathPrefix = query.path;
    }
    if (query.credential) {
      if (query.credential === OAUTH_CREDENTIAL) filter.oauthOnly = true;
      else if (UUID.test(query.credential)) filter.keyId = query.credential;
      else
        throw ValidationError.say('/credential', "Choose one of the app's keys, or OAuth tokens.");
    }
    const limit = query.limit ?? 25;
    if (!Number.isInteger(limit) || limit < 1 || limit > 100)
      throw ValidationError.say('/limit', 'The limit is a whole number from 1 to 100.');
    let cursor: { createdAt: string; id: string } | undefined;
    if (query.cursor) {
      const [createdAt, id] = query.cursor.split('_');
      if (!isTimestamp(createdAt) || !id || !UUID.test(id))
        throw ValidationError.say(
          '/cursor',
          'That page link is broken; start again from the newest requests.',
        );
      cursor = { createdAt, id };
    }
    const rows = await this.logs.page(filter, limit, cursor);
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return {
      environment,
      items: items.map(view),
      next_cursor: rows.length > limit && last ? `${last.created_at}_${last.id}` : null,
      dropped: (await this.logs.drops(appId, environment)) ?? null,
    };
  }

  /**
   * The app's usage in one environment (the Overview's chart, `admin app usage`): `days` 1 is
   * the last 24 hours per hour; 2-14, as many UTC days per day (today included). From the
   * rollup, never the log itself.
   */
  async usage(
    appId: string,
    query: { env?: string | undefined; days?: number | undefined },
    now = new Date(),
  ): Promise<UsageReport> {
    const environment = query.env ?? 'sandbox';
    if (environment !== 'sandbox' && environment !== 'live')
      throw ValidationError.say('/env', 'Choose the sandbox or live environment.');
    const days = query.days ?? 1;
    if (!Number.isInteger(days) || days < 1 || days > MAX_USAGE_DAYS)
      throw ValidationError.say(
        '/days',
        `The days are a whole number from 1 (the last 24 hours) to ${MAX_USAGE_DAYS}.`,
      );
    const [unit, count] = days === 1 ? (['hour', 24] as const) : (['day', days] as const);
    const { from } = periodOf(unit, count, now);
    return report(environment, unit, count, await this.logs.usage(appId, environment, from), now);
  }

  /** The buffer requests are recorded into (request-logs-plugin.ts builds one per process). */
  buffer(options: BufferOptions): RequestLogBuffer {
    return new RequestLogBuffer(this.writer, options);
  }

  /**
   * Deletes the rollup's hours past the log's 14 days; returns how many went. (The log itself is
   * kept by dropping its partitions: REQUEST_LOG_PARTITIONS, src/plugins/partitions.ts. The
   * rollup is a few rows an app and hour, too few to partition.)
   */
  prune(): Promise<number> {
    return this.logs.pruneUsage();
  }

  /**
   * The rollup's retention: prunes now and then every hour, until the returned stop is called.
   * A failed delete is reported and tried again the next hour.
   */
  keepPruning(onFailure: (err: unknown) => void): () => void {
    const prune = () => this.prune().catch(onFailure);
    void prune();
    const timer = setInterval(() => void prune(), PRUNE_EVERY_MS);
    timer.unref();
    return () => clearInterval(timer);
  }

  async get(appId: string, id: string): Promise<RequestLogDetailView> {
    const row = UUID.test(id) ? await this.logs.find(appId, id) : undefined;
    if (!row) throw new NotFoundError(`No logged request with id ${id}.`);
    return detailView(row);
  }
}
