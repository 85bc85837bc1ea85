/**
 * The restore drill (scripts/restore-drill.ts, `npm run drill:restore`; docs/operations.md
 * "Backups and restore"), run as an operator runs it: pgBackRest's WAL archive and backups of a
 * PostgreSQL cluster the service writes to, a restore to a time T between writes, and the
 * service started on the restored database. Every create acknowledged before T must be there,
 * none sent after it, and the service must answer.
 *
 * It needs PostgreSQL's server binaries and pgBackRest, so it is a .ci.ts file (.ci/run runs it,
 * after installing them; `npx tap test/scripts/restore-drill.ci.ts` runs it by hand).
 */
import { spawnSync } from 'node:child_process';
import t from 'tap';
import { runCommand } from '../helpers/processes.ts';
import { requirePart, systemProgram } from '../helpers/system-parts.ts';

requirePart(
  t,
  systemProgram('pgbackrest') ? null : 'pgbackrest not found (apt-get install pgbackrest)',
);
requirePart(
  t,
  spawnSync('sh', ['-c', 'ls /usr/lib/postgresql/*/bin/pg_ctl']).status === 0 ||
    process.env.PG_BINDIR
    ? null
    : 'PostgreSQL server binaries not found (apt-get install postgresql)',
);

t.test('a restore to a point in time finds every write acknowledged before it', async (t) => {
  const ran = await runCommand(
    process.execPath,
    [
      '--import',
      'tsx',
      'scripts/restore-drill.ts',
      '--ports',
      process.env.TEST_PORTS ?? '20000-32000',
    ],
    process.cwd(),
  );
  t.equal(ran.code, 0, `the drill exits 0\n${ran.stderr}`);
  const summary = JSON.parse(ran.stdout) as {
    ok: boolean;
    failures: string[];
    creates: { acknowledged: number; beforeT: number; afterT: number; acrossT: number };
    restored: { beforeTFound: number; afterTFound: number; listings: number };
    answers: Record<string, number>;
    backups: { type: string }[];
    rpoMs: number;
    archiveTimeoutS: number;
    timings: Record<string, number>;
  };
  t.same(summary.failures, [], 'no check failed');
  t.ok(summary.creates.beforeT > 10 && summary.creates.afterT > 10, 'creates on both sides of T');
  t.equal(
    summary.restored.beforeTFound,
    summary.creates.beforeT,
    'every create acknowledged before T',
  );
  t.equal(summary.restored.afterTFound, 0, 'no create sent after T');
  const { listings } = summary.restored;
  t.ok(
    listings >= summary.creates.beforeT &&
      listings <= summary.creates.beforeT + summary.creates.acrossT,
    `no listing beyond those written before T and any in flight across it (${listings})`,
  );
  t.same(
    summary.answers,
    { health: 200, listingBeforeT: 200, listingAfterT: 404, newCreate: 201 },
    'the service answers on the restored database',
  );
  t.same(
    summary.backups.map((b) => b.type),
    ['full', 'diff'],
    'a full and a differential backup',
  );
  t.ok(
    summary.rpoMs <= summary.archiveTimeoutS * 1000 + 5000,
    `the last write archived within archive_timeout (${summary.rpoMs} ms)`,
  );
  t.comment(
    `${summary.creates.acknowledged} creates (${summary.creates.beforeT} before T); RPO ${summary.rpoMs} ms; ` +
      `restore ${summary.timings.restoreMs} ms, recovery ${summary.timings.postgresRecoveryMs} ms, ` +
      `service ${summary.timings.serviceStartMs} ms; answering ${summary.timings.rtoMs} ms after the wipe`,
  );
});
