/** What the SDK's tests share. */
import { spawn } from 'node:child_process';
import path from 'node:path';
import type { Test } from 'tap';
import { MarketplaceApiError } from '../../sdk/src/index.ts';
import { waitUntil } from '../helpers/wait.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** The error a call rejects with, checked to be a MarketplaceApiError (fails if it resolves). */
export async function rejection(t: Test, pending: Promise<unknown>): Promise<MarketplaceApiError> {
  try {
    await pending;
  } catch (error) {
    t.ok(error instanceof MarketplaceApiError, 'a MarketplaceApiError');
    return error as MarketplaceApiError;
  }
  throw new Error('expected the call to fail');
}

/**
 * Starts the SDK's command (`marketplace-listings-sdk ARGS`) from source with `key` and `baseUrl`
 * in its environment and its own config folder; stops it (SIGINT) in teardown.
 */
export function runCli(
  t: Test,
  args: string[],
  setting: { key: string; baseUrl: string; configHome: string; env?: Record<string, string> },
) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'sdk/src/cli.ts', ...args], {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_OPTIONS: '',
      MARKETPLACE_KEY: setting.key,
      MARKETPLACE_URL: setting.baseUrl,
      XDG_CONFIG_HOME: setting.configHome,
      ...setting.env,
    },
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  let code: number | null | undefined;
  const exited = new Promise<number | null>((done) =>
    child.on('exit', (exitCode) => done((code = exitCode))),
  );
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
    await exited;
  });
  /** The exit code, or a failure if it runs on (as an old command that took the input did). */
  const exitCode = async () => {
    await waitUntil('the command to exit', () => code !== undefined, { timeoutMs: 30_000 });
    return code;
  };
  return { child, exited, exitCode, out: () => out, err: () => err };
}
