/**
 * Reading the request log of an app (the portal's Request logs pages, `admin app logs`): one
 * environment at a time, filtered by status class, method, path prefix and credential, newest
 * first. The filters are checked here, for both doors, in the same words.
 */
import { NotFoundError, ValidationError } from '../errors.ts';
import type { Environment } from '../generated/schemas.ts';
import { RequestLogBuffer, type BufferOptions } from './request-log-buffer.ts';
import type {
  RequestLogFilter,
  RequestLogRow,
  RequestLogsRepository,
} from './request-logs-repository.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const METHODS = ['GET', 'POST', 'PATCH', 'PUT', 'DELETE', 'HEAD', 'OPTIONS'];
/** How often logs past their 14 days are deleted. */
const PRUNE_EVERY_MS = 3_600_000;
/** What `credential` may be besides a key id: requests made with OAuth tokens. */
export const OAUTH_CREDENTIAL = 'oauth';

export interface LogQuery {
  env?: string | undefined;
  /** "2xx", "4xx" or "5xx". */
  status?: string | undefined;
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
      const match = /^([245])xx$/.exec(query.status);
      if (!match) throw ValidationError.say('/status', 'Choose a status class: 2xx, 4xx or 5xx.');
      filter.statusClass = Number(match[1]);
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
      if (!createdAt || !id || !UUID.test(id) || Number.isNaN(Date.parse(createdAt)))
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

  /** The buffer requests are recorded into (plugins/request-logs.ts builds one per process). */
  buffer(options: BufferOptions): RequestLogBuffer {
    return new RequestLogBuffer(this.writer, options);
  }

  /** Deletes every log past the 14 days; returns how many went. */
  async prune(): Promise<number> {
    let deleted = 0;
    for (let batch = await this.logs.prune(); batch > 0; batch = await this.logs.prune())
      deleted += batch;
    return deleted;
  }

  /**
   * The retention: prunes now and then every hour, until the returned stop is called. A failed
   * delete is reported and tried again the next hour.
   */
  keepPruning(onFailure: (err: unknown) => void): () => void {
    const prune = () => this.prune().catch(onFailure);
    void prune();
    const timer = setInterval(() => void prune(), PRUNE_EVERY_MS);
    timer.unref();
    return () => clearInterval(timer);
  }

  async get(appId: string, id: string): Promise<RequestLogView> {
    const row = UUID.test(id) ? await this.logs.find(appId, id) : undefined;
    if (!row) throw new NotFoundError(`No logged request with id ${id}.`);
    return view(row);
  }
}
