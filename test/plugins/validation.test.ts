/**
 * Integer query parameters take decimal digits only (src/lib/validator.ts): the texts
 * JavaScript's Number() also reads (hex, exponent, spaces, a sign, a fraction) are 400
 * validation_error at /query/<name>, on every operation with one.
 */
import t from 'tap';
import { bearer, createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';

const app = await buildTestApp(t);
const dev = await createDeveloper(app);
const key = await createKey(app, dev, 'sandbox');

const get = (url: string) => app.inject({ url, headers: bearer(key) });

for (const path of ['/api/v1/listings', '/api/v1/events']) {
  t.test(`${path}: limit in decimal digits only`, async (t) => {
    for (const good of ['5', '05', '100']) {
      t.equal((await get(`${path}?limit=${good}`)).statusCode, 200, `limit=${good}`);
    }
    for (const bad of ['0x10', '1e2', ' 5', '5 ', '+5', '5.0', '0b1', 'Infinity']) {
      const res = await get(`${path}?limit=${encodeURIComponent(bad)}`);
      t.equal(res.statusCode, 400, `limit=${JSON.stringify(bad)}`);
      t.match(res.json(), {
        error: {
          code: 'validation_error',
          details: [{ path: '/query/limit', message: 'must be an integer in decimal digits' }],
        },
      });
      t.equal(
        res.json().error.details.length,
        1,
        'one problem, not a range error on the coerced value as well',
      );
    }
    // Decimal but out of range: the range error, as before.
    t.match((await get(`${path}?limit=101`)).json(), {
      error: {
        code: 'validation_error',
        details: [{ path: '/query/limit', message: 'must be <= 100' }],
      },
    });
    // A repeated parameter is refused as well.
    t.equal((await get(`${path}?limit=5&limit=6`)).statusCode, 400);
  });
}
