/**
 * Waiting in tests. Tests wait on the condition they are about (`waitUntil`), never on time;
 * `deadline` bounds a promise that must settle. `sleep` is left for the few tests whose subject
 * is time itself (a window, a bound, "nothing more happens"), each with a comment saying so.
 */

/** Resolves after `ms`: only where time itself is the subject (say why at the call). */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface WaitOptions {
  /** Give up (throw) after this long; default 15 s. */
  timeoutMs?: number;
  /** Check this often; default 25 ms. */
  everyMs?: number;
}

/**
 * Checks `check` until it returns a truthy value and returns that value; throws after
 * `timeoutMs` with `what` in the message.
 */
export async function waitUntil<T>(
  what: string,
  check: () => T | Promise<T>,
  { timeoutMs = 15_000, everyMs = 25 }: WaitOptions = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * `promise`, or a rejection naming `what` if it has not settled within `ms` (then `onTimeout`
 * runs first, for example to kill a child process).
 */
export function deadline<T>(
  what: string,
  promise: Promise<T>,
  ms: number,
  onTimeout?: () => void,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, fail) => {
      timer = setTimeout(() => {
        onTimeout?.();
        fail(new Error(`${what}: not done within ${ms} ms`));
      }, ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
