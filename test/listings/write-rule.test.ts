/**
 * The state machine (src/listings/state-machine.ts) is where a status rule is written; the
 * UPDATE that PATCH, an upsert and DELETE run carries the same rules as its condition
 * (listings-repository.ts writeRule), so that it needs no locking read first. This checks the
 * two the same for every transition: each stored status with and without each kind of photo,
 * under every write (status omitted, draft or active; cover and images left, cleared or set;
 * and DELETE's archive). A write the condition lets through is one the state machine allows,
 * and the other way round (OpenAPI "Listings, money and photos").
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows, sqlArray } from '../../src/db/rows.ts';
import type { ListingStatus } from '../../src/generated/schemas.ts';
import { writeRule, type ListingWrite } from '../../src/listings/listings-repository.ts';
import * as states from '../../src/listings/state-machine.ts';
import { listingsApp, PHOTO } from './support.ts';

const app = await listingsApp(t);
const [seller] = await queryRows<{ id: string }>(
  app.db,
  sql`insert into users (username, display_name, password_hash)
      values ('rule_seller', 'Rules', 'not-a-hash') returning id`,
);

interface Stored {
  id: string;
  status: ListingStatus;
  cover_image_url: string | null;
  image_urls: string[];
}

const rows: Stored[] = [];
for (const status of ['draft', 'active', 'archived'] as const)
  for (const cover of [null, PHOTO])
    for (const images of [[], [PHOTO]]) {
      const [row] = await queryRows<Stored>(
        app.db,
        sql`insert into listings (seller_id, environment, status, title, price_cents,
              cover_image_url, image_urls, published_at)
            values (${seller!.id}, 'sandbox', ${status}, 'Rule', 100, ${cover},
              ${sqlArray(images, 'text')}, clock_timestamp())
            returning id, status, cover_image_url, image_urls`,
      );
      rows.push(row!);
    }

/** Whether the state machine allows `write` on `row` (states.update, or states.archive). */
function allowed(row: Stored, write: ListingWrite): boolean {
  if (write.status === 'archived') return states.archive(row.status).event !== null;
  try {
    states.update(row.status, write.status, {
      coverImageUrl:
        write.cover_image_url !== undefined ? write.cover_image_url : row.cover_image_url,
      imageUrls: write.image_urls ?? row.image_urls,
    });
    return true;
  } catch {
    return false;
  }
}

const writes: ListingWrite[] = [{ status: 'archived' }];
for (const status of [undefined, 'draft', 'active'] as const)
  for (const cover of [undefined, null, PHOTO])
    for (const images of [undefined, [], [PHOTO]]) {
      const write: ListingWrite = {};
      if (status !== undefined) write.status = status;
      if (cover !== undefined) write.cover_image_url = cover;
      if (images !== undefined) write.image_urls = images;
      writes.push(write);
    }

t.test(
  'the UPDATE writes exactly where the state machine allows, for every transition',
  async (t) => {
    const ids = rows.map((row) => row.id);
    let transitions = 0;
    for (const write of writes) {
      const passed = await queryRows<{ id: string }>(
        app.db,
        sql`select l.id from listings l where l.id = any(${sqlArray(ids, 'uuid')}) and ${writeRule(write)}`,
      );
      const through = new Set(passed.map((row) => row.id));
      for (const row of rows) {
        transitions += 1;
        const photos = `cover ${row.cover_image_url ? 'set' : 'none'}, ${row.image_urls.length} image(s)`;
        t.equal(
          through.has(row.id),
          allowed(row, write),
          `${row.status} (${photos}) under ${JSON.stringify(write)}`,
        );
      }
    }
    t.equal(transitions, 12 * 28, 'every stored state under every write');
  },
);
