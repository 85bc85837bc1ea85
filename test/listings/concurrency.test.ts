/**
 * The external_id race on real PostgreSQL (OpenAPI "Idempotency and upsert"): concurrent POSTs with
 * the same new Idempotency-Key create exactly one listing (one 201, the rest 200, never a 500).
 * PGlite has a single connection and serialises everything, so the race cannot happen there.
 */
import { sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { listingBody } from '../helpers/listings.ts';
import { call, createSeller, listingsApp, PHOTO, type Answer, type Json } from './support.ts';

const onPostgres = Boolean(process.env.DATABASE_URL?.startsWith('postgres'));

if (!onPostgres) {
  t.test(
    'the external_id race',
    {
      skip: 'needs PostgreSQL (DATABASE_URL=postgres://...): PGlite serialises all queries, so there is no race',
    },
    () => {},
  );
} else {
  const app = await listingsApp(t);
  const seller = await createSeller(app);
  const N = 10;

  const rowsWith = async (externalId: string) =>
    (
      await queryRows<{ n: number }>(
        app.db,
        sql`select count(*)::int as n from listings where seller_id = ${seller.userId} and external_id = ${externalId}`,
      )
    )[0]!.n;

  const statuses = (answers: Answer[]) => answers.map((a) => a.status).sort((a, b) => a - b);

  t.test(
    `${N} concurrent POSTs with the same new Idempotency-Key: one 201, the rest 200, one row`,
    async (t) => {
      for (let round = 0; round < 5; round += 1) {
        const externalId = `race-${round}-${Date.now()}`;
        const answers = await Promise.all(
          Array.from({ length: N }, (_, i) =>
            call(app, 'POST', '/api/v1/listings', {
              key: round % 2 ? seller.live : seller.sandbox,
              headers: { 'idempotency-key': externalId },
              body: listingBody({ title: `Racer ${i}`, status: 'active', cover_image_url: PHOTO }),
            }),
          ),
        );
        const problems = answers.filter((a) => a.status !== 200 && a.status !== 201);
        t.same(
          problems.map((a) => [a.status, a.body]),
          [],
          `round ${round}: no answer other than 200/201 (never a 500)`,
        );
        t.same(
          statuses(answers),
          [...Array(N - 1).fill(200), 201],
          `round ${round}: one 201 and ${N - 1} x 200`,
        );
        const ids = new Set(answers.map((a) => a.body?.data?.id));
        t.equal(ids.size, 1, `round ${round}: every answer is the same listing`);
        t.ok(
          answers.every((a) => a.body?.meta?.idempotency_key === externalId),
          'meta.idempotency_key on each',
        );
        t.equal(await rowsWith(externalId), 1, `round ${round}: exactly one row`);
      }
    },
  );

  t.test('concurrent body external_id and header on the same id, mixed with batches', async (t) => {
    const externalId = `mixed-${Date.now()}`;
    const answers = await Promise.all([
      ...Array.from({ length: 4 }, () =>
        call(app, 'POST', '/api/v1/listings', {
          key: seller.sandbox,
          body: listingBody({ external_id: externalId }),
        }),
      ),
      ...Array.from({ length: 4 }, () =>
        call(app, 'POST', '/api/v1/listings', {
          key: seller.sandbox,
          headers: { 'idempotency-key': externalId },
          body: listingBody(),
        }),
      ),
      ...Array.from({ length: 3 }, () =>
        call(app, 'POST', '/api/v1/listings/batch', {
          key: seller.sandbox,
          body: { items: [listingBody({ external_id: externalId }), listingBody()] },
        }),
      ),
    ]);
    t.same(
      answers.filter((a) => a.status >= 300).map((a) => [a.status, a.body]),
      [],
      'every request succeeded',
    );
    const outcomes: number[] = [
      ...answers.slice(0, 8).map((a) => a.status),
      ...answers.slice(8).map((a) => a.body.data.results[0].status as number),
    ];
    t.equal(
      outcomes.filter((s) => s === 201).length,
      1,
      'exactly one create for the shared external_id',
    );
    t.equal(
      outcomes.filter((s) => s === 200).length,
      outcomes.length - 1,
      'every other one an upsert',
    );
    const ids = new Set([
      ...answers.slice(0, 8).map((a) => a.body.data.id),
      ...answers.slice(8).map((a) => a.body.data.results[0].data.id),
    ]);
    t.equal(ids.size, 1, 'all the same listing');
    t.equal(await rowsWith(externalId), 1, 'exactly one row');
    t.ok(
      answers.slice(8).every((a) => a.body.data.results[1].status === 201),
      'the other batch items were created',
    );
  });

  t.test(
    'concurrent creates without external_id: all 201, published_at unique and ordered in the feed',
    async (t) => {
      const fresh = await createSeller(app, { live: false });
      const answers: Answer[] = await Promise.all([
        ...Array.from({ length: 12 }, () =>
          call(app, 'POST', '/api/v1/listings', { key: fresh.sandbox, body: listingBody() }),
        ),
        ...Array.from({ length: 3 }, () =>
          call(app, 'POST', '/api/v1/listings/batch', {
            key: fresh.sandbox,
            body: { items: Array.from({ length: 10 }, () => listingBody()) },
          }),
        ),
      ]);
      t.same(
        answers.filter((a) => a.status >= 300).map((a) => [a.status, a.body]),
        [],
        'no failures',
      );
      const created: Json[] = [
        ...answers.slice(0, 12).map((a) => a.body.data),
        ...answers.slice(12).flatMap((a) => a.body.data.results.map((r: Json) => r.data)),
      ];
      t.equal(created.length, 42);
      t.equal(new Set(created.map((l) => l.published_at)).size, 42, 'published_at is unique');
      const feed = await call(app, 'GET', '/api/v1/listings?limit=100', { key: fresh.sandbox });
      t.equal(feed.body.data.length, 42);
      const stamps: string[] = feed.body.data.map((l: Json) => l.published_at);
      t.ok(
        stamps.every((s, i) => i === 0 || s < stamps[i - 1]!),
        'strictly newest first',
      );
    },
  );
}
