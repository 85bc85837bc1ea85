/**
 * The server entry: validate configuration, build the app, listen, and shut down
 * gracefully on SIGTERM/SIGINT or a fatal error (src/lib/shutdown.ts).
 */
import { buildApp } from './app.ts';
import { createFirstRunAccount, type FirstRunAccount } from './first-run.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { PgliteLockedError } from './db/pglite-lock.ts';
import { wantsReadableLogs } from './lib/readable-log.ts';
import { drainOnExit } from './lib/shutdown.ts';
import type { PartitionMade } from './plugins/partitions.ts';

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
    `  health:   curl ${base}/api/v1/health?db=1`,
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

/**
 * The start's housekeeping in one line: migrations applied (the primary's and the request
 * log's database's), partitions made ahead (per table, src/plugins/partitions.ts).
 */
function startupSummary(migrations: number, partitions: readonly PartitionMade[]): string {
  const perTable = new Map<string, number>();
  for (const { database, table } of partitions) {
    const name = database === 'primary' ? table : `${database}.${table}`;
    perTable.set(name, (perTable.get(name) ?? 0) + 1);
  }
  const tables = [...perTable].map(([table, n]) => `${table} ${n}`).join(', ');
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  return [
    'start-up:',
    migrations ? `${plural(migrations, 'migration')} applied,` : 'no migration to apply,',
    partitions.length
      ? `${plural(partitions.length, 'partition')} made ahead (${tables})`
      : 'no partition to make',
  ].join(' ');
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
    // A person at a terminal gets readable lines; a pipe, a file or production, JSON lines.
    const readable = wantsReadableLogs(config.nodeEnv, process.stdout);
    app = await buildApp(config, {}, readable ? process.stdout : undefined);
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

  // Fastify logs a line once it listens; that line is the start-up summary, after the banner
  // (which says where it listens), so the first thing on the screen is the banner.
  let shown = false;
  await app.listen({
    port: config.port,
    host: config.host,
    listenTextResolver: (address) => {
      if (shown) return `also listening on ${address}`;
      shown = true;
      const bound = app.server.address();
      const port = typeof bound === 'object' && bound ? bound.port : config.port;
      process.stdout.write(banner(config.baseUrl.replace(/:\d+$/, `:${port}`), config, firstRun));
      return startupSummary(app.database.migrationsApplied ?? 0, app.partitionsMadeAtStart);
    },
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`Failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
