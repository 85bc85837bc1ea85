/**
 * A load balancer in front of PostgreSQL for tests of an outage: a TCP proxy in this process whose
 * mode is switched. `pass` forwards; `close` is HAProxy with no healthy backend (it accepts a
 * connection and closes it at once); `hang` is HAProxy still routing to a dead primary (it
 * accepts and never answers). Leaving `pass` first ends the sessions it was carrying, as HAProxy's
 * `on-marked-down shutdown-sessions` does. `route` sends new connections to another server (HAProxy
 * still routing to a primary that a switchover has demoted to a standby). It counts the
 * connections it accepted.
 */
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';
import type { Test } from 'tap';

type Mode = 'pass' | 'close' | 'hang';

/** A TCP proxy to `target` whose mode can be switched; counts the connections it accepted. */
export async function loadBalancer(t: Test, target: URL) {
  let mode: Mode = 'pass';
  let backend = target;
  const accepted: number[] = [];
  const sessions = new Set<Socket>();
  const server = createServer((client) => {
    accepted.push(performance.now());
    sessions.add(client);
    client.on('close', () => sessions.delete(client));
    client.on('error', () => {});
    if (mode === 'close') return void client.end();
    if (mode === 'hang') return;
    const upstream = createConnection({ host: backend.hostname, port: Number(backend.port) });
    sessions.add(upstream);
    upstream.on('close', () => {
      sessions.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sessions) socket.destroy();
        server.close(() => resolve());
      }),
  );
  const url = new URL(target);
  url.port = String((server.address() as AddressInfo).port);
  return {
    url: url.toString(),
    accepted,
    set(next: Mode) {
      mode = next;
      if (next !== 'pass') for (const socket of sessions) socket.destroy();
    },
    /** New connections go to `next`; the sessions carried so far end. */
    route(next: URL) {
      backend = next;
      for (const socket of sessions) socket.destroy();
    },
  };
}
