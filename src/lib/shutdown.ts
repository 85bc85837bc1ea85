/**
 * The process's one drain (docs/operations.md, "Graceful shutdown"), through close-with-grace,
 * the Fastify ecosystem's way: SIGTERM, SIGINT, an uncaught exception and an unhandled rejection
 * all run app.close (src/plugins/graceful-close.ts: each step within its share of
 * SHUTDOWN_TIMEOUT_MS, src/lib/drain.ts), then exit: 0 after a signal, 1 after a fatal error.
 *
 * - A second signal (or a second fatal error) while draining exits at once with code 1.
 * - A drain still running at the deadline exits with code 1 then (close-with-grace's `delay`,
 *   counted from the signal or the error): the last resort if a step overran anyway.
 * - A fatal error is logged first through the app's logger (its serializer and the last pass over
 *   each line drop credentials, statement values and raw request bytes: src/lib/logging.ts),
 *   then the in-flight work drains as for a signal: the process that broke stops taking
 *   requests, answers those it holds, and a process manager starts a fresh one.
 *
 * Every line is the app's (close-with-grace's own logger is off, so nothing goes to the console
 * unredacted).
 */
import closeWithGrace from 'close-with-grace';
import type { FastifyInstance } from 'fastify';

/**
 * Events close-with-grace listens to by default that keep Node's own handling here: the other
 * signals end the process at once, as they always did (only SIGTERM and SIGINT are documented to
 * drain), and `beforeExit` does not arise while the server listens.
 */
const NOT_DRAINED: closeWithGrace.AllEvents[] = [
  'SIGHUP',
  'SIGQUIT',
  'SIGILL',
  'SIGTRAP',
  'SIGABRT',
  'SIGBUS',
  'SIGFPE',
  'SIGSEGV',
  'SIGUSR2',
  'beforeExit',
];

/** Installs the drain for `app` (once, after it is built), with its deadline. */
export function drainOnExit(app: FastifyInstance, timeoutMs: number): void {
  closeWithGrace(
    {
      delay: timeoutMs,
      logger: false,
      skip: NOT_DRAINED,
      onSecondSignal: (signal) => app.log.warn({ signal }, 'second signal: exiting now'),
      onSecondError: (err) => app.log.fatal({ err }, 'second fatal error: exiting now'),
      onTimeout: () => app.log.error({ timeoutMs }, 'shutdown took too long: exiting now'),
    },
    async ({ signal, err }) => {
      const startedAt = Date.now();
      if (err) app.log.fatal({ err }, 'fatal error: finishing in-flight requests, then exiting 1');
      else app.log.info({ signal }, 'shutting down: finishing in-flight requests');
      try {
        await app.close();
      } catch (closeError) {
        app.log.error({ err: closeError }, 'error during shutdown');
        throw closeError;
      }
      app.log.info({ signal, tookMs: Date.now() - startedAt }, 'shut down');
    },
  );
}
