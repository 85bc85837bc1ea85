import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * PGlite is single-process: two processes on one data directory corrupt it. A lock file
 * created with O_EXCL holds the owner's pid; a lock whose pid is gone is stale and taken over.
 */
export class PgliteLockedError extends Error {
  override name = 'PgliteLockedError';
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function acquirePgliteLock(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const lockPath = join(dataDir, '..', `${dataDir.split(/[\\/]/).filter(Boolean).pop()}.lock`);
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      const fd = openSync(lockPath, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(lockPath, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number.parseInt(readFileSync(lockPath, 'utf8'), 10);
      if (Number.isInteger(pid) && alive(pid)) {
        throw new PgliteLockedError(
          `The embedded database at ${dataDir} is in use by another process (pid ${pid}). ` +
            'Stop it first, or set DATABASE_URL to a PostgreSQL server to run several processes.',
        );
      }
      rmSync(lockPath, { force: true }); // stale: its owner is gone
    }
  }
  throw new PgliteLockedError(`Could not lock the embedded database at ${dataDir}`);
}
