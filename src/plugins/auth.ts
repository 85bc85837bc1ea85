/**
 * Authentication, once per request, in one onRequest hook: every request that can carry a
 * Bearer credential (an operation whose security names apiKey or oauth2, and any path under the
 * API, 404s and 405s included) has it resolved here, by its prefix, through the resolvers other
 * plugins register (API keys: src/services-plugin.ts; OAuth access tokens: oauth/oauth-plugin.ts).
 * The answer is `request.caller`; a credential that fails leaves its reason in
 * `request.authFailure`, which the operation answers with (401, or 503 when the database cannot
 * say). The rate limiter (plugins/rate-limit.ts), the envelope's `meta.environment` and the
 * operation's authorization (plugins/operations.ts, `authorize` below) read them and never
 * authenticate. src/access.ts holds the rules about what a caller may see.
 */
import type { FastifyInstance, FastifyRequest, onRequestHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { ForbiddenError, UnauthorizedError } from '../errors.ts';
import { ANONYMOUS, type Caller } from '../access.ts';
import type { Environment } from '../generated/schemas.ts';
import { PREFIX } from '../lib/secrets.ts';

/** Returns the caller for a credential, or null when it is unknown, expired or revoked. */
type CredentialResolver = (credential: string) => Promise<Caller | null>;

/** An OpenAPI security requirement list: alternatives, each a map of scheme -> scopes. */
export type SecurityRequirements = readonly Readonly<Record<string, readonly string[]>>[];

/** Which security scheme of the document each kind of caller satisfies. */
const SCHEME_OF: Record<Caller['kind'], string | null> = {
  anonymous: null,
  api_key: 'apiKey',
  oauth: 'oauth2',
};

declare module 'fastify' {
  interface FastifyInstance {
    /** Registers how credentials starting with `prefix` are resolved. */
    addCredentialResolver(prefix: string, resolver: CredentialResolver): void;
    /**
     * Whether the request's credential still works now (resolved again, unlike request.caller):
     * a request that waits (a long poll) asks again before it answers with data.
     */
    credentialStillValid(request: FastifyRequest): Promise<boolean>;
  }
  interface FastifyRequest {
    /**
     * Who is calling, set once when the request arrives: the credential's caller, or anonymous
     * (in the environment the credential's prefix claims when it failed). Null on requests that
     * take no credential (pages, assets).
     */
    caller: Caller;
    /** Why the request's credential failed (the operation answers with it), else null. */
    authFailure: Error | null;
  }
  interface FastifyContextConfig {
    /** The operation's security accepts a Bearer credential (set by plugins/operations.ts). */
    takesBearer?: boolean;
  }
}

function parseBearer(header: string | undefined): string | null {
  if (header === undefined) return null;
  const match = /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i.exec(header);
  if (!match?.[1])
    throw new UnauthorizedError('The Authorization header must be "Bearer <credential>".');
  return match[1];
}

const API_PREFIX = '/api/v1';

/** Paths that take a Bearer credential whatever their route: the API's, and /oauth/userinfo. */
export function isApiPath(path: string): boolean {
  return path === API_PREFIX || path.startsWith(`${API_PREFIX}/`) || path === '/oauth/userinfo';
}

/** The credential this request presented, once the hook has parsed it (rate-limit keys). */
const CREDENTIAL = Symbol('auth.credential');
type Presented = FastifyRequest & { [CREDENTIAL]?: string };

export function presentedCredential(request: FastifyRequest): string | undefined {
  return (request as Presented)[CREDENTIAL];
}

/**
 * The environment an Authorization header claims by its key prefix, before or without a lookup:
 * a failed `svc_sandbox_…` key still gets `sandbox` in its error's meta (OpenAPI).
 */
export function claimedEnvironment(header: string | undefined): Environment {
  return header?.startsWith(`Bearer ${PREFIX.sandboxKey}`) ? 'sandbox' : 'live';
}

/** Anonymous, in the environment a failed credential claims. */
const FAILED: Record<Environment, Caller> = {
  live: ANONYMOUS,
  sandbox: Object.freeze({ ...ANONYMOUS, environment: 'sandbox' }),
};

/**
 * Checks the caller against the operation's requirements: 401 without a fitting credential, 403
 * without the scope.
 */
export function authorize(caller: Caller, security: SecurityRequirements): void {
  if (security.length === 0) return;
  let missingScopes: string[] | null = null;
  for (const requirement of security) {
    const schemes = Object.entries(requirement);
    if (schemes.length === 0) return; // {}: anonymous allowed
    for (const [scheme, scopes] of schemes) {
      if (SCHEME_OF[caller.kind] !== scheme) continue;
      const missing = scopes.filter((s) => !caller.scopes.includes(s));
      if (missing.length === 0) return;
      missingScopes ??= missing;
    }
  }
  if (caller.kind === 'anonymous')
    throw new UnauthorizedError(
      'This endpoint needs a credential: send Authorization: Bearer <API key or access token>.',
    );
  if (missingScopes) throw ForbiddenError.insufficientScope(missingScopes);
  throw new ForbiddenError(wrongKind(caller, security));
}

/** How a 403 names each kind of credential. */
const CREDENTIAL_WORDS: Record<string, string> = {
  apiKey: "one of the app's API keys (svc_live_… or svc_sandbox_…)",
  oauth2: 'an OAuth access token',
};

/**
 * A credential of a kind the operation does not take: which kinds it takes. Webhook endpoints
 * belong to the app, so an OAuth token (acting for one user) is told to use an API key.
 */
function wrongKind(caller: Caller, security: SecurityRequirements): string {
  const taken = [...new Set(security.flatMap((requirement) => Object.keys(requirement)))]
    .map((scheme) => CREDENTIAL_WORDS[scheme])
    .filter((words) => words !== undefined);
  const given = caller.kind === 'oauth' ? 'an OAuth access token' : 'an API key';
  if (taken.length === 0) return 'This kind of credential cannot call this endpoint.';
  return `This endpoint takes ${taken.join(' or ')}, not ${given}: use ${taken[0]}.`;
}

const rejected = () =>
  new UnauthorizedError('The credential is invalid, expired or revoked.', {
    rejectedCredential: true,
  });

export default fp(
  async function auth(app: FastifyInstance) {
    app.decorateRequest('caller', null as unknown as Caller);
    app.decorateRequest('authFailure', null);

    const resolvers: [string, CredentialResolver][] = [];
    const resolverOf = (credential: string) =>
      resolvers.find(([prefix]) => credential.startsWith(prefix))?.[1];

    app.decorate('addCredentialResolver', (prefix: string, resolver: CredentialResolver) => {
      resolvers.push([prefix, resolver]);
    });

    app.decorate('credentialStillValid', async (request: FastifyRequest) => {
      const credential = presentedCredential(request);
      if (credential === undefined) return request.authFailure === null;
      const resolver = resolverOf(credential);
      return resolver !== undefined && (await resolver(credential)) !== null;
    });

    function fail(request: FastifyRequest, header: string, failure: Error): void {
      request.caller = FAILED[claimedEnvironment(header)];
      request.authFailure = failure;
    }

    // A callback hook: a request without a credential (the public feed's readers) is decided
    // without a promise; one with a Bearer credential waits for its lookup.
    const authenticate: onRequestHookHandler = function authenticate(request, _reply, done) {
      const config = request.routeOptions.config;
      if (config.takesBearer !== true) {
        if (config.operationId !== undefined) request.caller = ANONYMOUS;
        // Unmatched paths under the API still read the credential (their rate limit is keyed by
        // it, their envelope names its environment).
        if (!request.is404 || !isApiPath(request.url.split('?', 1)[0]!)) return done();
      }
      const header = request.headers.authorization;
      if (header === undefined) {
        request.caller = ANONYMOUS;
        return done();
      }
      let credential: string;
      try {
        credential = parseBearer(header)!;
      } catch (err) {
        fail(request, header, err as Error);
        return done();
      }
      (request as Presented)[CREDENTIAL] = credential;
      const resolver = resolverOf(credential);
      if (resolver === undefined) {
        fail(request, header, rejected());
        return done();
      }
      resolver(credential).then(
        (caller) => {
          if (caller === null) fail(request, header, rejected());
          else request.caller = caller;
          done();
        },
        (err: Error) => {
          fail(request, header, err);
          done();
        },
      );
    };
    app.addHook('onRequest', authenticate);
  },
  { name: 'auth', fastify: '5.x' },
);
