/**
 * The layers of src/ and the one direction imports may run (docs/architecture.md):
 *
 *   server, cli  ->  app  ->  doors (routes, pages, OAuth endpoints, feature plugins)
 *   ->  services, workers  ->  repositories  ->  domain  ->  db  ->  shared
 *
 * with the cross-cutting plugins (src/plugins) beside the doors. A file's layer is its folder
 * (src/cli, src/plugins, src/portal, src/system, src/db, src/lib, src/generated) or, in a
 * feature folder, its role by suffix: -routes/-handlers/-plugin (doors), -service (services),
 * -worker/-buffer (background workers, beside the services), -repository/-statement/-partitions
 * (SQL), and no suffix: the feature's domain (rules, views, codecs; no database, no Fastify
 * instance), which imports only the shared modules, other domain modules and the database's
 * row types and SQL helpers. The shared modules are src/lib, src/generated, errors.ts,
 * access.ts, config.ts, failures.ts and project-files.ts. `npm run lint:deps` fails on any
 * import that runs upward and on any file of src/ in no layer (a new folder or top-level file
 * is given one here first). Type-only imports are checked too, and there is no exception: the
 * doors and the operations binding both take the typed `Handlers` from src/lib/handlers.ts,
 * and the services plugin, which builds the composition root, sits beside src/app.ts. Row
 * types are the schema's or the domain's, so a page that shows a row does not import its
 * repository.
 */

/** Route handlers, pages, the OAuth endpoints and feature plugins: what a request reaches first. */
const DOORS = [
  '-(routes|handlers)\\.ts$',
  '^src/routes\\.ts$',
  '^src/portal/',
  '^src/web/(login|html|web-context|csrf|forms|account-apps|site-nav)\\.ts$',
  '^src/oauth/(authorize|token|revoke|userinfo|metadata|views|account-apps|client-auth)\\.ts$',
  '^src/system/',
  '^src/(?!plugins/)[^/]+/[^/]+-plugin\\.ts$',
];
const APP = ['^src/app\\.ts$', '^src/first-run\\.ts$', '^src/services-plugin\\.ts$'];
const ENTRIES = ['^src/server\\.ts$', '^src/cli/'];
const PLUGINS = ['^src/plugins/'];
const SERVICES = ['-service\\.ts$', '^src/services\\.ts$'];
/** Background loops started by the services or a plugin: the matcher, deliveries, log writes. */
const WORKERS = ['-(worker|buffer)\\.ts$'];
const REPOSITORIES = ['-(repository|statement|partitions)\\.ts$'];
/** The feature folders; what has no role suffix in one is its domain. */
const FEATURES =
  '^src/(accounts|apps|audit|events|listings|oauth|request-logs|saved-searches|web|webhooks)/';
const ROLES = [...DOORS, ...SERVICES, ...WORKERS, ...REPOSITORIES];
const DB = ['^src/db/'];
/** What the domain may take of the database: row types, table definitions, SQL helpers. */
const DB_TYPES = '^src/db/(?!(rows|schema|outbox-schema)\\.ts$)';
const SHARED = [
  '^src/(lib|generated)/',
  '^src/(errors|access|config|failures|project-files)\\.ts$',
];
const LAYERED = [...ENTRIES, ...APP, ...PLUGINS, ...ROLES, FEATURES, ...DB, ...SHARED];
const UNLAYERED = { path: '^src/', pathNot: LAYERED };
const DOMAIN = { path: FEATURES, pathNot: ROLES };

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
      [...DOORS, ...PLUGINS, ...SERVICES, ...WORKERS, ...REPOSITORIES, FEATURES, ...DB, ...SHARED],
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
      'workers-beside-services',
      'Workers import repositories, the domain and the database, never a door, a plugin, a ' +
        'service or the app: the services (or a plugin) start them.',
      WORKERS,
      [...DOORS, ...PLUGINS, ...APP, ...SERVICES],
    ),
    upward(
      'repositories-below-services',
      'Repositories import only the domain, the database and shared modules.',
      REPOSITORIES,
      [...DOORS, ...PLUGINS, ...APP, ...SERVICES, ...WORKERS],
    ),
    {
      name: 'domain-under-repositories',
      comment:
        "A feature's domain imports only the shared modules, other domain modules and the " +
        "database's row types and SQL helpers (rows.ts, schema.ts, outbox-schema.ts).",
      severity: 'error',
      from: DOMAIN,
      to: { path: [...ENTRIES, ...APP, ...PLUGINS, ...ROLES, DB_TYPES] },
    },
    {
      name: 'every-file-in-a-layer',
      comment:
        'Every file of src/ is in a layer (see the top of this file): one that imports ' +
        'something is checked here, one that is imported in the next rule, one with neither ' +
        'in the one after.',
      severity: 'error',
      from: UNLAYERED,
      to: {},
    },
    {
      name: 'every-import-in-a-layer',
      comment: 'Nothing imports a file of src/ that is in no layer.',
      severity: 'error',
      from: {},
      to: UNLAYERED,
    },
    {
      name: 'every-orphan-in-a-layer',
      comment: 'A file of src/ with no imports and no importers is in a layer too.',
      severity: 'error',
      from: { orphan: true, ...UNLAYERED },
      to: {},
    },
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
