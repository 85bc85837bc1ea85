import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { openDatabase } from '../../src/db/client.ts';
import { acquirePgliteLock, PgliteLockedError } from '../../src/db/pglite-lock.ts';

t.test('a second process is refused the same embedded database directory', async (t) => {
  const dir = join(mkdtempSync(join(tmpdir(), 'pglite-lock-')), 'db');
  // A real second process opens the directory and holds it until told to stop.
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '-e',
      `import('./src/db/client.ts').then(async ({ openDatabase }) => {
        const h = await openDatabase({ databaseUrl: undefined, pgliteDir: ${JSON.stringify(dir)} });
        process.stdout.write('ready\\n');
        process.stdin.once('data', async () => { await h.close(); process.exit(0); });
      })`,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && resolve());
    child.on('exit', (code) => reject(new Error(`child exited early with ${code}`)));
  });

  await t.rejects(openDatabase({ databaseUrl: undefined, pgliteDir: dir }), {
    name: 'PgliteLockedError',
    message: /in use by another process \(pid \d+\).*DATABASE_URL/,
  });

  child.stdin.write('stop\n');
  await new Promise((resolve) => child.on('exit', resolve));

  // Once the other process is gone, the directory opens and keeps its data.
  const handle = await openDatabase({ databaseUrl: undefined, pgliteDir: dir });
  t.ok(await handle.ping());
  await handle.close();
});

t.test('a stale lock left by a dead process is taken over', async (t) => {
  const dir = join(mkdtempSync(join(tmpdir(), 'pglite-lock-')), 'db');
  const release = acquirePgliteLock(dir);
  release();
  writeFileSync(`${dir}.lock`, '2147483646'); // no such pid
  const again = acquirePgliteLock(dir);
  t.throws(() => acquirePgliteLock(dir), PgliteLockedError, 'held by this live process now');
  again();
});
