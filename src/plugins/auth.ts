/**
 * Authentication and authorization in one place. A Bearer credential is resolved by its
 * prefix, through the resolvers other plugins register (API keys: src/services-plugin.ts; OAuth
 * access tokens: oauth/oauth-plugin.ts); the operation's security requirements from the
 * OpenAPI document decide who may call it.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ForbiddenError, UnauthorizedError } from '../errors.ts';
import { ANONYMOUS, type Caller } from '../access.ts';

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
    /** Resolves the request's credential into request.caller (401 for a bad one). */
    authenticate(request: FastifyRequest): Promise<Caller>;
    /**
     * Whether the request's credential still works now (not memoized, unlike authenticate): a
     * request that waits (a long poll) asks again before it answers with data.
     */
    credentialStillValid(request: FastifyRequest): Promise<boolean>;
  }
}

export function parseBearer(header: string | undefined): string | null {
  if (header === undefined) return null;
  const match = /^Bearer +([A-Za-z0-9._~+/-]+=*) *$/i.exec(header);
  if (!match?.[1])
    throw new UnauthorizedError('The Authorization header must be "Bearer <credential>".');
  return match[1];
}

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
  throw new ForbiddenError('This kind of credential cannot call this endpoint.');
}

export default fp(
  async function auth(app: FastifyInstance) {
    const resolvers: [string, CredentialResolver][] = [];

    app.decorate('addCredentialResolver', (prefix: string, resolver: CredentialResolver) => {
      resolvers.push([prefix, resolver]);
    });

    // Resolved once per request: the rate limiter keys by the credential before the route's
    // own check runs (plugins/rate-limit.ts), and both see the same answer and one lookup.
    const resolved = new WeakMap<FastifyRequest, Promise<Caller>>();
    app.decorate('authenticate', (request: FastifyRequest) => {
      let caller = resolved.get(request);
      if (!caller) {
        caller = resolve(request);
        resolved.set(request, caller);
      }
      return caller;
    });

    app.decorate('credentialStillValid', async (request: FastifyRequest) => {
      const credential = parseBearer(request.headers.authorization);
      if (credential === null) return true;
      const resolver = resolvers.find(([prefix]) => credential.startsWith(prefix))?.[1];
      return resolver !== undefined && (await resolver(credential)) !== null;
    });

    async function resolve(request: FastifyRequest): Promise<Caller> {
      const credential = parseBearer(request.headers.authorization);
      let caller: Caller | null = ANONYMOUS;
      if (credential !== null) {
        const resolver = resolvers.find(([prefix]) => credential.startsWith(prefix))?.[1];
        caller = resolver ? await resolver(credential) : null;
      }
      if (caller === null) {
        throw new UnauthorizedError('The credential is invalid, expired or revoked.', {
          rejectedCredential: true,
        });
      }
      request.caller = caller;
      return caller;
    }
  },
  { name: 'auth', fastify: '5.x', dependencies: ['isolation'] },
);
