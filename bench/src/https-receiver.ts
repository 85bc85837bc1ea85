/**
 * The benchmarks' webhook receiver: HTTPS at 127.0.0.1 with the test CA's certificate
 * (test/fixtures/tls, which the server under test trusts through NODE_EXTRA_CA_CERTS), idle
 * connections kept a minute as a receiver under steady traffic keeps them (Node's default is
 * 5 s). Each request's path, body and arrival time go to `onRequest`, which answers it with
 * `ok` (200) at once or later; TLS connections accepted are counted.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const tls = (name: string) => readFileSync(path.join(root, 'test/fixtures/tls', name));

export interface ReceivedRequest {
  path: string;
  body: string;
  /** Date.now() when the body had arrived. */
  arrived: number;
}

export interface HttpsReceiver {
  port: number;
  /** TLS connections accepted so far: far fewer than deliveries when connections are reused. */
  connections(): number;
  close(): Promise<void>;
}

export async function startHttpsReceiver(
  onRequest: (request: ReceivedRequest, answer: () => void) => void,
): Promise<HttpsReceiver> {
  let connections = 0;
  const server = createServer(
    { key: tls('receiver-key.pem'), cert: tls('receiver-cert.pem') },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const arrived = Date.now();
        onRequest(
          { path: req.url ?? '/', body: Buffer.concat(chunks).toString('utf8'), arrived },
          () => {
            res.writeHead(200, { 'content-length': '2' });
            res.end('ok');
          },
        );
      });
    },
  );
  server.keepAliveTimeout = 60_000;
  server.on('secureConnection', () => (connections += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
