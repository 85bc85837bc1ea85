/**
 * The services every door uses: HTTP routes, the admin CLI and (later) the portal pages.
 * Built once per database; no door holds a rule of its own.
 */
import { UsersRepository } from './accounts/users-repository.ts';
import { UsersService } from './accounts/users-service.ts';
import { AppsRepository } from './apps/apps-repository.ts';
import { AppsService } from './apps/apps-service.ts';
import { KeysService } from './apps/keys-service.ts';
import type { Db } from './db/client.ts';
import { ValidationError } from './errors.ts';
import { ListingCreate } from './generated/schemas.ts';
import { ListingChanges } from './listings/listing-changes.ts';
import { ListingsRepository } from './listings/listings-repository.ts';
import { ListingsService } from './listings/listings-service.ts';
import { OAuthRepository } from './oauth/oauth-repository.ts';
import { OAuthService } from './oauth/oauth-service.ts';
import { compileBodyValidator } from './plugins/validation.ts';
import { DeliveriesRepository } from './webhooks/deliveries-repository.ts';
import { EndpointsRepository } from './webhooks/endpoints-repository.ts';
import { EndpointsService, type WebhookOptions } from './webhooks/endpoints-service.ts';
import { EventsRecorder } from './webhooks/events-recorder.ts';
import { EventsRepository } from './webhooks/events-repository.ts';
import { EventsService } from './webhooks/events-service.ts';

export interface Services {
  users: UsersService;
  apps: AppsService;
  keys: KeysService;
  listings: ListingsService;
  /** Where listing changes are announced, inside their transaction (webhooks subscribe). */
  listingChanges: ListingChanges;
  /** OAuth 2.0 clients, grants, codes and tokens. */
  oauth: OAuthService;
  /** Webhook endpoints, pings, deliveries (admin CLI, portal). */
  webhooks: EndpointsService;
  /** GET /api/v1/events. */
  events: EventsService;
  /** Records events in the outbox; subscribed to listingChanges here, so every door records them. */
  eventRecorder: EventsRecorder;
}

export interface ServicesOptions {
  /** From WEBHOOK_ALLOW_PRIVATE_NETWORKS; refused (false) unless said otherwise. */
  webhooks?: WebhookOptions;
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

export function createServices(db: Db, options: ServicesOptions = {}): Services {
  const usersRepository = new UsersRepository(db);
  const appsRepository = new AppsRepository(db);
  const apps = new AppsService(appsRepository, usersRepository);
  const listingChanges = new ListingChanges();
  const eventsRepository = new EventsRepository(db);
  const eventRecorder = new EventsRecorder(eventsRepository);
  listingChanges.subscribeAll(
    (tx, changes) => eventRecorder.recordListingChanges(tx, changes),
    (change, source) => eventRecorder.recordListingChangesInStatement(change, source),
  );
  const webhookOptions = options.webhooks ?? { allowPrivateNetworks: false };
  return {
    users: new UsersService(usersRepository),
    apps,
    keys: new KeysService(appsRepository, apps),
    listings: new ListingsService(
      new ListingsRepository(db),
      apps,
      listingChanges,
      validateBatchItem,
    ),
    listingChanges,
    oauth: new OAuthService(new OAuthRepository(db), appsRepository, usersRepository),
    webhooks: new EndpointsService(
      new EndpointsRepository(db),
      new DeliveriesRepository(db),
      eventRecorder,
      apps,
      webhookOptions,
    ),
    events: new EventsService(eventsRepository),
    eventRecorder,
  };
}
