/**
 * GET /metrics (docs/metrics.md) as an operator's scraper sees it: absent without
 * METRICS_TOKEN, 401 without the token, the Prometheus text format with it, read by a real
 * parser; and the metrics that requests, rate-limit refusals and failed webhook attempts must
 * move. The outage metrics (503s while PostgreSQL is down, the Redis fallback) are checked
 * where those outages are real: test/hardening/faults.test.ts. Also the W3C traceparent: its
 * trace id on the request's log lines and on the delivery attempts of the events it recorded.
 */
import { readFileSync } from 'node:fs';
import t from 'tap';
import { projectFile } from '../../src/project-files.ts';
import { createDeveloper, createKey, bearer } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { METRICS_TOKEN, requirePrometheusParser, sampleValue, scrape } from '../helpers/metrics.ts';
import { buildLoggedApp } from '../hardening/support.ts';
import { createEndpoint, startReceiver } from '../webhooks/support.ts';
import { waitUntil } from '../helpers/wait.ts';

requirePrometheusParser(t);

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
/** A metric name in a PromQL expression, by the suffixes this service's metrics end with. */
const METRIC_NAME =
  /\b[a-z][a-z0-9_]*(?:_total|_seconds(?:_bucket|_sum|_count)?|_pending|_size|_in_use|_waiting|_fallback|_disabled|_flight)\b/g;
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

t.test('without METRICS_TOKEN there is no /metrics', async (t) => {
  const app = await buildTestApp(t);
  const answer = await app.inject({
    url: '/metrics',
    headers: { authorization: `Bearer ${METRICS_TOKEN}` },
  });
  t.equal(answer.statusCode, 404);
  t.equal(answer.json().error.code, 'not_found');
  t.equal(app.metrics, null, 'and nothing is measured');
});

t.test('with METRICS_TOKEN, only its bearer may scrape', async (t) => {
  const app = await buildTestApp(t, { METRICS_TOKEN });
  for (const authorization of [
    undefined,
    'Bearer wrong-token-0123456789',
    `Basic ${METRICS_TOKEN}`,
  ]) {
    const answer = await app.inject({
      url: '/metrics',
      headers: authorization ? { authorization } : {},
    });
    t.equal(answer.statusCode, 401, `${authorization ?? 'no Authorization'}: 401`);
    t.equal(answer.json().error.code, 'unauthorized');
  }
  const answer = await app.inject({
    url: '/metrics',
    headers: { authorization: `Bearer ${METRICS_TOKEN}` },
  });
  t.equal(answer.statusCode, 200);
  t.match(answer.headers['content-type'], /^text\/plain; version=0\.0\.4/);
  t.equal(answer.headers['cache-control'], 'no-store');
});

t.test('requests and rate-limit refusals move their metrics', async (t) => {
  const app = await buildTestApp(t, { METRICS_TOKEN, RATE_LIMIT_TOKEN_MAX: '2' });
  const metrics = () =>
    scrape(async (headers) => {
      const answer = await app.inject({ url: '/metrics', headers });
      return { status: answer.statusCode, body: answer.body };
    });
  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'sandbox');
  const before = await metrics();
  for (const name of [
    'http_requests_total',
    'http_request_duration_seconds_count',
    'http_requests_in_flight',
    'db_unavailable_responses_total',
    'rate_limit_refusals_total',
    'rate_limit_redis_fallback',
    'webhook_attempts_total',
    'webhook_deliveries_pending',
    'webhook_oldest_pending_age_seconds',
    'webhook_endpoints_disabled',
    'process_cpu_user_seconds_total',
    'nodejs_eventloop_lag_seconds',
    'nodejs_heap_size_used_bytes',
  ])
    t.ok(before.names.has(name), `${name} is exposed`);

  const created = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: { ...bearer(key), 'content-type': 'application/json' },
    payload: { title: 'Measured', price_cents: 1000 },
  });
  t.equal(created.statusCode, 201);
  const missing = await app.inject({
    url: '/api/v1/listings/00000000-0000-4000-8000-000000000000',
    headers: bearer(key),
  });
  t.equal(missing.statusCode, 404);
  // /oauth/token allows 2 a minute here: the third is refused by the `token` policy.
  for (let i = 0; i < 3; i += 1)
    await app.inject({ method: 'POST', url: '/oauth/token', payload: {} });

  const after = await metrics();
  const moved = (name: string, labels: Record<string, string>) =>
    sampleValue(after, name, labels) - sampleValue(before, name, labels);
  const create = {
    operation: 'createListing',
    method: 'POST',
    status_class: '2xx',
    environment: 'sandbox',
  };
  t.equal(moved('http_requests_total', create), 1, 'the create, counted by its operationId');
  t.equal(
    moved('http_request_duration_seconds_count', {
      operation: 'createListing',
      status_class: '2xx',
    }),
    1,
    'and timed',
  );
  t.equal(
    moved('http_requests_total', { operation: 'getListing', status_class: '4xx' }),
    1,
    'the 404, as a 4xx of getListing',
  );
  t.equal(
    moved('rate_limit_refusals_total', { policy: 'oauth-token' }),
    1,
    'one refusal of `oauth-token`',
  );
  t.equal(sampleValue(after, 'http_requests_in_flight'), 1, 'in flight: the scrape itself');
  const labels = after.samples
    .filter((sample) => sample.name === 'http_requests_total')
    .flatMap((sample) => Object.values(sample.labels));
  t.notOk(
    labels.some((value) => value.includes('00000000-0000') || value.includes('svc_')),
    'no id and no credential in any label',
  );
});

t.test('a failed webhook attempt moves webhook_attempts_total; traceparent follows', async (t) => {
  const { app, logs } = await buildLoggedApp(
    t,
    {
      METRICS_TOKEN,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_RETRY_SCHEDULE: '3600',
    },
    'debug',
  );
  const receiver = await startReceiver(t);
  receiver.reply = () => ({ status: 500 });
  const developer = await createDeveloper(app);
  const key = await createKey(app, developer, 'sandbox');
  await createEndpoint(app, receiver, { appId: developer.appId, path: '/failing' });
  const metrics = () =>
    scrape(async (headers) => {
      const answer = await app.inject({ url: '/metrics', headers });
      return { status: answer.statusCode, body: answer.body };
    });
  const before = await metrics();

  const created = await app.inject({
    method: 'POST',
    url: '/api/v1/listings',
    headers: { ...bearer(key), 'content-type': 'application/json', traceparent: TRACEPARENT },
    payload: { title: 'Traced', price_cents: 1000 },
  });
  t.equal(created.statusCode, 201);
  t.equal(created.headers['x-request-id'] !== undefined, true, 'the request id is still sent');
  await waitUntil('the failed attempt', () => receiver.to('/failing').length > 0);
  const after = await waitUntil('the attempt to be counted', async () => {
    const scraped = await metrics();
    return sampleValue(scraped, 'webhook_attempts_total', { outcome: '5xx' }) >
      sampleValue(before, 'webhook_attempts_total', { outcome: '5xx' })
      ? scraped
      : null;
  });
  t.equal(
    sampleValue(after, 'webhook_attempts_total', { outcome: '5xx' }) -
      sampleValue(before, 'webhook_attempts_total', { outcome: '5xx' }),
    1,
    'one 5xx attempt',
  );
  // The backlog gauges are read from the database at most every 5 seconds.
  await waitUntil(
    'webhook_deliveries_pending to show the delivery waiting for its retry in an hour',
    async () => sampleValue(await metrics(), 'webhook_deliveries_pending') === 1,
    { timeoutMs: 15_000 },
  );
  t.pass('webhook_deliveries_pending: 1');

  const requestLines = logs().filter((line) => line.reqId === created.headers['x-request-id']);
  t.ok(requestLines.length > 0, 'the request has log lines');
  t.ok(
    requestLines.every((line) => line.traceId === TRACE_ID),
    'each carries the trace id of its traceparent',
  );
  const attempt = await waitUntil('the attempt log line', () =>
    logs().find((line) => line.msg === 'webhook attempt'),
  );
  t.equal(attempt.traceId, TRACE_ID, "the delivery attempt's log line carries it too");
});

t.test('a malformed traceparent is ignored, never an error', async (t) => {
  const { app, logs } = await buildLoggedApp(t, {});
  for (const traceparent of [
    'nonsense',
    `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`,
    `ff-${TRACE_ID}-00f067aa0ba902b7-01`,
    `00-${TRACE_ID.toUpperCase()}-00f067aa0ba902b7-01`,
  ]) {
    const answer = await app.inject({ url: '/api/v1/listings', headers: { traceparent } });
    t.equal(answer.statusCode, 200, `${traceparent}: answered as usual`);
  }
  t.notOk(
    logs().some((line) => 'traceId' in line),
    'no trace id is logged for them',
  );
});

t.test('the example Grafana dashboard is valid and names only real metrics', async (t) => {
  const dashboard = JSON.parse(
    readFileSync(projectFile('docs', 'grafana-dashboard.json'), 'utf8'),
  ) as { panels: { title: string; targets?: { expr: string }[] }[] };
  const app = await buildTestApp(t, { METRICS_TOKEN });
  const exposed = await scrape(async (headers) => {
    const answer = await app.inject({ url: '/metrics', headers });
    return { status: answer.statusCode, body: answer.body };
  });
  const names = exposed.names;
  const panels = dashboard.panels.filter((panel) => panel.targets?.length);
  t.ok(panels.length >= 6, 'request rate, latency, errors, backlog, pool, Redis');
  for (const panel of panels) {
    for (const target of panel.targets!) {
      const used = target.expr.match(METRIC_NAME) ?? [];
      t.ok(used.length > 0, `${panel.title}: queries a metric`);
      for (const name of used) {
        // The pool is PostgreSQL's (postgres.js): the embedded database has none to report.
        const poolOnly = name.startsWith('db_') && name !== 'db_unavailable_responses_total';
        if (poolOnly && app.database.driver === 'pglite') continue;
        t.ok(names.has(name), `${panel.title}: ${name} exists`);
      }
    }
  }
});
