/**
 * Tests that need a part of the system npm does not install (Chromium, redis-server and the
 * PostgreSQL server binaries, Python's Prometheus parser) skip on a machine without it, with a
 * reason that starts with MISSING_PART and names the package to install: the README's
 * `npm install && npm test` passes on a machine with only Node and npm, and says what it left
 * out. .ci/run installs every part and fails on any such skip.
 */
import { spawnSync } from 'node:child_process';
import type { Test } from 'tap';

export const MISSING_PART = 'missing system part';

/**
 * A test file's first line: with the part missing (`missing` says which and how to install it)
 * the file ends as one visible skip, and under CI it fails instead.
 */
export function requirePart(t: Test, missing: string | null): void {
  if (missing === null) return;
  if (process.env.CI) throw new Error(`${missing}: .ci/run installs it`);
  t.plan(0, `${MISSING_PART}: ${missing}`);
  process.exit(0);
}

/**
 * Where a system program is (on the PATH, else in /usr/sbin or /usr/bin, where Debian puts
 * pgbouncer, haproxy and pgbackrest), or null when it is not installed.
 */
export function systemProgram(name: string): string | null {
  const found = spawnSync(
    'sh',
    ['-c', `command -v ${name} || ls /usr/sbin/${name} 2>/dev/null || ls /usr/bin/${name}`],
    { encoding: 'utf8' },
  );
  return found.status === 0 && found.stdout.trim() ? found.stdout.trim().split('\n')[0]! : null;
}
