/**
 * Debian's headless Chromium for browser tests (TOOLING.md): where it is, and the flags that
 * keep it from reaching out to the closed network. Each test adds its own flags after these.
 */
import { existsSync } from 'node:fs';
import type { Test } from 'tap';
import { requirePart } from './system-parts.ts';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** A browser test's first line: without Chromium, a visible skip (a failure under CI). */
export function requireChromium(t: Test): void {
  requirePart(
    t,
    existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM} (apt-get install -y chromium)`,
  );
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
