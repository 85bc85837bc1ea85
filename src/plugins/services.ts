import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { PREFIX } from '../lib/secrets.ts';
import { createServices, type Services } from '../services.ts';

declare module 'fastify' {
  interface FastifyInstance {
    services: Services;
  }
}

/** Builds the services over the database and plugs API keys into authentication. */
export default fp(
  async function services(app: FastifyInstance) {
    const services = createServices(app.db, {
      webhooks: { allowPrivateNetworks: app.config.webhookAllowPrivateNetworks },
    });
    app.decorate('services', services);
    const resolveKey = (credential: string) => services.keys.resolve(credential);
    app.addCredentialResolver(PREFIX.sandboxKey, resolveKey);
    app.addCredentialResolver(PREFIX.liveKey, resolveKey);
  },
  { name: 'services', fastify: '5.x', dependencies: ['database', 'auth'] },
);
