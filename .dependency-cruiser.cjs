/**
 * The layers of src/ and the one direction imports may run (docs/architecture.md):
 *
 *   server, cli  ->  app  ->  doors (routes, pages, OAuth endpoints)  ->  services
 *   ->  repositories  ->  db
 *
 * with the cross-cutting plugins (src/plugins) beside the doors, and the shared modules
 * (src/lib, src/generated, errors.ts, access.ts, config.ts) under everything. `npm run
 * lint:deps` fails on any import that runs upward. Type-only imports are checked too, and there
 * is no exception: the doors and the operations binding both take the typed `Handlers` from
 * src/lib/handlers.ts, and the services plugin, which builds the composition root, sits beside
 * src/app.ts. Row types are the schema's (src/db/schema.ts), so a page that shows a row does
 * not import its repository.
 */

/** Route handlers, pages and the OAuth endpoints: what a request reaches first. */
const DOORS = [
  '-(routes|handlers)\\.ts$',
  '^src/routes\\.ts$',
  '^src/portal/',
  '^src/web/(login|html|web-context|csrf|forms|web-plugin|account-apps)\\.ts$',
  '^src/oauth/(authorize|token|revoke|userinfo|metadata|views|account-apps|client-auth|oauth-plugin)\\.ts$',
  '^src/system/',
  '^src/webhooks/webhooks-plugin\\.ts$',
  '^src/saved-searches/matcher-plugin\\.ts$',
];
const APP = ['^src/app\\.ts$', '^src/first-run\\.ts$', '^src/services-plugin\\.ts$'];
const ENTRIES = ['^src/server\\.ts$', '^src/cli/'];
const PLUGINS = ['^src/plugins/'];
const SERVICES = ['-service\\.ts$', '^src/services\\.ts$'];
const REPOSITORIES = ['-repository\\.ts$'];

const upward = (name, comment, from, to) => ({
  name,
  comment,
  severity: 'error',
  from: { path: from },
  to: { path: to },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle means two modules are one; split what they share into a lower module.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    upward('entries-are-entries', 'Nothing imports the server or the CLI.', '^src/', ENTRIES),
    upward(
      'app-from-entries-only',
      'Only server.ts and tests build the app.',
      [...DOORS, ...PLUGINS, ...SERVICES, ...REPOSITORIES, '^src/(lib|db|generated)/'],
      APP,
    ),
    upward('plugins-beside-doors', 'Cross-cutting plugins never import a door.', PLUGINS, DOORS),
    upward(
      'doors-beside-plugins',
      'Doors never import a plugin: their handler types are src/lib/handlers.ts; what plugins ' +
        'decorate reaches them on the request or the instance.',
      DOORS,
      PLUGINS,
    ),
    upward(
      'plugins-below-the-root',
      'Plugins never import the composition root (src/services.ts): the services plugin that ' +
        'builds it sits beside src/app.ts (src/services-plugin.ts).',
      PLUGINS,
      ['^src/services\\.ts$'],
    ),
    upward(
      'plugins-take-services-from-the-root',
      'Plugins use the services built by createServices (src/services.ts), never a repository.',
      PLUGINS,
      REPOSITORIES,
    ),
    upward(
      'doors-call-services',
      'Handlers and pages call services, never a repository.',
      DOORS,
      REPOSITORIES,
    ),
    upward('services-below-doors', 'Services never import a door, a plugin or the app.', SERVICES, [
      ...DOORS,
      ...PLUGINS,
      ...APP,
    ]),
    upward(
      'repositories-below-services',
      'Repositories import only the database and shared modules.',
      REPOSITORIES,
      [...DOORS, ...PLUGINS, ...APP, ...SERVICES],
    ),
    upward('db-is-the-floor', 'The database layer imports only shared modules.', '^src/db/', [
      '^src/(?!db/|lib/|generated/|errors\\.ts|config\\.ts|project-files\\.ts)',
    ]),
    upward(
      'shared-is-shared',
      'src/lib, errors.ts and access.ts import only shared modules.',
      ['^src/lib/', '^src/errors\\.ts$', '^src/access\\.ts$'],
      ['^src/(?!lib/|generated/|errors\\.ts|access\\.ts|config\\.ts|project-files\\.ts)'],
    ),
    upward(
      'failures-over-shared',
      'The one mapping of failures (src/failures.ts) imports the shared modules and the ' +
        "database's classification of driver errors (db/errors.ts: SQLSTATEs, no database).",
      '^src/failures\\.ts$',
      ['^src/(?!lib/|generated/|errors\\.ts|config\\.ts|db/errors\\.ts$)'],
    ),
    upward(
      'generated-imports-nothing',
      'Generated code imports only generated code.',
      '^src/generated/',
      '^src/(?!generated/)',
    ),
    upward(
      'sdk-stands-alone',
      'The SDK package (sdk/) ships to consumers: it imports only its own files and openapi-fetch.',
      '^sdk/src/',
      '^src/',
    ),
    upward(
      'server-without-sdk',
      'The server does not use the SDK package: it is a client of the server, not a part of it.',
      '^src/',
      '^sdk/',
    ),
    upward(
      'product-without-bench',
      'The benchmark (bench/, its own workspace) measures the server from outside: nothing in src/ imports it.',
      '^src/',
      '^bench/',
    ),
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist|coverage)' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
