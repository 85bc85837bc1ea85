import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ResilientStore } from './lib/rate-limit-store.ts';
import { PREFIX } from './lib/secrets.ts';
import { HEARTBEAT_EVERY_MS, KEY_CHANGES_CHANNEL } from './apps/key-cache.ts';
import { createServices, type Services } from './services.ts';

declare module 'fastify' {
  interface FastifyInstance {
    services: Services;
  }
}

/**
 * Builds the services over the database (src/services.ts, the composition root) with the
 * settings of this process, and plugs API keys into authentication.
 */
export default fp(
  async function services(app: FastifyInstance) {
    const { config } = app;
    const services = createServices(app.db, {
      backgroundDb: app.database.backgroundDb,
      requestLogDb: app.database.requestLog,
      searchDb: app.database.searchDb,
      replica: app.replica,
      webhooks: {
        allowPrivateNetworks: config.webhookAllowPrivateNetworks,
        timeoutMs: config.webhookTimeoutMs,
        log: app.log,
      },
      search: { syncSettleMs: config.syncSettleMs },
      eventWaits: {
        max: config.eventsWaitMax,
        perCredential: config.eventsWaitMaxPerCredential,
        perUser: config.eventsWaitMaxPerUser,
        perApp: config.eventsWaitMaxPerApp,
        perOwner: config.eventsWaitMaxPerOwner,
      },
      // Failed sign-ins are counted beside the rate limits: Redis when configured, same fallback.
      signIn: {
        store: new ResilientStore(app.redis, 'listings-api:rl:sign-in-failures:'),
        limits: {
          clientFailures: config.rateLimitSignInClientFailures,
          usernameFailures: config.rateLimitSignInUsernameFailures,
        },
      },
      delivery: config.webhookWorker
        ? {
            timeoutMs: config.webhookTimeoutMs,
            concurrency: config.webhookConcurrency,
            endpointConcurrency: config.webhookEndpointConcurrency,
            retryScheduleS: config.webhookRetryScheduleS,
            allowPrivateNetworks: config.webhookAllowPrivateNetworks,
            log: app.log.child({ component: 'webhooks' }),
            onAttempt: app.metrics ? (outcome) => app.metrics?.webhookAttempt(outcome) : undefined,
          }
        : undefined,
      matching: config.savedSearchMatcher
        ? { log: app.log.child({ component: 'saved-searches' }) }
        : undefined,
      auditRetentionDays: config.auditRetentionDays,
      onMatchPass: app.metrics ? (pass) => app.metrics?.matchPass(pass) : undefined,
    });
    app.decorate('services', services);
    // API keys and OAuth access tokens are held between requests only while changes to them are
    // heard (src/apps/key-cache.ts); the database's close ends the LISTEN with it.
    const held = services.heldCredentials;
    // The heartbeat that proves the changes are heard; one that fails (the database down) is
    // not heard, and the caches stop serving.
    const heartbeat = setInterval(() => {
      app.database.notify(KEY_CHANGES_CHANNEL, held.heartbeat()).catch(() => {});
    }, HEARTBEAT_EVERY_MS);
    heartbeat.unref();
    app.addHook('onClose', async () => {
      clearInterval(heartbeat);
      held.deaf();
    });
    try {
      await app.database.listen(
        KEY_CHANGES_CHANNEL,
        (payload) => held.notified(payload),
        () => held.heard(),
      );
    } catch (err) {
      app.log.warn(
        { err },
        'cannot LISTEN for credential changes: every keyed or OAuth request reads its credential',
      );
    }
    const resolveKey = (credential: string) => services.keys.resolve(credential);
    app.addCredentialResolver(PREFIX.sandboxKey, resolveKey);
    app.addCredentialResolver(PREFIX.liveKey, resolveKey);
  },
  {
    name: 'services',
    fastify: '5.x',
    dependencies: ['config', 'database', 'replica', 'auth', 'redis', 'metrics'],
  },
);
