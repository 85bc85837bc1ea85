/**
 * A plain-HTTP receiver on this machine, as `listen --forward-to` targets one: every request's
 * raw body and headers kept in `received`, answered 204 (or what `status` says for its path).
 * Closed at the test's end.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  raw: string;
  headers: IncomingHttpHeaders;
}

interface TestLike {
  teardown(fn: () => unknown): void;
}

export async function localReceiver(
  t: TestLike,
  status: (path: string | undefined) => number = () => 204,
): Promise<{ received: Received[]; url: (path: string) => string }> {
  const received: Received[] = [];
  const receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push({ raw: Buffer.concat(chunks).toString('utf8'), headers: request.headers });
      response.writeHead(status(request.url)).end();
    });
  });
  await new Promise<void>((done) => receiver.listen(0, '127.0.0.1', done));
  t.teardown(() => new Promise<void>((done) => receiver.close(() => done())));
  const port = (receiver.address() as AddressInfo).port;
  return { received, url: (path) => `http://localhost:${port}${path}` };
}
