/**
 * Rate limits (the "Rate limits" table of the OpenAPI document, docs/configuration.md), with
 * @fastify/rate-limit. Every request is counted under exactly one policy of the table below,
 * in one app-level onRequest hook, so it runs before the routes' own authorization and every
 * response (401, 404, 405, 413, 415, 503 included) carries RateLimit-Limit, RateLimit-Remaining
 * and RateLimit-Reset (the plugin's draft-spec headers); a 429 adds Retry-After and leaves
 * through the route's error handler (the API envelope `rate_limited`, RFC 6749 JSON on the
 * token endpoints, an HTML page on the pages). A route whose form checks a password says so in its
 * route config (`signInForm: true`); its posts wait for their body (docs/configuration.md,
 * "Sign-in limits": only a post submitting a password is an attempt, not the consent decision
 * on the same URL), and are counted once it is read, or on their error if it is not.
 *
 * A request may cost more than 1 (the document's "Cost": a search page by the rows it read):
 * its handler charges the rest with reply.chargeRateLimit once the work is done, on the counter
 * and key the request was counted on, and that answer's RateLimit headers show it.
 *
 * Keys: a valid Bearer credential is counted under a digest of it (never the secret itself);
 * a missing, malformed or rejected credential under the client IP (IPv6 by /64), so guessing
 * credentials spends the IP's budget. Which it is, the auth hook has decided (plugins/auth.ts,
 * registered just before this plugin): the limiter looks nothing up. Counters are in Redis
 * when REDIS_URL is set, shared by all instances, with a fallback to memory while Redis is
 * unreachable (lib/rate-limit-store.ts).
 */
import { hash } from 'node:crypto';
import fastifyRateLimit, { normalizeIP } from '@fastify/rate-limit';
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onErrorAsyncHookHandler,
  preValidationHookHandler,
} from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config.ts';
import { isConnectionError } from '../db/errors.ts';
import { RateLimitedError } from '../errors.ts';
import { limiterStore, ResilientStore } from '../lib/rate-limit-store.ts';
import { isApiPath, presentedCredential } from './auth.ts';

declare module 'fastify' {
  interface FastifyReply {
    /**
     * Charges this request `units` in all on the counter it was counted on when it arrived (1
     * then), through the same store (shared by instances), and sets this answer's
     * RateLimit-Remaining and RateLimit-Reset to the counter after it (OpenAPI "Rate limits": a
     * request is charged by the work it caused). Call it once the work is done, before the
     * answer is sent. Never refuses: the work is done; the next request over the limit is.
     */
    chargeRateLimit(units: number): Promise<void>;
  }
  interface FastifyContextConfig {
    /**
     * A form that checks a password (sign-in, sign-up): a post of it that submits a username and
     * a password is a sign-in attempt, counted under the sign-in policy.
     */
    signInForm?: boolean;
  }
}

export type PolicyName = 'api' | 'oauth-token' | 'sign-in' | 'web';

interface RateLimitPolicy {
  max: number;
  windowMs: number;
  /** credential: the Bearer credential when valid, else the client IP; ip: always the client IP. */
  key: 'credential' | 'ip';
}

/** The document's table; each row is one counter per key. */
function ratePolicies(
  config: Pick<
    Config,
    'rateLimitMax' | 'rateLimitWindowMs' | 'rateLimitTokenMax' | 'rateLimitSignInMax'
  >,
): Record<PolicyName, RateLimitPolicy> {
  return {
    // /api/v1/* (unknown paths under it included) and /oauth/userinfo.
    api: { max: config.rateLimitMax, windowMs: config.rateLimitWindowMs, key: 'credential' },
    // /oauth/token and /oauth/revoke together: servers exchanging codes, not browsers (30).
    'oauth-token': { max: config.rateLimitTokenMax, windowMs: 60_000, key: 'ip' },
    // Sign-in attempts (a username and a password posted to /login, /oauth/authorize or
    // /portal/signup): the only per-IP limit on guessing (10). The failed sign-in counters per
    // username are src/web/login-throttle.ts.
    'sign-in': { max: config.rateLimitSignInMax, windowMs: 60_000, key: 'ip' },
    // Everything else: GET /oauth/authorize, /.well-known/*, the pages, /docs, assets.
    web: { max: config.rateLimitMax, windowMs: config.rateLimitWindowMs, key: 'ip' },
  };
}

/** A sign-in attempt submits credentials: a username and a password. */
export function submitsCredentials(body: unknown): boolean {
  return (
    body !== null &&
    typeof body === 'object' &&
    Object.hasOwn(body, 'username') &&
    Object.hasOwn(body, 'password')
  );
}

/**
 * Which policy counts a request, from its route (or its path when no route matched) and whether
 * it is a sign-in attempt (a post of a `signInForm` route that submits credentials).
 */
export function policyOf(path: string, signInAttempt = false): PolicyName {
  if (isApiPath(path)) return 'api';
  if (path === '/oauth/token' || path === '/oauth/revoke') return 'oauth-token';
  return signInAttempt ? 'sign-in' : 'web';
}

function routePath(request: FastifyRequest): string {
  const url = request.routeOptions.url;
  // A matched route's own pattern; the path itself for 404s and the CORS preflight route ('*').
  if (url && url !== '*' && !url.includes('*')) return url;
  return request.url.split('?')[0] ?? request.url;
}

const ipKey = (request: FastifyRequest) => `ip:${normalizeIP(request.ip)}`;

/**
 * A digest of the credential: Redis and memory never hold the secret, nor the database's hash of
 * it.
 */
export function credentialKey(credential: string): string {
  return `cred:${hash('sha256', `rate-limit:${credential}`, 'hex').slice(0, 40)}`;
}

/** A route option's hooks (none, one or several) as a list. */
const hooks = <T>(value: T | T[] | undefined): T[] =>
  value === undefined ? [] : Array.isArray(value) ? value : [value];

function windowText(ms: number): string {
  const [n, unit] = ms % 60_000 === 0 ? [ms / 60_000, 'minute'] : [Math.round(ms / 1000), 'second'];
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

export default fp(
  async function rateLimit(app: FastifyInstance) {
    const root = new ResilientStore(app.redis, 'listings-api:rl:');
    await app.register(fastifyRateLimit, {
      // Not per route: the hook below picks the policy of every request, 404s included.
      global: false,
      enableDraftSpec: true,
      store: limiterStore(root),
      max: app.config.rateLimitMax,
      timeWindow: app.config.rateLimitWindowMs,
      keyGenerator: ipKey,
      // The store never fails (it falls back to memory); if it ever did, answer rather than 5xx.
      skipOnError: true,
    });

    /**
     * The credential's digest when the route accepts it, or when the database could not say (the
     * route answers 503 with these headers); the IP when it is missing or rejected. Read from
     * what the auth hook decided (plugins/auth.ts), never looked up again.
     */
    function callerKey(request: FastifyRequest): string {
      const credential = presentedCredential(request);
      if (credential === undefined) return ipKey(request);
      const failure = request.authFailure;
      if (failure === null ? request.caller.kind === 'anonymous' : !isConnectionError(failure))
        return ipKey(request);
      return credentialKey(credential);
    }

    /** The counter each request was counted on (its policy and key), for a later charge. */
    const COUNTED = Symbol('rateLimit.counted');
    type Counted = FastifyRequest & { [COUNTED]?: { policy: PolicyName; key: string } };
    const remembered =
      (policy: PolicyName, keyOf: (request: FastifyRequest) => string) =>
      (request: Counted): string => {
        const key = keyOf(request);
        request[COUNTED] = { policy, key };
        return key;
      };

    const policies = ratePolicies(app.config);
    const limiters = Object.fromEntries(
      (Object.entries(policies) as [PolicyName, RateLimitPolicy][]).map(([name, policy]) => [
        name,
        app.rateLimit({
          max: policy.max,
          timeWindow: policy.windowMs,
          groupId: name,
          keyGenerator: remembered(name, policy.key === 'credential' ? callerKey : ipKey),
          onExceeded: () => app.metrics?.rateLimited(name),
          errorResponseBuilder: (_request, context) =>
            new RateLimitedError(
              `Too many requests: at most ${policy.max} per ${windowText(policy.windowMs)}; retry in ${context.after}.`,
            ),
        }),
      ]),
    ) as Record<
      PolicyName,
      (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => Promise<void>
    >;

    app.decorateReply(
      'chargeRateLimit',
      async function chargeRateLimit(this: FastifyReply, units: number) {
        const counted = (this.request as Counted)[COUNTED];
        if (!counted || units <= 1) return;
        const { max, windowMs } = policies[counted.policy];
        // The limiter's own store for the policy (ResilientStore.child gives the same one).
        const store = root.child({ groupId: counted.policy });
        const { current, ttl } = await store.incrBy(counted.key, Math.ceil(units) - 1, windowMs);
        this.header('ratelimit-remaining', Math.max(0, max - current)).header(
          'ratelimit-reset',
          Math.ceil(ttl / 1000),
        );
      },
    );

    /** Sign-in form posts: their policy is known once their body is read. */
    const waiting = new WeakSet<FastifyRequest>();
    app.addHook('onRequest', async function limit(request, reply) {
      if (request.routeOptions.config.signInForm === true && !request.is404) {
        waiting.add(request);
        return;
      }
      await limiters[policyOf(routePath(request))].call(app, request, reply);
    });
    const limitForm: preValidationHookHandler = function limitForm(request, reply, done) {
      if (!waiting.has(request)) return done();
      limiters[policyOf(routePath(request), submitsCredentials(request.body))]
        .call(app, request, reply)
        .then(() => done(), done);
    };
    // A form whose body was refused (413, 415, unreadable) is counted as a page, for its headers.
    // The limiter runs once per request, so this does nothing after limitForm.
    const limitRefusedForm: onErrorAsyncHookHandler = async function limitRefusedForm(
      request,
      reply,
    ) {
      if (!waiting.has(request)) return;
      try {
        await limiters.web.call(app, request, reply);
      } catch {
        // Over the limit: the answer is an error already; the headers (Retry-After included) say
        // the rest.
      }
    };
    // On the sign-in form routes only (registered after this plugin): every other request would
    // run two hooks that have nothing to do (no other preValidation hook exists, so its answer
    // skips that stage).
    app.addHook('onRoute', (route) => {
      if ((route.config as { signInForm?: boolean } | undefined)?.signInForm !== true) return;
      route.preValidation = [...hooks(route.preValidation), limitForm];
      route.onError = [...hooks(route.onError), limitRefusedForm];
    });
  },
  { name: 'rate-limit', fastify: '5.x', dependencies: ['config', 'envelope', 'auth', 'redis'] },
);
