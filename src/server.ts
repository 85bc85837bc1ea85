/**
 * The server entry: validate configuration, build the app, listen, and shut down
 * gracefully on SIGTERM/SIGINT or a fatal error (src/lib/shutdown.ts).
 */
import { buildApp } from './app.ts';
import { createFirstRunAccount, type FirstRunAccount } from './first-run.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { PgliteLockedError } from './db/pglite-lock.ts';
import { drainOnExit } from './lib/shutdown.ts';

function describeDatabase(config: Config): string {
  if (!config.databaseUrl) return `embedded PGlite in ${config.pgliteDir}`;
  if (config.databaseUrl === 'memory://') return 'in-memory PGlite (data is lost on exit)';
  return `PostgreSQL at ${new URL(config.databaseUrl).host}`;
}

function banner(base: string, config: Config, firstRun: FirstRunAccount | null): string {
  const lines = [
    '',
    `Marketplace listings API listening on ${base}`,
    '',
    `  Start here: ${base}/portal`,
    '  (the developer portal: sign up, create an app and a sandbox key, make your first listing)',
    '',
    `  database: ${describeDatabase(config)}`,
    `  health:   curl ${base}/api/v1/health`,
    `  OpenAPI:  ${base}/api/v1/openapi.json`,
    '',
  ];
  if (firstRun) {
    lines.push(
      'First run: created a demo developer, an app and a sandbox key (shown only this once;',
      'sign in to the portal with this username and password to see them):',
      `  username ${firstRun.username}   password ${firstRun.password}`,
      `  app id   ${firstRun.appId}`,
      `  sandbox key ${firstRun.sandboxKey}`,
      `  try:  curl -H "Authorization: Bearer ${firstRun.sandboxKey}" ${base}/api/v1/me`,
      '',
    );
  }
  lines.push(
    'More keys: the portal, or the admin CLI (docs/cli.md). The embedded database is single-process: stop the server',
    'before running `npm run admin`, or set DATABASE_URL=postgres://... to run both at once.',
    '',
  );
  return lines.join('\n') + '\n';
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`Configuration error: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }

  let app: Awaited<ReturnType<typeof buildApp>>;
  try {
    app = await buildApp(config);
  } catch (err) {
    if (err instanceof PgliteLockedError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }

  app.server.keepAliveTimeout = 72_000; // longer than common load balancers' idle timeouts
  app.server.headersTimeout = 75_000;
  app.server.requestTimeout = 30_000; // the whole request (headers and body) must arrive in 30 s
  // a connection silent both ways for 2 minutes (stalled client) is closed
  app.server.timeout = 120_000;

  // SIGTERM, SIGINT and fatal errors: one drain (src/lib/shutdown.ts), after SHUTDOWN_DELAY_MS of
  // serving on while a load balancer's health check takes the process out of rotation
  // (src/plugins/graceful-close.ts), each step within its share of SHUTDOWN_TIMEOUT_MS; the
  // deadline, the last resort if a step overruns anyway, is the two together.
  drainOnExit(app, config.shutdownDelayMs + config.shutdownTimeoutMs);

  const firstRun =
    config.databaseUrl === undefined && config.nodeEnv !== 'production'
      ? await createFirstRunAccount(app.services)
      : null;

  await app.listen({ port: config.port, host: config.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const base = config.baseUrl.replace(/:\d+$/, `:${port}`);
  process.stdout.write(banner(base, config, firstRun));
}

main().catch((err: unknown) => {
  process.stderr.write(`Failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
