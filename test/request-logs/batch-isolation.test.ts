/**
 * One entry cannot take a request-log batch down with it (issue 55 item 6): a batch that fails
 * on a value (a data exception, SQLSTATE class 22) is written again entry by entry, so only the
 * entry at fault is dropped (and counted); a batch that fails otherwise (the database is down)
 * is dropped whole, without a statement per entry.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { RequestLogBuffer } from '../../src/request-logs/request-log-buffer.ts';
import type { RequestLogsRepository } from '../../src/request-logs/request-logs-repository.ts';
import { loggedRequest } from '../helpers/request-logs.ts';

/** A repository whose inserts fail with `code` when a batch holds the path `/refused`. */
function repository(code: string) {
  const written: string[] = [];
  const drops: { app_id: string; dropped: number }[] = [];
  let statements = 0;
  const fake = {
    async insertMany(entries: string) {
      if (entries === '[]') return; // as the repository: no statement
      statements += 1;
      const rows = JSON.parse(entries) as { path: string; request_id: string }[];
      if (rows.some((row) => row.path === '/refused'))
        throw Object.assign(new Error('refused'), { code });
      written.push(...rows.map((row) => row.request_id));
    },
    async addDrops(batch: { app_id: string; dropped: number }[]) {
      drops.push(...batch);
    },
  };
  return {
    repository: fake as unknown as RequestLogsRepository,
    written,
    drops,
    statements: () => statements,
  };
}

const batchOf = (appId: string) => [
  loggedRequest({ app_id: appId }),
  loggedRequest({ app_id: appId, path: '/refused' }),
  loggedRequest({ app_id: randomUUID() }),
];

t.test('a data exception: the others are written, the one at fault counted', async (t) => {
  const fake = repository('22P05');
  const buffer = new RequestLogBuffer(fake.repository, {
    capacity: 10,
    flushIntervalMs: 10_000,
    batchSize: 10,
  });
  const appId = randomUUID();
  const entries = batchOf(appId);
  for (const entry of entries) buffer.record(entry);
  await buffer.flush();
  await buffer.flush(); // the drop counts go with the next write
  t.strictSame(fake.written, [entries[0]!.request_id, entries[2]!.request_id]);
  t.strictSame(fake.drops, [{ app_id: appId, environment: 'sandbox', dropped: 1 }]);
});

t.test('the database down: the batch is dropped in one statement', async (t) => {
  const fake = repository('ECONNREFUSED');
  const buffer = new RequestLogBuffer(fake.repository, {
    capacity: 10,
    flushIntervalMs: 10_000,
    batchSize: 10,
  });
  for (const entry of batchOf(randomUUID())) buffer.record(entry);
  await buffer.flush();
  await buffer.flush(); // the drop counts go with the next write
  t.equal(fake.statements(), 1);
  t.strictSame(fake.written, []);
  t.equal(
    fake.drops.reduce((sum, d) => sum + d.dropped, 0),
    3,
  );
});
