/**
 * The typed client: openapi-fetch over the types generated from openapi/openapi.yaml, plus a
 * thin layer of helpers that unwrap the envelope's answer or throw a MarketplaceApiError.
 *
 *   const api = createMarketplaceClient({ baseUrl: 'http://127.0.0.1:3000', auth: apiKeyAuth(key)
 * });
 *   const { data } = await api.listings.create({ title: 'Denim jacket', price_dollars: 49.5 }, {
 * idempotencyKey: 'jacket-42' });
 *   for await (const listing of api.listings.iterate({ limit: 50 })) console.log(listing.title);
 *   const search: ListListingsQuery = { q: 'denim jacket', tag: ['vintage'], sort: 'price_asc' };
 *   for await (const hit of api.listings.iterate(search)) console.log(hit.price_cents);
 *
 * Every operation of the document is reachable, fully typed, through `api.raw` (openapi-fetch:
 * `api.raw.GET('/api/v1/listings/{id}', { params: { path: { id } } })`), including the OAuth
 * endpoints; the helpers cover the REST resources.
 */
import createFetchClient, { type Client, type Middleware } from 'openapi-fetch';
import type { paths } from './generated/openapi-types.js';
import { errorFromResponse } from './errors.js';
import { paginateItems, paginatePages } from './pagination.js';
import type {
  BatchResponse,
  Event,
  EventListResponse,
  HealthResponse,
  Listing,
  ListingCreate,
  ListingListResponse,
  ListingResponse,
  ListingUpdate,
  ListEventsQuery,
  ListListingsQuery,
  ListSavedSearchesQuery,
  ListWebhookEndpointsQuery,
  PrivateProfileResponse,
  ProfileResponse,
  SavedSearch,
  SavedSearchCreate,
  SavedSearchListResponse,
  SavedSearchResponse,
  TestEventCreate,
  TestEventCreatedResponse,
  WebhookEndpoint,
  WebhookEndpointCreate,
  WebhookEndpointCreatedResponse,
  WebhookEndpointListResponse,
  WebhookEndpointResponse,
  WebhookEndpointUpdate,
} from './types.js';

export interface MarketplaceClientOptions {
  /**
   * The host the API is served from, without a path (`https://api.example.com`, by default
   * `http://127.0.0.1:3000`): the document's paths are absolute from the host.
   */
  baseUrl: string;
  /** apiKeyAuth(key) or oauthTokenAuth(token); omit for anonymous public reads. */
  auth?: Middleware;
  /** Sent on every request (for example a User-Agent naming your integration). */
  headers?: Record<string, string>;
  /** A fetch to use instead of globalThis.fetch (tests, proxies, retries). */
  fetch?: (request: Request) => Promise<Response>;
  /** More openapi-fetch middleware, run after `auth` (logging, metrics). */
  middleware?: Middleware[];
}

export interface CreateListingOptions {
  /**
   * Sent as `Idempotency-Key` and stored as the listing's `external_id`: sending the same key
   * again (a retry after a timeout) updates that listing instead of creating a second one.
   */
  idempotencyKey?: string;
}

/**
 * A create's answer: 201 created, or 200 when the external_id / Idempotency-Key existed (upsert).
 */
export type CreatedListing = ListingResponse & { created: boolean };

/** The shape of every openapi-fetch answer: `data` on 2xx, `error` (the parsed body) otherwise. */
interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** The data of a 2xx answer, or the typed error of any other. */
async function unwrap<T>(pending: Answer<T> | Promise<Answer<T>>): Promise<Exclude<T, undefined>> {
  const { data, error, response } = await pending;
  if (!response.ok) throw errorFromResponse(response, error);
  return data as Exclude<T, undefined>;
}

export function createMarketplaceClient(options: MarketplaceClientOptions) {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  if (/^https?:\/\/[^/]+\/./.test(`${baseUrl}/`) && new URL(baseUrl).pathname !== '/') {
    throw new TypeError(
      'baseUrl is the host only (the paths start with /api/v1): drop the path from it.',
    );
  }
  const raw: Client<paths> = createFetchClient<paths>({
    baseUrl,
    ...(options.headers ? { headers: options.headers } : {}),
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  if (options.auth) raw.use(options.auth);
  for (const middleware of options.middleware ?? []) raw.use(middleware);

  const listPage = (query: ListListingsQuery = {}): Promise<ListingListResponse> =>
    unwrap(raw.GET('/api/v1/listings', { params: { query } }));
  const eventsPage = (query: ListEventsQuery = {}): Promise<EventListResponse> =>
    unwrap(raw.GET('/api/v1/events', { params: { query } }));
  const endpointsPage = (
    query: ListWebhookEndpointsQuery = {},
  ): Promise<WebhookEndpointListResponse> =>
    unwrap(raw.GET('/api/v1/webhook_endpoints', { params: { query } }));
  const savedSearchesPage = (
    query: ListSavedSearchesQuery = {},
  ): Promise<SavedSearchListResponse> =>
    unwrap(raw.GET('/api/v1/saved_searches', { params: { query } }));

  return {
    /** openapi-fetch on the whole document: every path and method, typed. */
    raw,

    /** GET /api/v1/health (`db: true` also checks the database). */
    health: (query: { db?: boolean } = {}): Promise<HealthResponse> =>
      unwrap(raw.GET('/api/v1/health', { params: { query: query.db ? { db: '1' } : {} } })),

    /** GET /api/v1/me: the profile of the user the credential acts for. */
    me: (): Promise<PrivateProfileResponse> => unwrap(raw.GET('/api/v1/me')),

    profiles: {
      /** GET /api/v1/profiles/{username}. */
      get: (username: string): Promise<ProfileResponse> =>
        unwrap(raw.GET('/api/v1/profiles/{username}', { params: { path: { username } } })),
    },

    listings: {
      /**
       * One page of GET /api/v1/listings: the feed the credential sees, or a search of it with
       * the document's parameters (`q`, filters, `sort`, `seller: 'me'`, `updated_since`; see
       * "Search and sync"). Repeatable filters are arrays, sent repeated:
       * `{ tag: ['denim', 'vintage'] }` is `tag=denim&tag=vintage`.
       */
      list: listPage,
      /**
       * Every page, following `meta.next_cursor` until it is null; each request repeats the
       * same query, as a search's opaque cursor requires.
       */
      pages: (
        query: ListListingsQuery = {},
      ): AsyncGenerator<ListingListResponse, void, undefined> => paginatePages(listPage, query),
      /**
       * Every listing of the feed or search, in its order (newest first unless `sort` says
       * otherwise), fetching pages as the loop goes.
       */
      iterate: (query: ListListingsQuery = {}): AsyncGenerator<Listing, void, undefined> =>
        paginateItems(listPage, query),
      /** GET /api/v1/listings/{id}. */
      get: (id: string): Promise<ListingResponse> =>
        unwrap(raw.GET('/api/v1/listings/{id}', { params: { path: { id } } })),
      /**
       * POST /api/v1/listings: creates (201) or, for a known external_id / Idempotency-Key, upserts
       * (200).
       */
      create: async (
        body: ListingCreate,
        createOptions: CreateListingOptions = {},
      ): Promise<CreatedListing> => {
        const header =
          createOptions.idempotencyKey === undefined
            ? {}
            : { 'Idempotency-Key': createOptions.idempotencyKey };
        const result = await raw.POST('/api/v1/listings', { params: { header }, body });
        const data = await unwrap(result);
        return { ...data, created: result.response.status === 201 };
      },
      /**
       * POST /api/v1/listings/batch (1-25 items, each on its own). Returns the per-item results
       * both when some succeeded (200) and when all failed (422); throws for a rejected request.
       */
      batch: async (items: ListingCreate[]): Promise<BatchResponse> => {
        const result = await raw.POST('/api/v1/listings/batch', { body: { items } });
        if (result.response.status === 422) return result.error as BatchResponse;
        return unwrap(result);
      },
      /** PATCH /api/v1/listings/{id}: only the fields sent change. */
      update: (id: string, body: ListingUpdate): Promise<ListingResponse> =>
        unwrap(raw.PATCH('/api/v1/listings/{id}', { params: { path: { id } }, body })),
      /**
       * DELETE /api/v1/listings/{id}: archives (terminal); archiving again returns it unchanged.
       */
      archive: (id: string): Promise<ListingResponse> =>
        unwrap(raw.DELETE('/api/v1/listings/{id}', { params: { path: { id } } })),
    },

    events: {
      /** One page of GET /api/v1/events (the app's events of the last 30 days). */
      list: eventsPage,
      pages: (query: ListEventsQuery = {}): AsyncGenerator<EventListResponse, void, undefined> =>
        paginatePages(eventsPage, query),
      iterate: (query: ListEventsQuery = {}): AsyncGenerator<Event, void, undefined> =>
        paginateItems(eventsPage, query),
      /**
       * POST /api/v1/events/test (201, sandbox keys with webhooks:write): a test event of `type`,
       * marked `data.test: true`, to the app's endpoints that enabled it (or only `endpoint_id`).
       */
      sendTest: (body: TestEventCreate): Promise<TestEventCreatedResponse> =>
        unwrap(raw.POST('/api/v1/events/test', { body })),
    },

    /**
     * The app's webhook endpoints in the API key's environment (an API key with the scope
     * webhooks:write; an OAuth token is refused with 403).
     */
    webhookEndpoints: {
      /**
       * POST /api/v1/webhook_endpoints (201): the endpoint and its signing secret `data.secret`,
       * shown only in this answer. `enabled_events` defaults to `['*']` (every type).
       */
      create: (body: WebhookEndpointCreate): Promise<WebhookEndpointCreatedResponse> =>
        unwrap(raw.POST('/api/v1/webhook_endpoints', { body })),
      /** One page of GET /api/v1/webhook_endpoints, newest first. */
      list: endpointsPage,
      pages: (
        query: ListWebhookEndpointsQuery = {},
      ): AsyncGenerator<WebhookEndpointListResponse, void, undefined> =>
        paginatePages(endpointsPage, query),
      iterate: (
        query: ListWebhookEndpointsQuery = {},
      ): AsyncGenerator<WebhookEndpoint, void, undefined> => paginateItems(endpointsPage, query),
      /** GET /api/v1/webhook_endpoints/{id} (never the secret). */
      get: (id: string): Promise<WebhookEndpointResponse> =>
        unwrap(raw.GET('/api/v1/webhook_endpoints/{id}', { params: { path: { id } } })),
      /**
       * PATCH /api/v1/webhook_endpoints/{id}: `url`, `enabled_events`, or `disabled` (false
       * re-enables after a check ping the endpoint must answer 2xx, else 409).
       */
      update: (id: string, body: WebhookEndpointUpdate): Promise<WebhookEndpointResponse> =>
        unwrap(raw.PATCH('/api/v1/webhook_endpoints/{id}', { params: { path: { id } }, body })),
      /** DELETE /api/v1/webhook_endpoints/{id} (204): nothing is sent to it any more. */
      delete: async (id: string): Promise<void> => {
        await unwrap(raw.DELETE('/api/v1/webhook_endpoints/{id}', { params: { path: { id } } }));
      },
    },
    /**
     * Saved searches (scope `searches`): each new match of one is a `listing.matched` event.
     * A key sees its app's in its environment; an OAuth token only those made through its user's
     * tokens.
     */
    savedSearches: {
      /** POST /api/v1/saved_searches: `q` and the filters of `GET /api/v1/listings`, named. */
      create: (body: SavedSearchCreate): Promise<SavedSearchResponse> =>
        unwrap(raw.POST('/api/v1/saved_searches', { body })),
      /** One page of GET /api/v1/saved_searches, newest first. */
      list: savedSearchesPage,
      pages: (
        query: ListSavedSearchesQuery = {},
      ): AsyncGenerator<SavedSearchListResponse, void, undefined> =>
        paginatePages(savedSearchesPage, query),
      /** Every saved search the credential sees, newest first, fetching pages as the loop goes. */
      iterate: (query: ListSavedSearchesQuery = {}): AsyncGenerator<SavedSearch, void, undefined> =>
        paginateItems(savedSearchesPage, query),
      /** GET /api/v1/saved_searches/{id}. */
      get: (id: string): Promise<SavedSearchResponse> =>
        unwrap(raw.GET('/api/v1/saved_searches/{id}', { params: { path: { id } } })),
      /** DELETE /api/v1/saved_searches/{id} (204): its matches stop; its past events stay. */
      delete: async (id: string): Promise<void> => {
        await unwrap(raw.DELETE('/api/v1/saved_searches/{id}', { params: { path: { id } } }));
      },
    },
  };
}

export type MarketplaceClient = ReturnType<typeof createMarketplaceClient>;
