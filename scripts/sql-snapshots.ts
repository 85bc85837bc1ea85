/**
 * The text of the large statements, as committed `.sql` snapshots (issue #56): a search page for
 * each sort and each source first (src/listings/search-statement.ts), the saved searches'
 * matching statement (src/saved-searches/matcher-worker.ts), and the listing writes with the
 * CTEs their recordings add, the outbox's among them (src/listings/listings-repository.ts,
 * listing-changes.ts). A change to any of them shows in review as a change of SQL.
 * `npm run sql:snapshots` writes them; `npm run sql:snapshots -- --check` (CI, beside the
 * generation drift check) fails when a committed snapshot differs from what the code builds, or
 * one is missing or left over.
 *
 * Each statement is built by the project's own builders with representative values (no SQL text
 * is copied here) and rendered as it is sent (src/db/rows.ts render): `$1`, `$2`... in the text,
 * and a header saying what each parameter is (a search's named placeholders, `:name`, or a
 * value). Trailing spaces are trimmed; nothing else is changed.
 *
 * They live in sql/snapshots/, not in drizzle/: drizzle/ is drizzle-kit's (the migrations and
 * its own meta/*_snapshot.json of the schema, which it reads and rewrites), and a second kind of
 * snapshot there would be taken for one of its files.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { sql, type SQL } from 'drizzle-orm';
import { Placeholder } from 'drizzle-orm';
import type { Db } from '../src/db/client.ts';
import { render } from '../src/db/rows.ts';
import { ListingsRepository, type NewListing } from '../src/listings/listings-repository.ts';
import {
  DEFAULT_LIMITS,
  searchStatement,
  withPlaceholders,
  type SearchQuery,
} from '../src/listings/search-statement.ts';
import type { SearchSort, SortKey } from '../src/listings/listing-cursor.ts';
import { DEFAULT_PAGE_SIZE } from '../src/listings/listings-read-service.ts';
import { projectFile } from '../src/project-files.ts';
import { matchingStatement } from '../src/saved-searches/matcher-worker.ts';
import { listingRecordings } from '../src/services.ts';
import { EventsRecorder } from '../src/webhooks/events-recorder-service.ts';
import { WakeUps } from '../src/lib/wake-ups.ts';
import { EventsRepository } from '../src/events/events-repository.ts';

const DIR = projectFile('sql', 'snapshots');
const SELLER = '0190a5a0-0000-7000-8000-000000000001';
const APP = '0190a5a0-0000-7000-8000-000000000002';
const LISTING = '0190a5a0-0000-7000-8000-000000000003';

/** A parameter as the header shows it: a placeholder by name, a value as JSON (long ones cut). */
function shown(param: unknown): string {
  if (param instanceof Placeholder) return `:${param.name}`;
  const text = JSON.stringify(param) ?? String(param);
  return text.length > 90 ? `${text.slice(0, 89)}…` : text;
}

function snapshot(title: string, source: string, query: SQL): string {
  const { sql: text, params } = render(query);
  const header = [
    `-- ${title}`,
    `-- Built by ${source}.`,
    '-- Written by scripts/sql-snapshots.ts (npm run sql:snapshots): do not edit; change the',
    '-- builder and run it again. The text as sent; its parameters:',
    ...params.map((param, i) => `--   $${i + 1} = ${shown(param)}`),
  ];
  const body = text
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n');
  return `${header.join('\n')}\n${body};\n`;
}

/** A stand-in database that keeps each statement a repository runs and answers no rows. */
function capturing(): { db: Db; statements: SQL[] } {
  const statements: SQL[] = [];
  const db = {
    execute: async (query: SQL) => {
      statements.push(query);
      return [];
    },
  } as unknown as Db;
  return { db, statements };
}

const files = new Map<string, string>();

// Search pages: each sort, each source first, a second page (with its cursor) of a public search
// with a word and the filters most searches have; sync (updated_at) with updated_since.
// The cursors' keys are what listings-read-service.ts sortKey puts in each sort's cursor.
const AFTER: Record<SearchSort, SortKey> = {
  newest: { publishedAt: '2026-01-02T03:04:05.123456Z' },
  price_asc: { priceCents: 4500, publishedAt: '2026-01-02T03:04:05.123456Z' },
  price_desc: { priceCents: 4500, publishedAt: '2026-01-02T03:04:05.123456Z' },
  updated_at: { updatedAt: '2026-01-02T03:04:05.123456Z', id: LISTING },
  relevance: { rank: '0.0607927', publishedAt: '2026-01-02T03:04:05.123456Z' },
};
for (const sort of Object.keys(AFTER) as SearchSort[]) {
  for (const first of ['walk', 'gather', 'walk-only'] as const) {
    const query: SearchQuery = {
      scope: { kind: 'public' },
      filters: {
        q: 'wool coat',
        category: 'Outerwear',
        condition: ['good', 'like_new'],
        tag: ['vintage'],
        maxPriceCents: 10_000,
        ...(sort === 'updated_at' ? { updatedSince: '2026-01-01T00:00:00.000000Z' } : {}),
      },
      sort,
      limit: DEFAULT_PAGE_SIZE,
      after: AFTER[sort],
      ...(sort === 'relevance' ? { publishedBy: '2026-01-03T00:00:00.000000Z' } : {}),
    };
    files.set(
      `search-${sort}-${first}.sql`,
      snapshot(
        `GET /api/v1/listings: a search's second page, sort=${sort}, the ${first} first`,
        'src/listings/search-statement.ts searchStatement',
        searchStatement(withPlaceholders(query).query, DEFAULT_LIMITS, first),
      ),
    );
  }
}
// The owner's view (seller=me, a status), a seller scope's first page.
files.set(
  'search-owner-view.sql',
  snapshot(
    "GET /api/v1/listings?seller=me&status=draft&q=...: the owner's view, a first page",
    'src/listings/search-statement.ts searchStatement',
    searchStatement(
      withPlaceholders({
        scope: { kind: 'seller', sellerId: SELLER, environment: 'live' },
        filters: { q: 'wool coat', status: 'draft' },
        sort: 'newest',
        limit: DEFAULT_PAGE_SIZE,
      }).query,
      DEFAULT_LIMITS,
      'walk',
    ),
  ),
);

// The saved searches' matching statement, for a pass of three queued listings.
files.set(
  'matcher.sql',
  snapshot(
    "The matcher's pass: the matches of three queued listings",
    'src/saved-searches/matcher-worker.ts matchingStatement',
    matchingStatement([LISTING, LISTING.replace(/3$/, '4'), LISTING.replace(/3$/, '5')]),
  ),
);

// The listing writes, each one statement with the CTEs of the recordings production wires
// (src/services.ts listingRecordings): the outbox's events and deliveries, the match queue and,
// for a sandbox create, the app's milestone.
const item: NewListing = {
  title: 'Wool coat',
  description: 'Warm and plain',
  category: 'Outerwear',
  condition: 'good',
  brand: null,
  size: 'M',
  color: null,
  price_cents: 4500,
  currency: 'EUR',
  impact_mode: false,
  cover_image_url: 'https://images.example.com/coat.jpg',
  image_urls: [],
  tags: ['vintage'],
  status: 'active',
  external_id: null,
};
const { db, statements } = capturing();
const recordings = listingRecordings(new EventsRecorder(new EventsRepository(db), new WakeUps()));
const listings = new ListingsRepository(db);
const writes: [string, string, () => Promise<unknown>][] = [
  [
    'listing-create-live.sql',
    'POST /api/v1/listings (and each batch item, upserts that create), live',
    () =>
      listings.insert({ sellerId: SELLER, appId: APP, environment: 'live' }, [item], recordings),
  ],
  [
    'listing-create-sandbox.sql',
    "POST /api/v1/listings in the sandbox: the app's sandbox_listing milestone too",
    () =>
      listings.insert({ sellerId: SELLER, appId: APP, environment: 'sandbox' }, [item], recordings),
  ],
  [
    'listing-update.sql',
    'PATCH /api/v1/listings/{id} (and upserts that update): fields and a status',
    () =>
      listings.update(
        { id: LISTING, sellerId: SELLER, environment: 'live' },
        {
          title: 'Wool coat, long',
          price_cents: 4000,
          tags: ['vintage', 'wool'],
          status: 'active',
        },
        'listing.updated',
        recordings,
      ),
  ],
  [
    'listing-archive.sql',
    'DELETE /api/v1/listings/{id}: archived',
    () =>
      listings.update(
        { id: LISTING, sellerId: SELLER, environment: 'live' },
        { status: 'archived' },
        'listing.archived',
        recordings,
      ),
  ],
];
for (const [name, title, write] of writes) {
  statements.length = 0;
  await write();
  if (statements.length !== 1) throw new Error(`${name}: ${statements.length} statements, not 1`);
  files.set(name, snapshot(title, 'src/listings/listings-repository.ts', sql`${statements[0]!}`));
}

const committed = new Set(
  (() => {
    try {
      return readdirSync(DIR).filter((name) => name.endsWith('.sql'));
    } catch {
      return [];
    }
  })(),
);
if (process.argv.includes('--check')) {
  const drift: string[] = [];
  for (const [name, text] of files) {
    if (!committed.has(name)) drift.push(`${name}: missing`);
    else if (readFileSync(`${DIR}/${name}`, 'utf8') !== text) drift.push(`${name}: differs`);
  }
  for (const name of committed) if (!files.has(name)) drift.push(`${name}: no longer built`);
  if (drift.length > 0) {
    console.error(
      `sql/snapshots/ differs from the statements the code builds:\n  ${drift.join('\n  ')}\n` +
        "Run 'npm run sql:snapshots', read the SQL diff, and commit it.",
    );
    process.exit(1);
  }
  console.log(`sql/snapshots/: ${files.size} statements, as committed.`);
} else {
  mkdirSync(DIR, { recursive: true });
  for (const name of committed) if (!files.has(name)) rmSync(`${DIR}/${name}`);
  for (const [name, text] of files) writeFileSync(`${DIR}/${name}`, text);
  console.log(`sql/snapshots/: ${files.size} statements written.`);
}
