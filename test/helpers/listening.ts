/**
 * The app on a real socket (127.0.0.1, a free port) for tests that go through HTTP as a client
 * would: the SDK (test/sdk) and the browser (test/system/docs.test.ts). Closed in teardown.
 */
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { testConfig, type TestLike } from './app.ts';
import { freePort } from './processes.ts';

export interface Listening {
  app: FastifyInstance;
  /** `http://HOST:PORT` (BASE_URL): the host the document's paths hang off. */
  baseUrl: string;
  /** The same server as `http://127.0.0.1:PORT`, whatever the public host name. */
  localUrl: string;
}

export interface ListeningOptions {
  /**
   * The host name in BASE_URL (default 127.0.0.1). A browser test can use a public-looking name
   * and map it to 127.0.0.1 itself, so nothing treats the page as "localhost".
   */
  publicHost?: string;
}

export async function listeningApp(
  t: TestLike,
  env: Record<string, string> = {},
  options: ListeningOptions = {},
): Promise<Listening> {
  const port = await freePort();
  const localUrl = `http://127.0.0.1:${port}`;
  const baseUrl = `http://${options.publicHost ?? '127.0.0.1'}:${port}`;
  // BASE_URL names the real port, so the served document's `servers` points at this server.
  const config = await testConfig(t, { RATE_LIMIT_MAX: '1000000', BASE_URL: baseUrl, ...env });
  const app = await buildApp(config, { pluginTimeout: 120_000 });
  t.teardown(() => app.close());
  await app.listen({ host: '127.0.0.1', port });
  return { app, baseUrl, localUrl };
}
