/**
 * Admin CLI (docs/cli.md): `npm run --silent admin -- <command> [--flag value]...`.
 * Prints exactly one JSON object on stdout and exits 0, or { error: { code, message } } on
 * stderr and exits non-zero. It calls the same services as the HTTP side.
 */
import { ConfigError, loadConfig } from '../config.ts';
import { openDatabase, type DatabaseHandle } from '../db/client.ts';
import { PartitionKeeper } from '../db/partitions.ts';
import { PgliteLockedError } from '../db/pglite-lock.ts';
import type { AuditNote } from '../audit/audit-service.ts';
import { ApiError } from '../errors.ts';
import { createServices, type Services } from '../services.ts';

export class UsageError extends Error {
  override name = 'UsageError';
}

type Flags = Map<string, string[]>;

export function parseArgs(argv: string[]): { command: string; flags: Flags } {
  const words: string[] = [];
  const flags: Flags = new Map();
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) {
      words.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const value = eq === -1 ? argv[(i += 1)] : arg.slice(eq + 1);
    if (value === undefined) throw new UsageError(`--${name} needs a value`);
    flags.set(name, [...(flags.get(name) ?? []), value]);
  }
  return { command: words.join(' '), flags };
}

function one(flags: Flags, name: string): string {
  const values = flags.get(name);
  if (!values || values.length === 0) throw new UsageError(`--${name} is required`);
  if (values.length > 1) throw new UsageError(`--${name} may be given once`);
  return values[0]!;
}

function optional(flags: Flags, name: string): string | undefined {
  return flags.has(name) ? one(flags, name) : undefined;
}

/** What a command may read besides its flags. */
export interface AdminInput {
  env: Record<string, string | undefined>;
  /** Standard input, whole (only read by a command that asks for it). */
  stdin: () => Promise<string>;
}

/** flags: every flag the command knows; required: those checked before the database is opened. */
type Command = {
  usage: string;
  flags: string[];
  required?: string[];
  /** `input`: runAdmin's environment and standard input (the process's when absent). */
  run: (s: Services, f: Flags, input?: AdminInput) => Promise<object>;
  /**
   * A change whose checks are slow or external (a URL's DNS, a check ping): the checks, made
   * before its audited unit of work (AUDITED below); the change it returns runs in it.
   */
  plan?: (s: Services, f: Flags) => Promise<() => Promise<object>>;
};

/** A planned command's plan, and its run: the plan, then the change. */
const planned = (plan: NonNullable<Command['plan']>) => ({
  plan,
  run: async (s: Services, f: Flags) => (await plan(s, f))(),
});

/**
 * A new user's password, kept out of the process arguments (visible to every user of the
 * machine in `ps`, and kept in shell history): `--password -` reads it from standard input (its
 * first line), or USER_PASSWORD holds it. `--password P` still works, as CONTRACT.md has it.
 */
async function newPassword(
  f: Flags,
  input: AdminInput = { env: process.env, stdin: readStdin },
): Promise<string> {
  const given = optional(f, 'password');
  if (given === '-') {
    const [line = ''] = (await input.stdin()).split(/\r?\n/);
    if (line === '') throw new UsageError('--password - read no password from standard input');
    return line;
  }
  if (given !== undefined) return given;
  const fromEnv = input.env.USER_PASSWORD;
  if (fromEnv) return fromEnv;
  throw new UsageError(
    'give the password on standard input (--password -) or in USER_PASSWORD, not as an argument',
  );
}

/** Standard input until it ends; refused from a terminal, where the password would show. */
function readStdin(): Promise<string> {
  if (process.stdin.isTTY)
    return Promise.reject(
      new UsageError('--password - reads a pipe: printf \'%s\\n\' "$PASSWORD" | … --password -'),
    );
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    process.stdin.on('data', (chunk: Buffer) => chunks.push(chunk));
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    process.stdin.on('error', reject);
  });
}

export const COMMANDS: Record<string, Command> = {
  'user create': {
    usage:
      'user create --username U [--password -] [--display-name D] [--email E] (password on standard input, or in USER_PASSWORD)',
    flags: ['username', 'password', 'display-name', 'email'],
    required: ['username'],
    run: async (s, f, input) => {
      const user = await s.users.create({
        username: one(f, 'username'),
        password: await newPassword(f, input),
        displayName: optional(f, 'display-name'),
        email: optional(f, 'email'),
      });
      return { id: user.id, username: user.username };
    },
  },
  'app create': {
    usage: 'app create --owner U --name N [--redirect-uri URI]...',
    flags: ['owner', 'name', 'redirect-uri'],
    required: ['owner', 'name'],
    run: async (s, f) => {
      const app = await s.apps.create({
        ownerUsername: one(f, 'owner'),
        name: one(f, 'name'),
        redirectUris: f.get('redirect-uri') ?? [],
      });
      return { id: app.id, name: app.name, owner: app.ownerUsername };
    },
  },
  'app secret': {
    usage: 'app secret --app ID',
    flags: ['app'],
    required: ['app'],
    run: (s, f) => s.apps.rotateClientSecret(one(f, 'app')),
  },
  'app approve': {
    usage: 'app approve --app ID',
    flags: ['app'],
    required: ['app'],
    run: (s, f) => s.apps.approve(one(f, 'app')),
  },
  'app requests': {
    usage: 'app requests',
    flags: [],
    run: async (s) => ({ requests: await s.apps.productionRequests() }),
  },
  'app rename': {
    usage: 'app rename --app ID --name N',
    flags: ['app', 'name'],
    required: ['app', 'name'],
    run: (s, f) => s.apps.rename(one(f, 'app'), one(f, 'name')),
  },
  'app delete': {
    usage: "app delete --app ID --confirm NAME   (NAME: the app's name, typed out)",
    flags: ['app', 'confirm'],
    required: ['app', 'confirm'],
    run: (s, f) => s.apps.delete(one(f, 'app'), one(f, 'confirm')),
  },
  'app transfer': {
    usage:
      'app transfer --app ID --username U [--previous-role owner|admin|developer|viewer]   (U: a member; the holder stays one, as owner by default)',
    flags: ['app', 'username', 'previous-role'],
    required: ['app', 'username'],
    run: (s, f) =>
      s.apps.transfer(
        one(f, 'app'),
        { username: one(f, 'username'), previousRole: optional(f, 'previous-role') },
        'admin_cli',
      ),
  },
  'app audit': {
    usage:
      'app audit --app ID [--actor USERNAME|admin_cli|KEY_ID] [--action A] [--limit 50] [--cursor C]   (newest first)',
    flags: ['app', 'actor', 'action', 'limit', 'cursor'],
    required: ['app'],
    run: async (s, f) => {
      const app = await s.apps.get(one(f, 'app'));
      const limit = optional(f, 'limit');
      return s.audit.page(app.id, {
        actor: optional(f, 'actor'),
        action: optional(f, 'action'),
        cursor: optional(f, 'cursor'),
        limit: limit === undefined ? undefined : Number(limit),
      });
    },
  },
  'app member list': {
    usage: 'app member list --app ID',
    flags: ['app'],
    required: ['app'],
    run: async (s, f) => ({ members: await s.apps.members(one(f, 'app')) }),
  },
  'app member add': {
    usage:
      'app member add --app ID --username U --role owner|admin|developer|viewer   (a member already: --role changes it)',
    flags: ['app', 'username', 'role'],
    required: ['app', 'username', 'role'],
    run: async (s, f) => {
      const input = { username: one(f, 'username'), role: one(f, 'role') };
      const members = await s.apps.members(one(f, 'app'));
      return members.some((m) => m.username === input.username.trim())
        ? s.apps.setMemberRole(one(f, 'app'), input, 'admin_cli')
        : s.apps.addMember(one(f, 'app'), input, 'admin_cli');
    },
  },
  'app member remove': {
    usage: 'app member remove --app ID --username U',
    flags: ['app', 'username'],
    required: ['app', 'username'],
    run: (s, f) => s.apps.removeMember(one(f, 'app'), one(f, 'username'), 'admin_cli'),
  },
  'app logs': {
    usage:
      'app logs --app ID [--env sandbox|live] [--status 2xx|3xx|4xx|4xx-not-429|429|5xx] [--hour 2026-11-26T20:00Z | --day 2026-11-26] [--method M] [--path /api/v1/…] [--credential KEY_ID|oauth] [--limit 25] [--cursor C] | app logs --app ID --id LOG_ID   (one request, with its bodies)',
    flags: [
      'app',
      'id',
      'env',
      'status',
      'hour',
      'day',
      'method',
      'path',
      'credential',
      'limit',
      'cursor',
    ],
    required: ['app'],
    run: async (s, f) => {
      const app = await s.apps.get(one(f, 'app'));
      const id = optional(f, 'id');
      if (id !== undefined) {
        const others = [...f.keys()].filter((name) => name !== 'app' && name !== 'id');
        if (others.length) throw new UsageError(`--id shows one request: drop --${others[0]}`);
        return s.requestLogs.get(app.id, id);
      }
      const limit = optional(f, 'limit');
      return s.requestLogs.list(app.id, {
        env: optional(f, 'env'),
        status: optional(f, 'status'),
        hour: optional(f, 'hour'),
        day: optional(f, 'day'),
        method: optional(f, 'method'),
        path: optional(f, 'path'),
        credential: optional(f, 'credential'),
        limit: limit === undefined ? undefined : Number(limit),
        cursor: optional(f, 'cursor'),
      });
    },
  },
  'app usage': {
    usage:
      'app usage --app ID [--env sandbox|live] [--days N]   (1: the last 24 hours; 2-14: days)',
    flags: ['app', 'env', 'days'],
    required: ['app'],
    run: async (s, f) => {
      const app = await s.apps.get(one(f, 'app'));
      const days = optional(f, 'days');
      return s.requestLogs.usage(app.id, {
        env: optional(f, 'env'),
        days: days === undefined ? undefined : Number(days),
      });
    },
  },
  'app show': {
    usage: 'app show --app ID',
    flags: ['app'],
    required: ['app'],
    run: (s, f) => s.apps.show(one(f, 'app')),
  },
  'key create': {
    usage: 'key create --app ID --env sandbox|live [--scopes "read listings:write"] [--name N]',
    flags: ['app', 'env', 'scopes', 'name'],
    required: ['app', 'env'],
    // CONTRACT.md §4 fixes the answer as { id, key, env, scopes }: the name is not added to it.
    run: async (s, f) => {
      const { id, key, env, scopes } = await s.keys.create({
        appId: one(f, 'app'),
        env: one(f, 'env'),
        scopes: optional(f, 'scopes'),
        name: optional(f, 'name'),
        by: { via: 'admin_cli' },
      });
      return { id, key, env, scopes };
    },
  },
  'key rename': {
    usage: 'key rename --id KEY_ID --name N',
    flags: ['id', 'name'],
    required: ['id', 'name'],
    run: (s, f) => s.keys.rename(one(f, 'id'), one(f, 'name')),
  },
  'key roll': {
    usage: 'key roll --id KEY_ID --expires-in now|1h|24h|7d',
    flags: ['id', 'expires-in'],
    required: ['id', 'expires-in'],
    run: (s, f) => s.keys.roll(one(f, 'id'), one(f, 'expires-in'), {}, { via: 'admin_cli' }),
  },
  'key revoke': {
    usage: 'key revoke --id KEY_ID',
    flags: ['id'],
    required: ['id'],
    run: (s, f) => s.keys.revoke(one(f, 'id')),
  },
  'webhook create': {
    usage: 'webhook create --app ID --env sandbox|live --url URL [--events TYPE,TYPE|*]',
    flags: ['app', 'env', 'url', 'events'],
    required: ['app', 'env', 'url'],
    ...planned((s, f) =>
      s.endpoints.planCreate({
        appId: one(f, 'app'),
        env: one(f, 'env'),
        url: one(f, 'url'),
        enabledEvents: optional(f, 'events'),
        by: { via: 'admin_cli' },
      }),
    ),
  },
  'webhook update': {
    usage: 'webhook update --id ENDPOINT_ID [--url URL] [--events TYPE,TYPE|*]',
    flags: ['id', 'url', 'events'],
    required: ['id'],
    ...planned((s, f) => {
      const url = optional(f, 'url');
      const enabledEvents = optional(f, 'events');
      if (url === undefined && enabledEvents === undefined)
        throw new UsageError('webhook update needs --url or --events');
      return s.endpoints.planUpdate(one(f, 'id'), { url, enabledEvents });
    }),
  },
  'webhook delete': {
    usage: 'webhook delete --id ENDPOINT_ID',
    flags: ['id'],
    required: ['id'],
    run: (s, f) => s.endpoints.delete(one(f, 'id')),
  },
  'webhook rotate-secret': {
    usage: 'webhook rotate-secret --id ENDPOINT_ID',
    flags: ['id'],
    required: ['id'],
    run: (s, f) => s.endpoints.rotateSecret(one(f, 'id')),
  },
  'webhook disable': {
    usage: 'webhook disable --id ENDPOINT_ID',
    flags: ['id'],
    required: ['id'],
    run: (s, f) => s.endpoints.disable(one(f, 'id')),
  },
  'webhook enable': {
    usage: 'webhook enable --id ENDPOINT_ID',
    flags: ['id'],
    required: ['id'],
    ...planned((s, f) => s.endpoints.planEnable(one(f, 'id'))),
  },
  'event show': {
    usage: 'event show --id EVENT_ID',
    flags: ['id'],
    required: ['id'],
    run: (s, f) => s.events.detail(one(f, 'id')),
  },
  'app events': {
    usage: 'app events --app ID [--env sandbox|live] [--limit 20] [--cursor C]',
    flags: ['app', 'env', 'limit', 'cursor'],
    required: ['app'],
    run: async (s, f) => {
      const app = await s.apps.get(one(f, 'app'));
      const page = await s.events.forApp(app.id, optional(f, 'env') ?? 'sandbox', {
        limit: Number(optional(f, 'limit') ?? 20),
        cursor: optional(f, 'cursor'),
      });
      return {
        events: page.items.map((event) => ({
          ...event,
          deliveries: page.deliveries.filter((d) => d.event_id === event.id),
        })),
        next_cursor: page.nextCursor,
      };
    },
  },
  'saved-search list': {
    usage: 'saved-search list --app ID [--env sandbox|live] [--limit 50] [--cursor C]',
    flags: ['app', 'env', 'limit', 'cursor'],
    required: ['app'],
    run: async (s, f) => {
      const app = await s.apps.get(one(f, 'app'));
      const limit = optional(f, 'limit');
      const page = await s.savedSearches.forApp(app.id, {
        env: optional(f, 'env'),
        limit: limit === undefined ? 50 : /^\d+$/.test(limit) ? Number(limit) : NaN,
        cursor: optional(f, 'cursor'),
      });
      return { saved_searches: page.items, next_cursor: page.nextCursor };
    },
  },
  'saved-search delete': {
    usage: 'saved-search delete --id SAVED_SEARCH_ID',
    flags: ['id'],
    required: ['id'],
    run: (s, f) => s.savedSearches.remove(one(f, 'id')),
  },
  'webhook ping': {
    usage: 'webhook ping --id ENDPOINT_ID',
    flags: ['id'],
    required: ['id'],
    run: (s, f) => s.endpoints.ping(one(f, 'id')),
  },
  'webhook show': {
    usage: 'webhook show --id ENDPOINT_ID',
    flags: ['id'],
    required: ['id'],
    run: (s, f) => s.endpoints.show(one(f, 'id')),
  },
  'webhook deliveries': {
    usage: 'webhook deliveries --id ENDPOINT_ID [--limit N]',
    flags: ['id', 'limit'],
    required: ['id'],
    run: (s, f) => {
      const limit = optional(f, 'limit');
      return s.endpoints.recentDeliveries(
        one(f, 'id'),
        limit === undefined ? undefined : /^\d+$/.test(limit) ? Number(limit) : NaN,
      );
    },
  },
  'webhook redeliver': {
    usage: 'webhook redeliver --delivery DELIVERY_ID',
    flags: ['delivery'],
    required: ['delivery'],
    run: (s, f) => s.endpoints.redeliver(one(f, 'delivery')),
  },
};

const HELP_FLAGS = ['--help', '-h'];

/**
 * The command words of a request for help (`--help` or `-h` anywhere a flag may be, or `help`
 * first), '' for all of them; undefined when none was asked for. A flag's value is not a flag:
 * `--name --help` names something "--help".
 */
function helpTopic(argv: string[]): string | undefined {
  const words: string[] = [];
  let asked = argv[0] === 'help';
  for (let i = asked ? 1 : 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (HELP_FLAGS.includes(arg)) asked = true;
    else if (arg.startsWith('--')) {
      if (!arg.includes('=')) i += 1;
    } else words.push(arg);
  }
  return asked ? words.join(' ') : undefined;
}

/** What an audited command records, made ready before it runs (the endpoint of a deletion). */
type AuditOf = (
  s: Services,
  f: Flags,
) => Promise<(result: Record<string, unknown>) => { appId: string; note: AuditNote }>;

type Transferred = Awaited<ReturnType<Services['apps']['transfer']>>;
const appOf = (f: Flags) => async () => one(f, 'app');
const keyOf = async (s: Services, f: Flags) => s.keys.get(one(f, 'id'));
const endpointOf = async (s: Services, f: Flags) => s.endpoints.get(one(f, 'id'));

/**
 * The commands that make a sensitive change, and the entry each records in the app's audit log
 * (AuditService.audited) as the admin CLI's, with the change in one unit of work (docs/portal.md,
 * "Audit log").
 */
const AUDITED: Record<string, AuditOf> = {
  'app secret': async (_s, f) => {
    const appId = await appOf(f)();
    return () => ({ appId, note: { action: 'client_secret.rotated' } });
  },
  'app approve': async (_s, f) => {
    const appId = await appOf(f)();
    return () => ({ appId, note: { action: 'production.approved' } });
  },
  'app rename': async (s, f) => {
    const app = await s.apps.get(one(f, 'app'));
    return (r) => ({
      appId: app.id,
      note: { action: 'app.renamed', details: { from: app.name, to: r.name } },
    });
  },
  'saved-search delete': async (s, f) => {
    const id = one(f, 'id');
    const { appId, environment } = await s.savedSearches.placeOf(id);
    return () => ({
      appId,
      note: { action: 'saved_search.deleted', target: id, details: { environment } },
    });
  },
  'app transfer': async (_s, f) => {
    const appId = await appOf(f)();
    return (r) => {
      const { account_holder: to, previous } = r as unknown as Transferred;
      return {
        appId,
        note: {
          action: 'app.ownership_transferred',
          target: to,
          details: { from: previous.username, to, previous_role: previous.role },
        },
      };
    };
  },
  'app delete': async (s, f) => {
    const app = await s.apps.get(one(f, 'app'));
    return () => ({ appId: app.id, note: { action: 'app.deleted', details: { name: app.name } } });
  },
  'app member add': async (s, f) => {
    const app = await s.apps.get(one(f, 'app'));
    const known = (await s.apps.members(app.id)).some((m) => m.username === one(f, 'username'));
    return (r) => ({
      appId: app.id,
      note: {
        action: known ? 'member.role_changed' : 'member.added',
        target: String(r.username),
        details: { role: r.role },
      },
    });
  },
  'app member remove': async (s, f) => {
    const app = await s.apps.get(one(f, 'app'));
    return (r) => ({
      appId: app.id,
      note: { action: 'member.removed', target: String(r.username) },
    });
  },
  'key create': async (_s, f) => {
    const appId = await appOf(f)();
    return (r) => ({
      appId,
      note: {
        action: 'key.created',
        target: String(r.id),
        details: { environment: r.env, scopes: r.scopes },
      },
    });
  },
  ...Object.fromEntries(
    (
      [
        ['key rename', 'key.renamed'],
        ['key roll', 'key.rolled'],
        ['key revoke', 'key.revoked'],
      ] as const
    ).map(([command, action]): [string, AuditOf] => [
      command,
      async (s, f) => {
        const key = await keyOf(s, f);
        return () => ({
          appId: key.appId,
          note: {
            action,
            target: key.id,
            details: { environment: key.environment, scopes: key.scopes },
          },
        });
      },
    ]),
  ),
  'webhook create': async (_s, f) => {
    const appId = await appOf(f)();
    return (r) => ({
      appId,
      note: {
        action: 'endpoint.created',
        target: String(r.id),
        details: { environment: one(f, 'env'), url: one(f, 'url') },
      },
    });
  },
  ...Object.fromEntries(
    (
      [
        ['webhook update', 'endpoint.updated'],
        ['webhook delete', 'endpoint.deleted'],
        ['webhook rotate-secret', 'endpoint.secret_rotated'],
        ['webhook disable', 'endpoint.disabled'],
        ['webhook enable', 'endpoint.enabled'],
      ] as const
    ).map(([command, action]): [string, AuditOf] => [
      command,
      async (s, f) => {
        const endpoint = await endpointOf(s, f);
        return () => ({
          appId: endpoint.appId,
          note: {
            action,
            target: endpoint.id,
            details: { environment: endpoint.environment, url: endpoint.url },
          },
        });
      },
    ]),
  ),
};

for (const [name, auditOf] of Object.entries(AUDITED)) {
  const command = COMMANDS[name]!;
  const { run, plan } = command;
  // The change and its entry, one unit of work (AuditService.audited); a planned command's
  // checks before it.
  command.run = async (s, f, input) => {
    const entry = await auditOf(s, f);
    const change = plan ? await plan(s, f) : () => run(s, f, input);
    return s.audit.audited({ type: 'admin_cli' }, change, (result) => {
      const { appId, note } = entry(result as Record<string, unknown>);
      return { appId, ...note };
    });
  };
}

function usage(): string {
  return `commands: ${Object.values(COMMANDS)
    .map((c) => c.usage)
    .join(' | ')}`;
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

const fail = (code: number, errorCode: string, message: string): CliResult => ({
  code,
  stdout: '',
  stderr: `${JSON.stringify({ error: { code: errorCode, message } })}\n`,
});

/** Runs one command; never throws for anything a user can type. */
export async function runAdmin(
  argv: string[],
  env: Record<string, string | undefined> = process.env,
  stdin: () => Promise<string> = readStdin,
): Promise<CliResult> {
  let handle: DatabaseHandle | undefined;
  try {
    // Asked for, the usage is an answer (exit 0, one JSON object), not a flag without a value:
    // every command's, or those of the words given (`app --help`, `help key roll`).
    const topic = helpTopic(argv);
    if (topic !== undefined) {
      const commands = Object.entries(COMMANDS)
        .filter(([name]) => topic === '' || name === topic || name.startsWith(`${topic} `))
        .map(([, command]) => command.usage);
      if (commands.length === 0) throw new UsageError(`unknown command "${topic}"; ${usage()}`);
      return { code: 0, stdout: `${JSON.stringify({ commands })}\n`, stderr: '' };
    }
    const { command, flags } = parseArgs(argv);
    const spec = COMMANDS[command];
    if (!spec) throw new UsageError(command ? `unknown command "${command}"; ${usage()}` : usage());
    const unknown = [...flags.keys()].filter((f) => !spec.flags.includes(f));
    if (unknown.length) throw new UsageError(`unknown flag --${unknown[0]}; usage: ${spec.usage}`);
    // A usage mistake is reported as such, without waiting on (or failing to reach) the database.
    for (const name of spec.required ?? []) one(flags, name);
    const config = loadConfig(env);
    handle = await openDatabase({
      databaseUrl: config.databaseUrl,
      directUrl: config.databaseDirectUrl,
      preparedStatements: config.databasePreparedStatements,
      pgliteDir: config.pgliteDir,
      poolSize: 1,
      requestLogUrl: config.requestLogDatabaseUrl,
    });
    const services = createServices(handle.db, {
      requestLogDb: handle.requestLog,
      auditRetentionDays: config.auditRetentionDays,
      webhooks: {
        allowPrivateNetworks: config.webhookAllowPrivateNetworks,
        timeoutMs: config.webhookTimeoutMs,
      },
    });
    // Before any command's write, the partitions it writes into (an audited command's entry
    // needs this week's of the audit log), as the server's start makes them: a CLI run while
    // no server has run for weeks writes its entries all the same.
    for (const { db, tables } of services.partitioned.filter((p) => p.database === 'primary'))
      await new PartitionKeeper(db, tables, false, { info: () => {} }).make();
    const result = await spec.run(services, flags, { env, stdin });
    return { code: 0, stdout: `${JSON.stringify(result)}\n`, stderr: '' };
  } catch (err) {
    if (err instanceof UsageError) return fail(2, 'usage', err.message);
    if (err instanceof ConfigError) return fail(2, 'config_error', err.message);
    if (err instanceof PgliteLockedError) return fail(1, 'database_locked', err.message);
    if (err instanceof ApiError && err.expose) return fail(1, err.code, err.message);
    return fail(1, 'internal_error', err instanceof Error ? err.message : String(err));
  } finally {
    await handle?.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await runAdmin(process.argv.slice(2));
  process.stdout.write(result.stdout);
  process.stderr.write(result.stderr);
  process.exitCode = result.code;
}
