/**
 * Issue #60 item 5: the replica's log line names the server that did not answer. While the
 * primary is out (a failover) its lag poll fails on the primary, and the line says so, where it
 * said "the read replica is unreachable" of a replica that was fine. docs/operations.md "Read
 * replica", "States and failure modes".
 */
import { createServer, type AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { Replica } from '../../src/db/replica.ts';

const onPostgres = process.env.DATABASE_URL?.startsWith('postgres') ?? false;

/** A loopback port nothing listens on (connections to it are refused). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function firstDownLine(t: Test, urls: { primaryUrl: string; url: string }) {
  const lines: { object: Record<string, unknown>; message: string }[] = [];
  const log = {
    info: (object: object, message: string) => lines.push({ object: { ...object }, message }),
    warn: (object: object, message: string) => lines.push({ object: { ...object }, message }),
  };
  const replica = new Replica({ ...urls, maxLagMs: 1000, poolSize: 1, poolWaitMs: 500, log });
  t.teardown(() => replica.close(0));
  await replica.start();
  t.equal(replica.stats().state, 'down', 'the replica is skipped');
  return lines.filter((line) => line.object.event === 'db_replica_down');
}

t.test('the primary unreachable: the line names the primary', async (t) => {
  const primaryUrl = `postgres://postgres@127.0.0.1:${await closedPort()}/postgres`;
  const url = `postgres://postgres@127.0.0.1:${await closedPort()}/postgres`;
  const lines = await firstDownLine(t, { primaryUrl, url });
  t.equal(lines.length, 1, 'one line');
  t.equal(lines[0]!.object.unreachable, 'primary');
  t.match(lines[0]!.message, /^the primary \(DATABASE_URL\) is unreachable/);
  t.notMatch(lines[0]!.message, /read replica is unreachable/);
});

t.test(
  'the replica unreachable: the line names the replica',
  { skip: !onPostgres && 'PostgreSQL only (DATABASE_URL): a primary that answers' },
  async (t) => {
    const url = `postgres://postgres@127.0.0.1:${await closedPort()}/postgres`;
    const lines = await firstDownLine(t, { primaryUrl: process.env.DATABASE_URL!, url });
    t.equal(lines.length, 1, 'one line');
    t.equal(lines[0]!.object.unreachable, 'replica');
    t.match(lines[0]!.message, /^the read replica is unreachable/);
  },
);
