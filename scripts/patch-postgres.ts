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
 * And in its queue (queue.js), which holds the pool's connections by state (open, busy, ...) and
 * the queries waiting for one: `shift` leaves a hole at the front and only starts a fresh array
 * once the queue runs empty, and `remove` searched the whole array, holes included. Every query
 * moves its connection between queues, which calls `remove`; under load that never lets the busy
 * queue run empty, the array grew by one slot per query and each query scanned all of it (277,000
 * slots after 290,000 queries in 16 s, and the queries a second fell by two thirds meanwhile:
 * docs/performance.md). Patched:
 * 4. `remove` searches from the front of the queue, not from the holes before it;
 * 5. `shift` drops the holes once there are more than 1,024 of them.
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

const REMOVE_BEFORE = `      const index = xs.indexOf(x)
      return index === -1
        ? null
        : (xs.splice(index, 1), x)`;
const REMOVE_AFTER = `      const at = xs.indexOf(x, index) ${MARKER}
      return at === -1
        ? null
        : (xs.splice(at, 1), x)`;

const SHIFT_BEFORE = `      if (index === xs.length) {
        index = 0
        xs = []
      } else {`;
const SHIFT_AFTER = `      if (index === xs.length) {
        index = 0
        xs = []
      } else if (index > 1024) { ${MARKER}
        xs = xs.slice(index)
        index = 0
      } else {`;

/** Each hunk: the upstream text, the patched text, and how often it occurs. */
type Hunk = [before: string, after: string, times: number];

/** The files patched in each build, and their hunks. */
const PATCHES: Record<string, Hunk[]> = {
  'connection.js': [
    [GUARD_BEFORE, GUARD_AFTER, 1],
    [RESET_BEFORE, RESET_AFTER, 2],
    [CLOSED_BEFORE, CLOSED_AFTER, 1],
  ],
  'queue.js': [
    [REMOVE_BEFORE, REMOVE_AFTER, 1],
    [SHIFT_BEFORE, SHIFT_AFTER, 1],
  ],
};

export const PATCHED_FILES = Object.keys(PATCHES);

function count(text: string, part: string): number {
  return text.split(part).length - 1;
}

/**
 * Applies the hunks of `name` (connection.js, queue.js) not applied yet; throws when the source
 * matches neither side of one.
 */
export function patchSource(name: string, source: string, file: string): string {
  const hunks = PATCHES[name];
  if (!hunks) throw new Error(`patch-postgres: no patch for ${name}`);
  let patched = source;
  for (const [before, after, times] of hunks) {
    if (count(patched, after) === times) continue;
    if (count(patched, before) !== times) {
      throw new Error(
        `${file} does not look like postgres.js 3.4.9's ${name}: the fixes of scripts/patch-postgres.ts cannot be applied. ` +
          'Check whether the new release fixes porsager/postgres#1208 and the queue, and update or remove the script.',
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
    let changed = false;
    for (const name of PATCHED_FILES) {
      const file = join(root, build, name);
      const source = readFileSync(file, 'utf8');
      const next = patchSource(name, source, file);
      if (next !== source) {
        writeFileSync(file, next);
        changed = true;
      }
    }
    if (changed) patched += 1;
  }
  process.stdout.write(
    `patch-postgres: postgres ${version}: ${patched ? `patched ${patched} build(s)` : 'already patched'}\n`,
  );
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
