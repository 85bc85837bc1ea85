/**
 * Debian's headless Chromium for browser tests, driven by playwright-core: where it is, the
 * flags that keep it from reaching out (the test network is closed), and openChromium(), the
 * one way the browser tests start it, open a page and take screenshots into test-artifacts/.
 * Chromium is a system part (README: apt-get install chromium); without it the test is a
 * visible skip (a failure under CI).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { Test } from 'tap';
import { requirePart } from './system-parts.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Where screenshots go: test-artifacts/ at the project's root. */
const ARTIFACTS = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../test-artifacts',
);

/** A browser test's first line: without Chromium, a visible skip (a failure under CI). */
export function requireChromium(t: Test): void {
  requirePart(
    t,
    existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM} (apt-get install -y chromium)`,
  );
}

const CHROMIUM_ARGS: readonly string[] = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface ChromiumOptions {
  /** Default 1280 x 900. */
  viewport?: { width: number; height: number };
  /** Flags after CHROMIUM_ARGS. */
  args?: readonly string[];
  /**
   * A profile of its own in a temporary directory (launchPersistentContext, removed in
   * teardown): for permissions such as the clipboard's. No `browser` then (one context only).
   */
  profile?: boolean;
  /** Screenshots are test-artifacts/<prefix><name>.png. */
  shotPrefix?: string;
}

export interface OpenChromium {
  /** Undefined with `profile`: more contexts come from `browser.newContext()` otherwise. */
  browser: Browser | undefined;
  context: BrowserContext;
  page: Page;
  /** A screenshot of `page` (or `of`): test-artifacts/<prefix><name>.png, full page by default. */
  shot(name: string, options?: { fullPage?: boolean; of?: Page }): Promise<Buffer>;
}

/** Launches Chromium, with one context and one page, all closed in teardown. */
export async function openChromium(
  t: Test,
  options: ChromiumOptions & { profile: true },
): Promise<OpenChromium & { browser: undefined }>;
export async function openChromium(
  t: Test,
  options?: ChromiumOptions & { profile?: false },
): Promise<OpenChromium & { browser: Browser }>;
export async function openChromium(t: Test, options: ChromiumOptions = {}): Promise<OpenChromium> {
  const { viewport = { width: 1280, height: 900 }, args = [], shotPrefix = '' } = options;
  const launch = { executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS, ...args] };
  let browser: Browser | undefined;
  let context: BrowserContext;
  if (options.profile) {
    const profile = mkdtempSync(path.join(tmpdir(), 'chromium-'));
    context = await chromium.launchPersistentContext(profile, { ...launch, viewport });
    t.teardown(async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    });
  } else {
    const launched = await chromium.launch(launch);
    browser = launched;
    t.teardown(() => launched.close());
    context = await launched.newContext({ viewport });
  }
  const page = context.pages()[0] ?? (await context.newPage());
  mkdirSync(ARTIFACTS, { recursive: true });
  const shot = (name: string, { fullPage = true, of = page } = {}) =>
    of.screenshot({ path: path.join(ARTIFACTS, `${shotPrefix}${name}.png`), fullPage });
  return { browser, context, page, shot };
}
