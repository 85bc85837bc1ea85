/**
 * Child processes of tests: a free loopback port to start them on, and the server built as
 * `npm start` builds and runs it (scripts/build.mjs, then node on the bundle).
 */
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

/** A loopback port that was free a moment ago (for a server that must know its port before it starts). */
export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.once('error', fail);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (address && typeof address === 'object' ? done(address.port) : fail(new Error('no port'))));
    });
  });
}

let built: string | undefined;

/**
 * `node` arguments that start the server as `npm start` does: bundled by scripts/build.mjs, run
 * with source maps. Each test process builds its own copy under dist/ (built once, removed at
 * exit), so test files running in parallel never start a bundle another one is rewriting.
 */
export function serverCommand(): string[] {
  if (built === undefined) {
    const outfile = join(ROOT, 'dist', `test-${process.pid}`, 'server.js');
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs'), '--outfile', outfile], { cwd: ROOT, stdio: 'inherit' });
    process.once('exit', () => rmSync(join(ROOT, 'dist', `test-${process.pid}`), { recursive: true, force: true }));
    built = outfile;
  }
  return ['--enable-source-maps', built];
}
