/**
 * The developer portal (src/portal): server-rendered pages under /portal for developers'
 * apps, keys, OAuth settings, webhooks, go-live checklist and sandbox inventory, plus its
 * stylesheet and copy-button script. It shares sign-in, sessions, CSRF and the page layout
 * with the OAuth pages (the web plugin) and calls the same services as the API and the CLI.
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { projectFile } from '../project-files.ts';
import { PORTAL_CSS_PATH, PORTAL_JS_PATH, PORTAL_PATH } from './paths.ts';
import { portalRoutes } from './portal-routes.ts';

const asset = (name: string) => readFileSync(projectFile('src', 'portal', 'assets', name), 'utf8');
// One response, two files: the request log's and the usage chart's rules apart.
const stylesheet = `${asset('portal.css')}\n${asset('activity.css')}`;
const script = asset('portal.js');

export default fp(
  async function portal(app: FastifyInstance) {
    app.get(PORTAL_CSS_PATH, async (_request, reply) =>
      reply
        .type('text/css; charset=utf-8')
        .header('cache-control', 'public, max-age=3600')
        .send(stylesheet),
    );
    app.get(PORTAL_JS_PATH, async (_request, reply) =>
      reply
        .type('text/javascript; charset=utf-8')
        .header('cache-control', 'public, max-age=3600')
        .header('x-content-type-options', 'nosniff')
        .send(script),
    );
    await app.register(portalRoutes, { prefix: PORTAL_PATH });
  },
  { name: 'portal', fastify: '5.x', dependencies: ['config', 'services', 'web'] },
);
