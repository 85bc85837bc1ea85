/**
 * Patches postgres.js 3.4.9 (run by `npm install` / `npm ci` as postinstall) against a known
 * crash when PostgreSQL goes away: a write scheduled on a connection whose socket has just
 * closed runs `socket.write` on null from a setImmediate callback, an uncaught TypeError that
 * takes the whole process down (porsager/postgres#1154, #1208; fixes proposed in #1168, #1209,
 * not released). Our fault tests (test/hardening/faults.test.ts) hit it on every PostgreSQL
 * stop under load: a transaction's next statement is written to the closed connection.
 *
 * The patch, in the three builds (ESM, CommonJS, Cloudflare):
 * 1. nextWrite on a closed connection settles its queries with CONNECTION_CLOSED (a 503 here)
 *    instead of throwing;
 * 2. closing or terminating a connection also forgets the pending write: the stale timer would
 *    otherwise stop every later small write from being flushed (the reconnected connection
 *    hangs until connect_timeout), and stale bytes would precede the next startup message;
 * 3. a connection closed after a socket error also rejects the queries sent between the error
 *    and the close (a transaction's next statement): upstream leaves them pending forever, and
 *    the request waiting on them never gets an answer.
 *
 * Idempotent. Fails loudly when the code no longer matches (a new postgres.js release): then
 * check whether upstream fixed it and drop this script, or adapt it.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const MARKER = '/* patched by scripts/patch-postgres.ts */';

const GUARD_BEFORE = `  function nextWrite(fn) {
    const x = socket.write(chunk, fn)`;
const GUARD_AFTER = `  function nextWrite(fn) {
    if (socket === null) { ${MARKER}
      nextWriteTimer !== null && clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      return false
    }
    const x = socket.write(chunk, fn)`;

const RESET_BEFORE = `    clearImmediate(nextWriteTimer)\n    `;
const RESET_AFTER = `    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null ${MARKER}\n    `;

// An `if` statement, not an expression statement starting with "(": the line before is
// `return reconnect()`, and automatic semicolon insertion would call its result.
const CLOSED_BEFORE = `    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))`;
const CLOSED_AFTER = `    if (!hadError || sent.length) ${MARKER}
      (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))`;

/** Each hunk: the upstream text, the patched text, and how often it occurs. */
const HUNKS: [before: string, after: string, times: number][] = [
  [GUARD_BEFORE, GUARD_AFTER, 1],
  [RESET_BEFORE, RESET_AFTER, 2],
  [CLOSED_BEFORE, CLOSED_AFTER, 1],
];

function count(text: string, part: string): number {
  return text.split(part).length - 1;
}

/** Applies the hunks not applied yet; throws when the source matches neither side of one. */
export function patchConnectionSource(source: string, file: string): string {
  let patched = source;
  for (const [before, after, times] of HUNKS) {
    if (count(patched, after) === times) continue;
    if (count(patched, before) !== times) {
      throw new Error(
        `${file} does not look like postgres.js 3.4.9's connection.js: the crash fix of scripts/patch-postgres.ts cannot be applied. ` +
          'Check whether the new release fixes porsager/postgres#1208 and update or remove the script.',
      );
    }
    patched = patched.replaceAll(before, after);
  }
  return patched;
}

function main(): void {
  const require = createRequire(import.meta.url);
  let entry: string;
  try {
    entry = require.resolve('postgres'); // <root>/cjs/src/index.js (no ./package.json export)
  } catch {
    process.stdout.write('patch-postgres: postgres is not installed, nothing to patch\n');
    return;
  }
  const isPackageRoot = (dir: string) =>
    existsSync(join(dir, 'package.json')) &&
    (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string }).name ===
      'postgres';
  let root = dirname(entry);
  while (!isPackageRoot(root) && dirname(root) !== root) root = dirname(root);
  const version = (
    JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }
  ).version;
  let patched = 0;
  for (const build of ['src', 'cjs/src', 'cf/src']) {
    const file = join(root, build, 'connection.js');
    const source = readFileSync(file, 'utf8');
    const next = patchConnectionSource(source, file);
    if (next !== source) {
      writeFileSync(file, next);
      patched += 1;
    }
  }
  process.stdout.write(
    `patch-postgres: postgres ${version}: ${patched ? `patched ${patched} build(s)` : 'already patched'}\n`,
  );
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
