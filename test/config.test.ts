import { spawnSync } from 'node:child_process';
import t from 'tap';
import { ConfigError, loadConfig } from '../src/config.ts';

t.test('defaults follow docs/configuration.md', async (t) => {
  const config = loadConfig({});
  t.equal(config.port, 3000);
  t.equal(config.host, '127.0.0.1');
  t.equal(config.baseUrl, 'http://127.0.0.1:3000');
  t.equal(config.databaseUrl, undefined);
  t.equal(config.pgliteDir, './.data/pglite');
  t.equal(config.rateLimitMax, 300);
  t.equal(config.rateLimitWindowMs, 60000);
  t.equal(config.webhookTimeoutMs, 8000);
  t.same(config.webhookRetryScheduleS, [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400]);
  t.equal(config.webhookAllowPrivateNetworks, false);
  t.equal(config.sessionSecretConfigured, false, 'a development session secret is generated');
  t.ok(config.sessionSecret.length >= 32);
});

t.test(
  'long-poll places: the defaults of docs/configuration.md, and the keys keep a share',
  async (t) => {
    const config = loadConfig({});
    t.strictSame(
      [
        config.eventsWaitMax,
        config.eventsWaitMaxPerCredential,
        config.eventsWaitMaxPerUser,
        config.eventsWaitMaxPerApp,
        config.eventsWaitMaxPerOwner,
      ],
      [1000, 5, 5, 20, 50],
    );
    t.throws(
      () => loadConfig({ EVENTS_WAIT_MAX_PER_APP: '5' }),
      new ConfigError(
        "EVENTS_WAIT_MAX_PER_APP must be greater than EVENTS_WAIT_MAX_PER_CREDENTIAL (5): the app's keys keep that many of its places",
      ),
      'the app must keep places its tokens cannot take',
    );
    t.equal(
      loadConfig({ EVENTS_WAIT_MAX_PER_APP: '3', EVENTS_WAIT_MAX_PER_CREDENTIAL: '2' })
        .eventsWaitMaxPerApp,
      3,
    );
  },
);

t.test('values are parsed', async (t) => {
  const config = loadConfig({
    PORT: '8080',
    HOST: '0.0.0.0',
    BASE_URL: 'https://api.example.com/',
    DATABASE_URL: 'postgres://u@db:5432/x',
    WEBHOOK_RETRY_SCHEDULE: '1, 2,3',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    SESSION_SECRET: 'x'.repeat(40),
  });
  t.equal(config.port, 8080);
  t.equal(config.baseUrl, 'https://api.example.com', 'trailing slash removed');
  t.equal(config.databaseUrl, 'postgres://u@db:5432/x');
  t.same(config.webhookRetryScheduleS, [1, 2, 3]);
  t.equal(config.webhookAllowPrivateNetworks, true);
  t.equal(config.sessionSecretConfigured, true);
  t.equal(loadConfig({ DATABASE_URL: 'memory://' }).databaseUrl, 'memory://');
});

t.test('DATABASE_DIRECT_URL and DATABASE_PREPARED_STATEMENTS', async (t) => {
  const direct = loadConfig({ DATABASE_URL: 'postgres://u@db:5432/x' });
  t.equal(direct.databaseDirectUrl, undefined, 'no direct URL: DATABASE_URL carries everything');
  t.equal(direct.databasePreparedStatements, true, 'prepared by default');
  const pooled = loadConfig({
    DATABASE_URL: 'postgres://u@pooler:6432/x',
    DATABASE_DIRECT_URL: 'postgresql://u@db:5432/x',
  });
  t.equal(pooled.databaseDirectUrl, 'postgresql://u@db:5432/x');
  t.equal(pooled.databasePreparedStatements, false, 'a direct URL says DATABASE_URL is a pooler');
  for (const [value, expected] of [
    ['on', true],
    ['true', true],
    ['off', false],
    ['false', false],
  ] as const) {
    t.equal(
      loadConfig({
        DATABASE_URL: 'postgres://u@pooler:6432/x',
        DATABASE_DIRECT_URL: 'postgres://u@db:5432/x',
        DATABASE_PREPARED_STATEMENTS: value,
      }).databasePreparedStatements,
      expected,
      `${value} with a direct URL (PgBouncer 1.21+ with max_prepared_statements: on)`,
    );
    t.equal(
      loadConfig({ DATABASE_URL: 'postgres://u@db/x', DATABASE_PREPARED_STATEMENTS: value })
        .databasePreparedStatements,
      expected,
      `${value} without`,
    );
  }
});

t.test('every on/off variable reads one grammar: true/false, 1/0, on/off', async (t) => {
  for (const [value, expected] of [
    ['true', true],
    ['1', true],
    ['on', true],
    ['false', false],
    ['0', false],
    ['off', false],
  ] as const) {
    const config = loadConfig({
      WEBHOOK_WORKER: value,
      REQUEST_LOGS: value,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: value,
      DATABASE_PREPARED_STATEMENTS: value,
      SAVED_SEARCH_MATCHER: value,
    });
    t.strictSame(
      [
        config.webhookWorker,
        config.requestLogs,
        config.webhookAllowPrivateNetworks,
        config.databasePreparedStatements,
        config.savedSearchMatcher,
      ],
      [expected, expected, expected, expected, expected],
      value,
    );
  }
});

t.test('a bad value is one clear error naming the variable', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ PORT: 'abc' }, /^PORT must be an integer/],
    [{ PORT: '70000' }, /^PORT must be between/],
    [{ DATABASE_URL: 'mysql://x' }, /^DATABASE_URL must use postgres: or postgresql:/],
    [{ DATABASE_URL: 'not a url' }, /^DATABASE_URL must be a URL/],
    [{ REDIS_URL: 'http://x' }, /^REDIS_URL must use/],
    [{ RATE_LIMIT_MAX: '0' }, /^RATE_LIMIT_MAX must be between/],
    [{ WEBHOOK_RETRY_SCHEDULE: '5,soon' }, /^WEBHOOK_RETRY_SCHEDULE must be/],
    [
      { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'yes' },
      /^WEBHOOK_ALLOW_PRIVATE_NETWORKS must be true or false/,
    ],
    [{ NODE_ENV: 'production' }, /^SESSION_SECRET is required when NODE_ENV=production/],
    [{ SESSION_SECRET: 'short' }, /^SESSION_SECRET must be at least 32 characters/],
    [{ BASE_URL: 'ftp://x' }, /^BASE_URL must use/],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL must be one of/],
    [
      { DATABASE_URL: 'postgres://u@pooler:6432/x', DATABASE_DIRECT_URL: 'mysql://x' },
      /^DATABASE_DIRECT_URL must use postgres: or postgresql:/,
    ],
    [{ DATABASE_DIRECT_URL: 'postgres://u@db/x' }, /^DATABASE_DIRECT_URL needs a postgres:\/\//],
    [
      { DATABASE_URL: 'memory://', DATABASE_DIRECT_URL: 'postgres://u@db/x' },
      /^DATABASE_DIRECT_URL needs a postgres:\/\/ DATABASE_URL/,
    ],
    [
      { DATABASE_PREPARED_STATEMENTS: 'yes' },
      /^DATABASE_PREPARED_STATEMENTS must be true or false \(or 1\/0, on\/off\)/,
    ],
  ];
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env));
  }
  t.ok(new ConfigError('x') instanceof Error);
});

t.test('a read replica (DATABASE_REPLICA_*) only beside a PostgreSQL DATABASE_URL', async (t) => {
  t.equal(loadConfig({}).databaseReplica, null, 'none by default');
  t.equal(loadConfig({ DATABASE_URL: 'postgres://u@db/x' }).databaseReplica, null);
  t.same(
    loadConfig({
      DATABASE_URL: 'postgres://u@db/x',
      DATABASE_REPLICA_URL: 'postgresql://u@replica:5433/x',
    }).databaseReplica,
    { url: 'postgresql://u@replica:5433/x', maxLagMs: 5000, poolSize: 5 },
    'the bound defaults to the anonymous max-age, 5 s',
  );
  t.same(
    loadConfig({
      DATABASE_URL: 'postgres://u@db/x',
      DATABASE_REPLICA_URL: 'postgres://u@replica/x',
      DATABASE_REPLICA_MAX_LAG_MS: '1500',
      DATABASE_REPLICA_POOL_SIZE: '3',
    }).databaseReplica,
    { url: 'postgres://u@replica/x', maxLagMs: 1500, poolSize: 3 },
  );
  const embedded = /^DATABASE_REPLICA_URL needs a PostgreSQL DATABASE_URL/;
  const primary = { DATABASE_URL: 'postgres://u@db/x' };
  const cases: [Record<string, string>, RegExp][] = [
    [{ DATABASE_REPLICA_URL: 'postgres://u@replica/x' }, embedded],
    [{ DATABASE_URL: 'memory://', DATABASE_REPLICA_URL: 'postgres://u@replica/x' }, embedded],
    [
      { ...primary, DATABASE_REPLICA_URL: 'mysql://replica/x' },
      /^DATABASE_REPLICA_URL must use postgres: or postgresql:/,
    ],
    [{ ...primary, DATABASE_REPLICA_URL: 'replica' }, /^DATABASE_REPLICA_URL must be a URL/],
    [{ DATABASE_REPLICA_MAX_LAG_MS: '5s' }, /^DATABASE_REPLICA_MAX_LAG_MS must be an integer/],
    [{ DATABASE_REPLICA_MAX_LAG_MS: '50' }, /^DATABASE_REPLICA_MAX_LAG_MS must be between/],
    [{ DATABASE_REPLICA_POOL_SIZE: '0' }, /^DATABASE_REPLICA_POOL_SIZE must be between/],
  ];
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env));
  }
});

t.test('a request log database (REQUEST_LOG_DATABASE_URL) only beside PostgreSQL', async (t) => {
  t.equal(
    loadConfig({}).requestLogDatabaseUrl,
    undefined,
    'none by default: the log on the primary',
  );
  t.equal(
    loadConfig({
      DATABASE_URL: 'postgres://u@db/x',
      REQUEST_LOG_DATABASE_URL: 'postgresql://u@l/y',
    }).requestLogDatabaseUrl,
    'postgresql://u@l/y',
  );
  const embedded = /^REQUEST_LOG_DATABASE_URL needs a PostgreSQL DATABASE_URL/;
  const primary = { DATABASE_URL: 'postgres://u@db/x' };
  const cases: [Record<string, string>, RegExp][] = [
    [{ REQUEST_LOG_DATABASE_URL: 'postgres://u@log/y' }, embedded],
    [{ DATABASE_URL: 'memory://', REQUEST_LOG_DATABASE_URL: 'postgres://u@log/y' }, embedded],
    [
      { ...primary, REQUEST_LOG_DATABASE_URL: 'mysql://log/y' },
      /^REQUEST_LOG_DATABASE_URL must use postgres: or postgresql:/,
    ],
    [{ ...primary, REQUEST_LOG_DATABASE_URL: 'log' }, /^REQUEST_LOG_DATABASE_URL must be a URL/],
    [
      { ...primary, REQUEST_LOG_DATABASE_URL: primary.DATABASE_URL },
      /^REQUEST_LOG_DATABASE_URL must name another database than DATABASE_URL/,
    ],
  ];
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env));
  }
});

t.test('the server refuses to start on a bad value with one line naming it', async (t) => {
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    env: { ...process.env, PORT: 'abc', DATABASE_URL: 'memory://' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  t.equal(result.status, 1);
  t.equal(result.stderr.trim(), 'Configuration error: PORT must be an integer, got "abc"');
  t.equal(result.stdout, '');
});
