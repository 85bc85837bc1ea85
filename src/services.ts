/**
 * The composition root: the services every door uses (the API routes, the portal and OAuth
 * pages, the admin CLI), built once per database over their repositories. No door builds a
 * service or a repository of its own, and none holds a rule of its own.
 */
import { UsersRepository } from './accounts/users-repository.ts';
import { UsersService } from './accounts/users-service.ts';
import {
  AppsRepository,
  completeSandboxMilestone,
  type ActiveKey,
} from './apps/apps-repository.ts';
import { AppsService } from './apps/apps-service.ts';
import { AuditRepository } from './audit/audit-repository.ts';
import { AuditService } from './audit/audit-service.ts';
import { HeldCredentials, KeyCache } from './apps/key-cache.ts';
import { KeysService } from './apps/keys-service.ts';
import type { Db, RequestLogDatabase } from './db/client.ts';
import { ReadRouting, type Replica } from './db/replica.ts';
import { ValidationError } from './errors.ts';
import { ListingCreate } from './generated/schemas.ts';
import { ListingChanges } from './listings/listing-changes.ts';
import { ListingsRepository } from './listings/listings-repository.ts';
import { ListingsBatchService } from './listings/listings-batch-service.ts';
import { ListingsReadService, type ListingReadSource } from './listings/listings-read-service.ts';
import { ListingsSearchRepository } from './listings/listings-search-repository.ts';
import type { SearchLimits } from './listings/search-statement.ts';
import { ListingWritesService } from './listings/listing-writes-service.ts';
import { OAuthRepository, type LiveAccessToken } from './oauth/oauth-repository.ts';
import { OAuthService } from './oauth/oauth-service.ts';
import { SavedSearchesRepository } from './saved-searches/saved-searches-repository.ts';
import { SavedSearchesService } from './saved-searches/saved-searches-service.ts';
import {
  enqueueMatches,
  Matcher,
  type MatcherOptions,
  type MatchPass,
} from './saved-searches/matcher-worker.ts';
import { compileBodyValidator } from './lib/validator.ts';
import { ResilientStore } from './lib/rate-limit-store.ts';
import { WakeUps } from './lib/wake-ups.ts';
import {
  DEFAULT_THROTTLE_LIMITS,
  LoginThrottle,
  type ThrottleLimits,
} from './web/login-throttle.ts';
import { SessionsRepository } from './web/sessions-repository.ts';
import { SessionsService } from './web/sessions-service.ts';
import { DeliveryWorker, type WorkerOptions } from './webhooks/delivery-worker.ts';
import { DeliveriesRepository } from './webhooks/deliveries-repository.ts';
import { EndpointsRepository } from './webhooks/endpoints-repository.ts';
import { EndpointsService, type WebhookOptions } from './webhooks/endpoints-service.ts';
import { EventsRecorder } from './webhooks/events-recorder-service.ts';
import { EventsRepository } from './events/events-repository.ts';
import { OUTBOX_PARTITIONS } from './events/outbox-partitions.ts';
import { auditPartitions } from './audit/audit-partitions.ts';
import { EventsService } from './events/events-service.ts';
import { DEFAULT_WAIT_LIMITS, EventWaiters, type WaitLimits } from './events/event-waiters.ts';
import {
  REQUEST_LOG_PARTITIONS,
  RequestLogsRepository,
} from './request-logs/request-logs-repository.ts';
import type { PartitionedDatabase } from './db/partitions.ts';
import { UnitOfWork } from './db/unit-of-work.ts';
import { RequestLogsService } from './request-logs/request-logs-service.ts';

export interface Services {
  /** The API keys and access tokens held between requests (src/apps/key-cache.ts). */
  heldCredentials: HeldCredentials;
  users: UsersService;
  apps: AppsService;
  /** The audit log of each app: its one recorder and reader (src/audit/audit-service.ts). */
  audit: AuditService;
  keys: KeysService;
  /** Listing writes (create, upsert, update, archive). */
  listingWrites: ListingWritesService;
  /** POST /listings/batch: items as single writes, each on its own. */
  listingBatches: ListingsBatchService;
  /** Listing reads: the feed and its searches, one listing, the portal's inventory. */
  listingReads: ListingsReadService;
  /** OAuth 2.0 clients, grants, codes and tokens. */
  oauth: OAuthService;
  /** Webhook endpoints, pings, deliveries (admin CLI, portal, /api/v1/webhook_endpoints). */
  endpoints: EndpointsService;
  /** Saved searches (the API's /saved_searches, the portal, the CLI). */
  savedSearches: SavedSearchesService;
  /** GET /api/v1/events. */
  events: EventsService;
  /** The request log's pages and `admin app logs` (recorded by request-logs-plugin.ts). */
  requestLogs: RequestLogsService;
  /**
   * Records events in the outbox; one of the listing writes' recordings (listingRecordings), so
   * every door records them.
   */
  eventRecorder: EventsRecorder;
  /**
   * "Something is due, look now" for the delivery worker and the matcher, which listen in their
   * plugins (src/lib/wake-ups.ts).
   */
  wakeUps: WakeUps;
  /** Browser sessions of the portal and OAuth pages. */
  sessions: SessionsService;
  /** Failed sign-in counters (the OpenAPI document's "Sign-in limits"). */
  signInThrottle: LoginThrottle;
  /** Delivers the outbox's webhooks; null unless options.delivery asks for one (the server). */
  deliveryWorker: DeliveryWorker | null;
  /**
   * Matches listing writes against the saved searches; null unless options.matching asks for
   * one (SAVED_SEARCH_MATCHER, the server), whether or not there is a delivery worker.
   */
  matcher: Matcher | null;
  /**
   * The tables partitioned by time, per database (the primary's, and the request log's own when
   * there is one), kept by src/plugins/partitions.ts.
   */
  partitioned: PartitionedDatabase[];
}

export interface ServicesOptions {
  /** From WEBHOOK_ALLOW_PRIVATE_NETWORKS; refused (false) unless said otherwise. */
  webhooks?: WebhookOptions;
  /** Where failed sign-ins are counted, and their limits; memory and defaults unless given. */
  signIn?: { store?: ResilientStore; limits?: Partial<ThrottleLimits> };
  /** A delivery worker to build (WEBHOOK_WORKER); none when absent (the CLI, the bench seed). */
  delivery?: WorkerOptions;
  /** A saved searches' matcher to build (SAVED_SEARCH_MATCHER); none when absent (the CLI). */
  matching?: Pick<MatcherOptions, 'pollIntervalMs' | 'log'>;
  /** SEARCH_TIMEOUT_MS and SYNC_SETTLE_MS; the defaults unless given. */
  search?: Partial<SearchLimits>;
  /** Where the request log's batches are written (DatabaseHandle.backgroundDb); `db` if absent. */
  backgroundDb?: Db | undefined;
  /**
   * REQUEST_LOG_DATABASE_URL (DatabaseHandle.requestLog): the log's rows and drop counts there,
   * the usage rollup and the keys and users the rows name on `db`. Absent: all on `db`.
   */
  requestLogDb?: RequestLogDatabase | undefined;
  /** Where searches run on the primary (DatabaseHandle.searchDb); `db` if absent. */
  searchDb?: Db | undefined;
  /** EVENTS_WAIT_MAX and the _PER_CREDENTIAL, _USER, _APP, _OWNER caps; defaults unless given. */
  eventWaits?: WaitLimits;
  /** DATABASE_REPLICA_URL: where listing reads that may be behind go (src/db/replica.ts). */
  replica?: Replica | null;
  /** Told of every pass of the saved searches' matcher (the metrics). */
  onMatchPass?: ((pass: MatchPass) => void) | undefined;
  /** AUDIT_RETENTION_DAYS: how long the audit log's partitions are kept; 400 unless given. */
  auditRetentionDays?: number;
}

const validateListingCreate = compileBodyValidator(ListingCreate);

function validateBatchItem(item: unknown): ValidationError | null {
  const details = validateListingCreate(item);
  if (!details) return null;
  return new ValidationError(
    `Invalid item: ${details.map((d) => `${d.path} ${d.message}`).join('; ')}`,
    details,
  );
}

/** Listing reads on the primary, and on the replica (when there is one) for those that may lag. */
function listingReadRouting(
  db: Db,
  listings: ListingsRepository,
  options: ServicesOptions,
): ReadRouting<ListingReadSource> {
  const search = new ListingsSearchRepository(options.searchDb ?? db, options.search);
  const primary = { listings, search };
  const replica = options.replica;
  if (!replica) return new ReadRouting(primary);
  return new ReadRouting(primary, {
    replica,
    source: {
      listings: new ListingsRepository(replica.db),
      search: new ListingsSearchRepository(replica.db, options.search),
    },
  });
}

/**
 * What each listing write's statement records with it (src/listings/listing-changes.ts): the
 * outbox's events and deliveries (the delivery worker's work), the saved searches' match queue
 * (the matcher's), the sandbox milestone. Also what scripts/sql-snapshots.ts renders the write
 * statements with.
 */
export function listingRecordings(eventRecorder: EventsRecorder): ListingChanges {
  return new ListingChanges([
    (changed) => eventRecorder.recordListingChanges(changed),
    enqueueMatches,
    completeSandboxMilestone,
  ]);
}

export function createServices(database: Db, options: ServicesOptions = {}): Services {
  // Every repository's statements join the unit of work running, if any (an audited change).
  const unit = new UnitOfWork(database);
  const db = unit.db;
  const usersRepository = new UsersRepository(db);
  const appsRepository = new AppsRepository(db);
  const heldKeys = new KeyCache<ActiveKey>();
  const heldTokens = new KeyCache<LiveAccessToken>();
  const heldCredentials = new HeldCredentials([heldKeys, heldTokens]);
  // Deleting an app stops its keys and its access tokens.
  const apps = new AppsService(appsRepository, usersRepository, heldCredentials);
  const eventsRepository = new EventsRepository(db);
  const wakeUps = new WakeUps();
  const eventRecorder = new EventsRecorder(eventsRepository, wakeUps);
  // Every listing write is matched against the saved searches after it commits (matcher-worker.ts).
  const matcher = options.matching
    ? new Matcher(db, eventsRepository, {
        ...options.matching,
        onPass: (pass) => {
          if (pass.matched > 0) wakeUps.now('deliveries');
          options.onMatchPass?.(pass);
        },
      })
    : null;
  const listingChanges = listingRecordings(eventRecorder);
  const listingsRepository = new ListingsRepository(db);
  const listingWrites = new ListingWritesService(listingsRepository, listingChanges, wakeUps);
  const webhookOptions = options.webhooks ?? { allowPrivateNetworks: false };
  const logDb = options.requestLogDb;
  return {
    heldCredentials,
    users: new UsersService(usersRepository),
    apps,
    audit: new AuditService(new AuditRepository(db), unit),
    keys: new KeysService(appsRepository, apps, heldKeys),
    listingWrites,
    listingBatches: new ListingsBatchService(listingsRepository, listingWrites, validateBatchItem),
    listingReads: new ListingsReadService(listingReadRouting(db, listingsRepository, options)),
    oauth: new OAuthService(new OAuthRepository(db), appsRepository, usersRepository, heldTokens),
    endpoints: new EndpointsService(
      new EndpointsRepository(db),
      new DeliveriesRepository(db),
      eventRecorder,
      apps,
      webhookOptions,
      wakeUps,
    ),
    savedSearches: new SavedSearchesService(new SavedSearchesRepository(db)),
    events: new EventsService(
      eventsRepository,
      new EventWaiters(options.eventWaits ?? DEFAULT_WAIT_LIMITS),
    ),
    requestLogs: new RequestLogsService(
      new RequestLogsRepository(db, logDb?.db),
      new RequestLogsRepository(options.backgroundDb ?? db, logDb?.writerDb),
    ),
    eventRecorder,
    wakeUps,
    sessions: new SessionsService(new SessionsRepository(db)),
    signInThrottle: new LoginThrottle(options.signIn?.store ?? new ResilientStore(null), {
      ...DEFAULT_THROTTLE_LIMITS,
      ...options.signIn?.limits,
    }),
    matcher,
    deliveryWorker: options.delivery
      ? new DeliveryWorker(new DeliveriesRepository(db), options.delivery)
      : null,
    // The primary's request_logs is kept with a log database or without: the rows written there
    // before REQUEST_LOG_DATABASE_URL was set age out with its partitions (docs/operations.md).
    partitioned: [
      {
        database: 'primary',
        db: database,
        tables: [
          REQUEST_LOG_PARTITIONS,
          ...OUTBOX_PARTITIONS,
          auditPartitions(options.auditRetentionDays),
        ],
      },
      ...(logDb
        ? [{ database: 'request_log' as const, db: logDb.db, tables: [REQUEST_LOG_PARTITIONS] }]
        : []),
    ],
  };
}
