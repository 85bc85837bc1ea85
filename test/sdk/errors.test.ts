/**
 * MarketplaceApiError from answers the running server rarely gives on demand: 429 with
 * Retry-After, an RFC 6749 OAuth error, a code added after this SDK was built, a non-JSON body.
 */
import t from 'tap';
import {
  createMarketplaceClient,
  isMarketplaceApiError,
  MarketplaceApiError,
} from '../../sdk/src/index.ts';

/** A client whose fetch answers with `response` (no server involved). */
const answering = (response: () => Response) =>
  createMarketplaceClient({ baseUrl: 'http://127.0.0.1:9', fetch: async () => response() });
const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
const meta = { version: 'v1', environment: 'live', request_id: 'req_abc' };

async function errorOf(pending: Promise<unknown>): Promise<MarketplaceApiError> {
  return pending.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error as MarketplaceApiError,
  );
}

t.test('429 rate_limited carries Retry-After in seconds', async (t) => {
  const error = await errorOf(
    answering(() =>
      json(
        429,
        { error: { code: 'rate_limited', message: 'Too many requests.' }, meta },
        { 'retry-after': '17' },
      ),
    ).listings.list(),
  );
  t.ok(error instanceof MarketplaceApiError);
  t.equal(error.status, 429);
  t.equal(error.code, 'rate_limited');
  t.equal(error.retryAfter, 17);
  t.equal(error.requestId, 'req_abc');
  t.equal(error.message, '429 rate_limited: Too many requests.');
});

t.test('validation details, and a code newer than this SDK', async (t) => {
  const details = [{ path: '/title', message: 'must NOT have fewer than 3 characters' }];
  const invalid = await errorOf(
    answering(() =>
      json(400, { error: { code: 'validation_error', message: 'Invalid request', details }, meta }),
    ).me(),
  );
  t.same(invalid.details, details);
  const newer = await errorOf(
    answering(() =>
      json(402, { error: { code: 'payment_required', message: 'Pay up.' }, meta }),
    ).me(),
  );
  t.equal(newer.code, 'payment_required', 'unknown codes are kept as sent');
  t.equal(newer.status, 402, 'to be handled by status');
  t.ok(isMarketplaceApiError(newer));
  t.notOk(isMarketplaceApiError(newer, 'not_found'));
});

t.test('an RFC 6749 error and a body that is not ours', async (t) => {
  const oauth = await errorOf(
    answering(() =>
      json(400, { error: 'invalid_grant', error_description: 'The code was used.' }),
    ).me(),
  );
  t.equal(oauth.code, 'invalid_grant');
  t.equal(oauth.message, '400 invalid_grant: The code was used.');
  const proxy = await errorOf(
    answering(
      () =>
        new Response('<html>Bad gateway</html>', {
          status: 502,
          statusText: 'Bad Gateway',
          headers: { 'x-request-id': 'req_proxy' },
        }),
    ).me(),
  );
  t.equal(proxy.code, 'unexpected_response');
  t.equal(proxy.status, 502);
  t.equal(proxy.requestId, 'req_proxy');
  t.equal(proxy.body, '<html>Bad gateway</html>');
});

t.test('iteration stops loudly if the cursor does not advance', async (t) => {
  const page = {
    data: [],
    meta: { ...meta, next_cursor: '2026-11-20T14:03:12.123456Z', count: 0 },
  };
  const stuck = answering(() => json(200, page));
  await t.rejects(
    (async () => {
      for await (const _ of stuck.listings.iterate({ cursor: '2026-11-20T14:03:12.123456Z' }))
        void _;
    })(),
    /did not advance/,
  );
});
