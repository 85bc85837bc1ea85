/**
 * The Redis connection of this process (REDIS_URL), shared by what keeps counters there: the
 * rate limits (plugins/rate-limit.ts) and the failed sign-in counters (src/web/login-throttle.ts,
 * through the services). Null without REDIS_URL. A Redis that is down at start or later is
 * logged once and each user of the link falls back to memory (lib/rate-limit-store.ts).
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { RedisLink } from '../lib/rate-limit-store.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The Redis connection (null without REDIS_URL). */
    redis: RedisLink | null;
  }
}

async function connectRedis(app: FastifyInstance, url: string): Promise<RedisLink> {
  const log = app.log.child({ component: 'redis' });
  // Loaded only when REDIS_URL is set: a server without Redis starts sooner and smaller (`npm run
  // bench`).
  const { Redis } = await import('ioredis');
  const client = new Redis(url, {
    // Fail at once while disconnected (the memory fallback answers) instead of queueing.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    // A Redis that accepts but does not answer must not hold requests up.
    commandTimeout: 1000,
    // Reconnect forever, at most every 2 s: the counters go back to Redis when it returns.
    retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
    lazyConnect: true,
  });
  const link = new RedisLink(client, log);
  // Give the first connection a moment so the first requests already share counters; a
  // Redis that is down at boot is logged (once) and the service starts on memory counters.
  const connected = client.connect().catch(() => undefined);
  await Promise.race([connected, new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
  if (client.status !== 'ready') link.down(new Error(`no connection to ${new URL(url).host}`));
  return link;
}

export default fp(
  async function redis(app: FastifyInstance) {
    const link = app.config.redisUrl ? await connectRedis(app, app.config.redisUrl) : null;
    app.decorate('redis', link);
    app.addHook('onClose', async () => link?.close());
  },
  { name: 'redis', fastify: '5.x', dependencies: ['config'] },
);
