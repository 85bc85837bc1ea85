/**
 * Debian's headless Chromium for browser tests (TOOLING.md): where it is, and the flags that
 * keep it from reaching out to the closed network. Each test adds its own flags after these.
 */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

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
