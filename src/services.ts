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
import { compileBodyValidator } from './plugins/validation.ts';

export interface Services {
  users: UsersService;
  apps: AppsService;
  keys: KeysService;
  listings: ListingsService;
  /** Where listing changes are announced, inside their transaction (webhooks subscribe). */
  listingChanges: ListingChanges;
}

const validateListingCreate = compileBodyValidator(ListingCreate);

function validateBatchItem(item: unknown): ValidationError | null {
  const details = validateListingCreate(item);
  if (!details) return null;
  return new ValidationError(`Invalid item: ${details.map((d) => `${d.path} ${d.message}`).join('; ')}`, details);
}

export function createServices(db: Db): Services {
  const usersRepository = new UsersRepository(db);
  const appsRepository = new AppsRepository(db);
  const apps = new AppsService(appsRepository, usersRepository);
  const listingChanges = new ListingChanges();
  return {
    users: new UsersService(usersRepository),
    apps,
    keys: new KeysService(appsRepository, apps),
    listings: new ListingsService(new ListingsRepository(db), apps, listingChanges, validateBatchItem),
    listingChanges,
  };
}
