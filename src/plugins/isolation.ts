/**
 * Environment isolation: every request carries its caller (src/access.ts holds the rules
 * about what a caller may see); the auth plugin sets it, routes and services read it.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Caller } from '../access.ts';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller;
  }
}

export default fp(
  async function isolation(app: FastifyInstance) {
    app.decorateRequest('caller', null as unknown as Caller);
  },
  { name: 'isolation', fastify: '5.x' },
);
