/**
 * The document as served passes a strict OpenAPI 3.1 validator: express-openapi-validator (the
 * request validator of Express integrations, and the peer of issue #18's benchmark) with
 * validateApiSpec on, which checks the document against the OAS 3.1 meta-schema before it
 * validates a request. It refused the document while the OAuth flow's URLs were relative
 * ("authorizationUrl must match format uri"). Then it validates requests against it.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import t from 'tap';
import { servedDocument } from '../../src/system/openapi-document.ts';

const BASE_URL = 'https://api.example.com';
const document = JSON.parse(await servedDocument(BASE_URL).json()) as {
  components: { securitySchemes: { oauth2: { flows: Record<string, Record<string, string>> } } };
};

t.test('the OAuth flow URLs are absolute, at BASE_URL', async (t) => {
  const flow = document.components.securitySchemes.oauth2.flows.authorizationCode!;
  t.equal(flow.authorizationUrl, `${BASE_URL}/oauth/authorize`);
  t.equal(flow.tokenUrl, `${BASE_URL}/oauth/token`);
  t.equal(flow.refreshUrl, `${BASE_URL}/oauth/token`);
});

t.test('express-openapi-validator accepts the document and validates with it', async (t) => {
  const app = express();
  app.use(express.json());
  app.use(
    OpenApiValidator.middleware({
      apiSpec: document as never,
      validateApiSpec: true,
      validateRequests: true,
      validateSecurity: false,
    }),
  );
  app.get('/api/v1/listings', (_req, res) => {
    res.json({ reached: true });
  });
  app.post('/api/v1/listings', (_req, res) => {
    res.status(201).json({ reached: true });
  });
  app.use(
    (
      err: { status?: number; message: string },
      _req: express.Request,
      res: express.Response,
      _next: express.NextFunction,
    ) => {
      res.status(err.status ?? 500).json({ message: err.message });
    },
  );
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  t.teardown(() => server.close());
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const page = await fetch(`${origin}/api/v1/listings?limit=5`);
  t.equal(page.status, 200, (await page.clone().text()).slice(0, 300));
  t.strictSame(await page.json(), { reached: true }, 'a valid request reaches the route');

  const badLimit = await fetch(`${origin}/api/v1/listings?limit=many`);
  t.equal(badLimit.status, 400, 'a limit that is not a number is refused by the document');
  t.match((await badLimit.json()).message, /limit/);

  const noTitle = await fetch(`${origin}/api/v1/listings`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ price_cents: 100 }),
  });
  t.equal(noTitle.status, 400, 'a listing without its title is refused by the document');
  t.match((await noTitle.json()).message, /title/);
});
