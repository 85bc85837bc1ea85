/**
 * Graceful shutdown's budget (src/plugins/graceful-close.ts, docs/operations.md): each close
 * step ends by its share of SHUTDOWN_TIMEOUT_MS, counted from the start of the close.
 */

/** Shares of SHUTDOWN_TIMEOUT_MS, from the start of the close, by which each step has ended. */
export const DRAIN_SHARES = {
  /** Requests in flight are answered, or their connections closed. */
  requests: 0.5,
  /** The webhook attempts in flight are answered, or cut short and recorded. */
  webhooks: 0.6,
  /**
   * The saved searches' matcher's passes in flight have committed (one is short:
   * matcher-worker.ts);
   * one still running is rolled back when the pools end, and its listings matched again.
   */
  matches: 0.6,
  /** The request log's last entries are written, or counted as lost. */
  requestLog: 0.8,
  /** The database pools have ended (their last statements are cut short). */
  pools: 0.9,
} as const;

/** Statements still running when a pool ends get at most this long. */
export const POOL_GRACE_MS = 5000;

/** Settles with `work`, or with 'cut' once `ms` have passed (the work goes on unawaited). */
export async function within<T>(work: Promise<T>, ms: number): Promise<T | 'cut'> {
  let timer: NodeJS.Timeout | undefined;
  const cut = new Promise<'cut'>((resolve) => {
    timer = setTimeout(() => resolve('cut'), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work, cut]);
  } finally {
    clearTimeout(timer);
  }
}
