/**
 * Debian's headless Chromium for browser tests (TOOLING.md): where it is, and the flags that
 * keep it from reaching out to the closed network. Each test adds its own flags after these.
 */
import { existsSync } from 'node:fs';
import type { Test } from 'tap';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * A browser test's first line: without Chromium it ends the file as a visible skip naming the
 * package to install (the README's `npm test` on a machine with only Node), and under CI, which
 * installs it (.ci/run), it fails instead.
 */
export function requireChromium(t: Test): void {
  if (existsSync(CHROMIUM)) return;
  if (process.env.CI)
    throw new Error(`${CHROMIUM} is missing: .ci/run installs it (apt-get install -y chromium)`);
  t.plan(0, `no Chromium at ${CHROMIUM} (apt-get install -y chromium)`);
  process.exit(0);
}

export const CHROMIUM_ARGS: readonly string[] = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
