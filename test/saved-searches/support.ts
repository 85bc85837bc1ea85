/** Saved search tests: an app with the matcher running, keys that carry `searches`. */
import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { queryRows } from '../../src/db/rows.ts';
import type { Matcher } from '../../src/saved-searches/matcher-worker.ts';
import { createDeveloper, type Developer } from '../helpers/accounts.ts';
import { listingBody } from '../helpers/listings.ts';
import { waitUntil } from '../helpers/wait.ts';
import { api, type Json } from '../webhooks/support.ts';

const ALL_SCOPES = 'read listings:write searches';

/** A developer whose app has a sandbox and a live key with every scope. */
export async function searcher(
  app: FastifyInstance,
): Promise<Developer & { sandbox: string; live: string }> {
  const developer = await createDeveloper(app);
  await app.services.apps.completeMilestone(developer.appId, 'sandbox_listing');
  await app.services.apps.approve(developer.appId);
  const key = async (env: 'sandbox' | 'live') =>
    (await app.services.keys.create({ appId: developer.appId, env, scopes: ALL_SCOPES })).key;
  return { ...developer, sandbox: await key('sandbox'), live: await key('live') };
}

/** POST /api/v1/saved_searches, expecting 201; the saved search. */
export async function save(app: FastifyInstance, key: string, body: Json): Promise<Json> {
  const res = await api(app, 'POST', '/api/v1/saved_searches', key, { name: 'alert', ...body });
  if (res.status !== 201) throw new Error(`save: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

/** POST /api/v1/listings of an active listing with these fields, expecting 201; the listing. */
export async function publish(app: FastifyInstance, key: string, fields: Json): Promise<Json> {
  const body = listingBody({
    status: 'active',
    cover_image_url: 'https://images.example.com/a.jpg',
    ...fields,
  });
  const res = await api(app, 'POST', '/api/v1/listings', key, body);
  if (res.status !== 201) throw new Error(`publish: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

/** Passes of both lanes of `matcher` until neither finds anything left. */
export async function drainLanes(matcher: Matcher): Promise<void> {
  while ((await matcher.pass('light')).more || (await matcher.pass('heavy')).more);
}

/**
 * Resolves once every listing written so far is matched: the queue is empty and no pass is
 * still to report (the server's own passes run meanwhile; ours only hurry them).
 */
export async function drained(app: FastifyInstance): Promise<void> {
  const matcher = app.services.matcher!;
  await waitUntil('the match queue drained', async () => {
    await drainLanes(matcher);
    const [left] = await queryRows<{ n: number }>(
      app.db,
      sql`select count(*)::int as n from listing_match_queue`,
    );
    if (left!.n > 0) return false;
    await matcher.settled();
    return true;
  });
}
