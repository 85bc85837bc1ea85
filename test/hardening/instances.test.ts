/**
 * Several instances behind any load balancer: two real server processes (src/server.ts) on one
 * private PostgreSQL cluster and one private Redis, every request alternating between them as a
 * round-robin balancer would. Nothing lives in a process but each one's own metrics:
 *
 * - the rate limit holds across both (one counter per credential, per IP), and so do the
 *   failed sign-in counters;
 * - listings written through one are read, updated and archived through the other;
 * - a browser's OAuth sign-in and consent work across both, and an authorization code works
 *   once across both, even when both exchange it at the same moment;
 * - webhook deliveries are made once, though both processes run a delivery worker, also when
 *   both drain a backlog of 5,000 events to three endpoints together.
 */
import { eq, sql } from 'drizzle-orm';
import t from 'tap';
import { queryRows } from '../../src/db/rows.ts';
import { webhookDeliveries } from '../../src/db/outbox-schema.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { csrfOf, formActionOf } from '../helpers/browser.ts';
import {
  startServerProcess,
  withPrivateServers,
  type PrivatePostgres,
  type PrivateRedis,
  type ServerProcess,
} from '../helpers/private-servers.ts';
import { waitUntil } from '../helpers/wait.ts';
import { METRICS_TOKEN, requirePrometheusParser, sampleValue, scrape } from '../helpers/metrics.ts';
import { createClient, createEndUser, type Client, type EndUser } from '../oauth/support.ts';
import { createEndpoint, startReceiver } from '../webhooks/support.ts';
import { buildLoggedApp, rateHeaders } from './support.ts';

requirePrometheusParser(t);

await withPrivateServers(
  t,
  'two instances on a private PostgreSQL and Redis',
  { redis: true },
  instances,
);

async function instances(pg: PrivatePostgres, redis: PrivateRedis): Promise<void> {
  // This process prepares accounts through the services (and migrates first); it delivers nothing.
  const { app } = await buildLoggedApp(
    t,
    {
      DATABASE_URL: pg.url,
      WEBHOOK_WORKER: 'false',
      SAVED_SEARCH_MATCHER: 'false',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      // It writes the backlog below (200 batches) without meeting the limit.
      RATE_LIMIT_MAX: '1000000',
    },
    'warn',
  );
  const env = {
    DATABASE_URL: pg.url,
    REDIS_URL: redis.url,
    RATE_LIMIT_MAX: '40',
    // Every request here comes from 127.0.0.1: room for the sign-ins of several tests.
    RATE_LIMIT_SIGNIN_MAX: '100',
    SESSION_SECRET: 'a shared session secret of at least 32 characters',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    LOG_LEVEL: 'warn',
    METRICS_TOKEN,
  };
  const [a, b] = await Promise.all([startServerProcess(t, env), startServerProcess(t, env)]);
  const both: [ServerProcess, ServerProcess] = [a!, b!];
  const other = (s: ServerProcess) => (s === both[0] ? both[1] : both[0]);
  let turn = 0;
  /** The next instance, round-robin. */
  const next = () => both[(turn += 1) % 2]!;

  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'sandbox');
  const call = (server: ServerProcess, path: string, init: RequestInit = {}) =>
    fetch(`${server.base}${path}`, {
      ...init,
      redirect: 'manual',
      signal: AbortSignal.timeout(15_000),
    });
  const api = (
    server: ServerProcess,
    method: string,
    path: string,
    credential: string | null,
    body?: unknown,
  ) =>
    call(server, path, {
      method,
      headers: {
        ...(credential ? { authorization: `Bearer ${credential}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  t.test("each instance's /metrics counts what that instance answered", async (t) => {
    // The built server loads prom-client from node_modules only with METRICS_TOKEN
    // (scripts/build.mjs keeps it an import).
    const metricsOf = (server: ServerProcess) =>
      scrape(async (headers) => {
        const res = await call(server, '/metrics', { headers });
        return { status: res.status, body: await res.text() };
      });
    const answered = (scraped: Awaited<ReturnType<typeof metricsOf>>) =>
      sampleValue(scraped, 'http_requests_total', { operation: 'getMe', status_class: '2xx' });
    const counted = await createKey(app, developer, 'sandbox');
    const before = await Promise.all(both.map(metricsOf));
    for (let i = 0; i < 3; i += 1)
      t.equal((await api(a!, 'GET', '/api/v1/me', counted)).status, 200);
    const after = await Promise.all(both.map(metricsOf));
    t.equal(answered(after[0]!) - answered(before[0]!), 3, 'the instance that answered: +3');
    t.equal(answered(after[1]!) - answered(before[1]!), 0, 'the other: unchanged');
  });

  t.test('the rate limit holds across both instances', async (t) => {
    const limitedKey = await createKey(app, developer, 'sandbox');
    const remaining: number[] = [];
    const served: number[] = [];
    for (let i = 0; i < 40; i += 1) {
      const server = next();
      const res = await api(server, 'GET', '/api/v1/me', limitedKey);
      t.equal(res.status, 200);
      remaining.push(rateHeaders(Object.fromEntries(res.headers)).remaining!);
      served.push(server.port);
    }
    t.same(
      remaining,
      Array.from({ length: 40 }, (_, i) => 39 - i),
      'one counter for the key, 39 down to 0, whichever instance answers',
    );
    t.equal(new Set(served).size, 2, 'both instances answered');
    for (const server of both) {
      const res = await api(server, 'GET', '/api/v1/me', limitedKey);
      t.equal(res.status, 429, `the 41st call is refused on port ${server.port}`);
      t.equal(((await res.json()) as { error: { code: string } }).error.code, 'rate_limited');
      t.ok(Number(res.headers.get('retry-after')) >= 1, 'Retry-After');
    }
    // Anonymous callers: one counter per IP, shared too.
    const anonymous: number[] = [];
    for (let i = 0; i < 6; i += 1)
      anonymous.push(
        Number(
          (await api(next(), 'GET', '/api/v1/health', null)).headers.get('ratelimit-remaining'),
        ),
      );
    t.same(
      anonymous,
      anonymous.map((_, i) => anonymous[0]! - i),
      `the IP's counter counts down across both: ${anonymous.join(',')}`,
    );
  });

  t.test('failed sign-ins recorded by one instance count in the other', async (t) => {
    const user = await createEndUser(app);
    const guesser = new HttpBrowser();
    const statuses: number[] = [];
    // Five failures from this IP, alternating: three answered by A, two by B.
    for (let i = 0; i < 5; i += 1) {
      const server = both[i % 2]!;
      statuses.push((await guesser.signIn(server, server, user.username, `wrong ${i}`)).status);
    }
    t.same(statuses, [401, 401, 401, 401, 401]);
    for (const server of both) {
      const res = await new HttpBrowser().signIn(server, server, user.username, user.password);
      t.equal(
        res.status,
        429,
        `port ${server.port}: this IP is refused for that username, whichever instance counted the failures`,
      );
      t.ok(Number(res.headers.get('retry-after')) > 60, 'until the 15-minute window ends');
    }
  });

  t.test('listings written through one instance are read through the other', async (t) => {
    const created = await api(a!, 'POST', '/api/v1/listings', key, {
      title: 'Written on A',
      price_cents: 1500,
      external_id: 'two-instances-1',
    });
    t.equal(created.status, 201);
    const listing = ((await created.json()) as { data: { id: string; title: string } }).data;
    const read = await api(b!, 'GET', `/api/v1/listings/${listing.id}`, key);
    t.equal(read.status, 200);
    t.same(((await read.json()) as { data: unknown }).data, listing, 'the same listing on B');
    const feed = (await (await api(b!, 'GET', '/api/v1/listings', key)).json()) as {
      data: { id: string }[];
    };
    t.ok(
      feed.data.some((l) => l.id === listing.id),
      "in B's feed",
    );
    const upsert = await api(b!, 'POST', '/api/v1/listings', key, {
      title: 'Upserted on B',
      price_cents: 1600,
      external_id: 'two-instances-1',
    });
    t.equal(upsert.status, 200, 'the external_id written on A upserts on B');
    const patched = await api(b!, 'PATCH', `/api/v1/listings/${listing.id}`, key, {
      title: 'Patched on B',
    });
    t.equal(patched.status, 200);
    const afterPatch = (await (
      await api(a!, 'GET', `/api/v1/listings/${listing.id}`, key)
    ).json()) as { data: { title: string; price_cents: number } };
    t.same(
      [afterPatch.data.title, afterPatch.data.price_cents],
      ['Patched on B', 1600],
      'A reads what B wrote',
    );
    t.equal((await api(a!, 'DELETE', `/api/v1/listings/${listing.id}`, key)).status, 200);
    const archived = (await (
      await api(b!, 'GET', `/api/v1/listings/${listing.id}`, key)
    ).json()) as { data: { status: string } };
    t.equal(archived.data.status, 'archived', 'B sees the archive made on A');
  });

  t.test(
    'OAuth across both: sign-in and consent hop between instances; a code works once',
    async (t) => {
      const client = await createClient(app);
      const user = await createEndUser(app);
      const browser = new HttpBrowser();

      const code1 = await browser.obtainCode(a!, b!, client, user);
      const token1 = await exchange(a!, client, code1);
      t.equal(token1.status, 200, 'the code exchanged on A');
      const accessToken = ((await token1.json()) as { access_token: string }).access_token;
      t.equal(
        (await api(b!, 'GET', '/oauth/userinfo', accessToken)).status,
        200,
        'its token works on B',
      );
      const replay = await exchange(b!, client, code1);
      t.equal(replay.status, 400, 'replayed on B: refused');
      t.equal(((await replay.json()) as { error: string }).error, 'invalid_grant');
      t.equal(
        (await api(a!, 'GET', '/oauth/userinfo', accessToken)).status,
        401,
        'the replay revoked the token, seen on A',
      );

      for (let round = 0; round < 3; round += 1) {
        const code = await browser.obtainCode(b!, a!, client, user);
        const answers = await Promise.all([exchange(a!, client, code), exchange(b!, client, code)]);
        const statuses = answers.map((r) => r.status).sort();
        t.same(
          statuses,
          [200, 400],
          `round ${round + 1}: the same code on both at once: one token, one invalid_grant`,
        );
      }

      // One refresh token sent to both at once: exactly one new pair of tokens.
      for (let round = 0; round < 3; round += 1) {
        const code = await browser.obtainCode(a!, b!, client, user);
        const issued = (await (await exchange(a!, client, code)).json()) as {
          refresh_token: string;
        };
        const answers = await Promise.all([
          refresh(a!, client, issued.refresh_token),
          refresh(b!, client, issued.refresh_token),
        ]);
        const bodies = (await Promise.all(answers.map((r) => r.json()))) as {
          access_token?: string;
          error?: string;
        }[];
        t.same(
          answers.map((r) => r.status).sort(),
          [200, 400],
          `refresh round ${round + 1}: one new token pair, one invalid_grant`,
        );
        t.same(bodies.map((body) => body.error).filter(Boolean), ['invalid_grant']);
      }
    },
  );

  t.test('webhook deliveries are not duplicated by the two workers', async (t) => {
    const receiver = await startReceiver(t);
    const endpoint = await createEndpoint(app, receiver, {
      appId: developer.appId,
      path: '/two-instances',
    });
    const N = 24;
    const ids: string[] = [];
    for (let i = 0; i < N; i += 1) {
      const res = await api(next(), 'POST', '/api/v1/listings', key, {
        title: `Delivered once ${i}`,
        price_cents: 100 + i,
      });
      t.equal(res.status, 201);
      ids.push(((await res.json()) as { data: { id: string } }).data.id);
    }
    await waitUntil(`${N} deliveries`, () => receiver.to('/two-instances').length >= N, {
      timeoutMs: 30_000,
    });
    // Every outcome recorded: a second send of an attempt would have claimed it again first
    // (attempts 2), so the wait ends there too and the checks below say what went wrong.
    const rows = await waitUntil('every outcome recorded', async () => {
      const found = await app.db
        .select()
        .from(webhookDeliveries)
        .where(eq(webhookDeliveries.endpointId, endpoint.id));
      const settled =
        found.filter((r) => r.status === 'succeeded').length >= N ||
        found.some((r) => r.attempts > 1);
      return settled ? found : undefined;
    });
    const received = receiver.to('/two-instances');
    const deliveryIds = received.map((r) => String(r.headers['x-service-delivery']));
    t.equal(received.length, N, `${N} requests received, no more`);
    t.equal(new Set(deliveryIds).size, N, 'each delivery id once');
    t.same(
      received
        .map((r) => (r.event?.data as { listing?: { id?: string } } | undefined)?.listing?.id)
        .sort(),
      [...ids].sort(),
      'one listing.created per listing',
    );
    t.ok(
      received.every((r) => r.verifyError === null),
      'every delivery verifies',
    );
    t.equal(rows.length, N);
    t.ok(
      rows.every((r) => r.attempts === 1 && r.status === 'succeeded'),
      'one attempt each, all succeeded',
    );
  });

  t.test('both workers drain a 5,000-event backlog to three endpoints, each once', async (t) => {
    const receiver = await startReceiver(t);
    const owner = await createDeveloper(app);
    const ownerKey = await createKey(app, owner, 'sandbox');
    const paths = ['/backlog-a', '/backlog-b', '/backlog-c'];
    for (const path of paths) await createEndpoint(app, receiver, { appId: owner.appId, path });
    const EVENTS = 5000;
    // Written through the in-process app (no worker): the backlog is there before it drains.
    for (let done = 0; done < EVENTS; done += 25) {
      const res = await app.inject({
        method: 'POST',
        url: '/api/v1/listings/batch',
        headers: { authorization: `Bearer ${ownerKey}` },
        payload: {
          items: Array.from({ length: 25 }, (_, i) => ({
            title: `Backlog ${done + i}`,
            price_cents: 100 + i,
          })),
        },
      });
      if (res.statusCode !== 200) throw new Error(`batch: ${res.statusCode} ${res.body}`);
    }
    const total = EVENTS * paths.length;
    await waitUntil(
      `${total} deliveries`,
      () => paths.every((path) => receiver.to(path).length >= EVENTS),
      { timeoutMs: 240_000 },
    );
    // Every outcome recorded (a second send would have claimed an attempt again first).
    const row = await waitUntil('every outcome recorded', async () => {
      const [found] = await queryRows<{ attempts: number; succeeded: number }>(
        app.db,
        sql`select sum(d.attempts)::int as attempts,
                 count(*) filter (where d.status = 'succeeded')::int as succeeded
          from webhook_deliveries d join webhook_endpoints ep on ep.id = d.endpoint_id
          where ep.app_id = ${owner.appId}`,
      );
      return found!.succeeded >= total || found!.attempts > total ? found : undefined;
    });
    for (const path of paths) {
      const ids = receiver.to(path).map((r) => String(r.headers['webhook-id']));
      t.equal(ids.length, EVENTS, `${path}: ${EVENTS} requests, no more`);
      t.equal(new Set(ids).size, EVENTS, `${path}: every delivery id, once`);
    }
    t.ok(
      paths.every((path) => receiver.to(path).every((r) => r.verifyError === null)),
      'every delivery verifies',
    );
    t.same(row, { attempts: total, succeeded: total }, 'one attempt each, all succeeded');
  });

  t.test('a key revoked by another process stops on both instances', async (t) => {
    const { id, key: revoked } = await app.services.keys.create({
      appId: developer.appId,
      env: 'sandbox',
    });
    for (const server of both)
      t.equal((await api(server, 'GET', '/api/v1/me', revoked)).status, 200, 'held by each');
    // This process stands for the admin CLI: only PostgreSQL's notification tells the servers.
    await app.services.keys.revoke(id);
    const start = performance.now();
    for (const server of both)
      await waitUntil(
        `401 on port ${server.port}`,
        async () => (await api(server, 'GET', '/api/v1/me', revoked)).status === 401,
        { timeoutMs: 2_000, everyMs: 5 },
      );
    t.pass(`refused by both within ${(performance.now() - start).toFixed(0)} ms`);
  });

  t.test('an access token revoked on one instance stops on both', async (t) => {
    const client = await createClient(app);
    const user = await createEndUser(app);
    const code = await new HttpBrowser().obtainCode(a!, b!, client, user);
    const issued = await exchange(a!, client, code);
    const { access_token: token } = (await issued.json()) as { access_token: string };
    for (const server of both)
      t.equal((await api(server, 'GET', '/api/v1/me', token)).status, 200, 'held by each');
    const revoked = await oauthForm(a!, '/oauth/revoke', client, { token });
    t.equal(revoked.status, 200, 'RFC 7009 revocation on A');
    t.equal((await api(a!, 'GET', '/api/v1/me', token)).status, 401, 'A: the very next request');
    const start = performance.now();
    await waitUntil(
      `401 on port ${b!.port}`,
      async () => (await api(b!, 'GET', '/api/v1/me', token)).status === 401,
      { timeoutMs: 2_000, everyMs: 5 },
    );
    t.pass(`B refused it within ${(performance.now() - start).toFixed(0)} ms`);
  });

  t.test('both instances stop cleanly', async (t) => {
    for (const server of both) server.child.kill('SIGTERM');
    for (const server of both)
      t.same(
        await server.waitExit(30_000),
        { code: 0, signal: null },
        `port ${server.port} exits 0`,
      );
    for (const server of both) {
      const errors = server.logs().filter((l) => Number(l.level) >= 50);
      t.same(errors, [], `port ${server.port}: no error logged`);
      t.equal(other(server).port !== server.port, true);
    }
  });
}

/** A form POST to an OAuth endpoint, authenticating the client in the body. */
const oauthForm = (
  server: ServerProcess,
  path: '/oauth/token' | '/oauth/revoke',
  client: Client,
  params: Record<string, string>,
) =>
  fetch(`${server.base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      ...params,
      client_id: client.clientId,
      client_secret: client.clientSecret,
    }),
    signal: AbortSignal.timeout(15_000),
  });

const exchange = (server: ServerProcess, client: Client, code: string) =>
  oauthForm(server, '/oauth/token', client, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: client.redirectUri,
  });

const refresh = (server: ServerProcess, client: Client, refreshToken: string) =>
  oauthForm(server, '/oauth/token', client, {
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
  });

/**
 * A browser over real HTTP: cookies kept across instances, forms submitted with their CSRF token.
 */
class HttpBrowser {
  private readonly cookies = new Map<string, string>();
  private page = '';

  private async request(
    server: ServerProcess,
    path: string,
    init: RequestInit = {},
  ): Promise<Response> {
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(`${server.base}${path}`, {
      ...init,
      redirect: 'manual',
      headers: {
        ...(init.headers as Record<string, string> | undefined),
        ...(cookie ? { cookie } : {}),
      },
      signal: AbortSignal.timeout(15_000),
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair = '', ...attributes] = line.split(';');
      const [name = '', value = ''] = pair.split('=');
      if (value === '' || attributes.some((a) => /^\s*max-age=0\s*$/i.test(a)))
        this.cookies.delete(name.trim());
      else this.cookies.set(name.trim(), value.trim());
    }
    if ((res.headers.get('content-type') ?? '').startsWith('text/html'))
      this.page = await res.clone().text();
    return res;
  }

  private submit(server: ServerProcess, fields: Record<string, string>): Promise<Response> {
    return this.request(server, formActionOf(this.page), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf_token: csrfOf(this.page), ...fields }).toString(),
    });
  }

  /** The sign-in page of `first`, the form posted to `second`. */
  async signIn(
    first: ServerProcess,
    second: ServerProcess,
    username: string,
    password: string,
  ): Promise<Response> {
    const page = await this.request(first, '/login');
    if (page.status !== 200) throw new Error(`sign-in page: ${page.status}`);
    return this.submit(second, { username, password });
  }

  /** The authorization page on `first`, sign-in and consent posted to `second`. */
  async obtainCode(
    first: ServerProcess,
    second: ServerProcess,
    client: Client,
    user: EndUser,
  ): Promise<string> {
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: client.clientId,
      redirect_uri: client.redirectUri,
      scope: 'read',
      state: 'st',
    });
    const path = `/oauth/authorize?${query.toString()}`;
    let page = await this.request(first, path);
    if (page.status !== 200) throw new Error(`authorize page: ${page.status}`);
    if (!this.page.includes('name="decision"')) {
      const signedIn = await this.submit(second, {
        username: user.username,
        password: user.password,
      });
      if (signedIn.status !== 303)
        throw new Error(`sign-in on the other instance: ${signedIn.status}`);
      page = await this.request(first, String(signedIn.headers.get('location')));
      if (page.status !== 200 || !this.page.includes('name="decision"'))
        throw new Error(`consent page: ${page.status}`);
    }
    const decided = await this.submit(second, { decision: 'allow' });
    if (decided.status !== 303) throw new Error(`consent on the other instance: ${decided.status}`);
    const code = new URL(String(decided.headers.get('location'))).searchParams.get('code');
    if (!code) throw new Error('no code in the redirect');
    return code;
  }
}
