/**
 * The browser side shared by the OAuth pages and the portal: cookies, form bodies, sessions,
 * CSRF and failed sign-in counters (app.web, over the services' sessions and sign-in
 * throttle), the local stylesheet and icon, and /login, /logout.
 *
 * Form bodies: @fastify/formbody parses application/x-www-form-urlencoded, but only routes
 * that declare it accept it: operations whose document lists that media type (RFC 6749 wants
 * it at /oauth/token and /oauth/revoke) and page routes with `config.formBody`. Everywhere
 * else such a body stays 415 unsupported_media_type, as before this plugin.
 */
import { readFileSync } from 'node:fs';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { ForbiddenError, UnsupportedMediaTypeError } from '../errors.ts';
import { operations, type OperationId } from '../generated/operations.ts';
import { projectFile } from '../project-files.ts';
import { ICON_PATH, sendErrorPage, STYLESHEET_PATH } from './html.ts';
import { registerLoginRoutes } from './login.ts';
import { WebContext } from './web-context.ts';

declare module 'fastify' {
  interface FastifyInstance {
    web: WebContext;
  }
  interface FastifyContextConfig {
    /** The bound operation (plugins/operations.ts). */
    operationId?: string;
    /** A page route that accepts posted forms. */
    formBody?: boolean;
  }
}

const FORM = 'application/x-www-form-urlencoded';
/** Forms here are a few fields; RFC 6749 requests are small too. */
const FORM_BODY_LIMIT = 64 * 1024;
const stylesheet = readFileSync(projectFile('src', 'web', 'assets', 'web.css'), 'utf8');
const icon = readFileSync(projectFile('src', 'web', 'assets', 'icon.svg'), 'utf8');

function acceptsForm(request: FastifyRequest): boolean {
  const config = request.routeOptions.config;
  if (config.formBody === true) return true;
  const op = config.operationId ? operations[config.operationId as OperationId] : undefined;
  return op !== undefined && (op.bodyContentTypes as readonly string[]).includes(FORM);
}

export default fp(
  async function web(app: FastifyInstance) {
    await app.register(cookie);
    await app.register(formbody, { bodyLimit: FORM_BODY_LIMIT });
    app.addHook('preParsing', (request, _reply, payload, done) => {
      const type = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
      if (type === FORM && !request.is404 && !acceptsForm(request)) {
        done(
          new UnsupportedMediaTypeError(
            'This Content-Type is not supported here; send application/json.',
          ),
        );
        return;
      }
      done(null, payload);
    });

    // Defence in depth beside the CSRF token (OWASP CSRF cheat sheet, "Verifying origin with
    // standard headers"): a page's form posted with an Origin header (every browser sends one
    // on a POST) is refused unless it is this site's, BASE_URL's origin. Without the header (an
    // old client, a script) the token alone decides.
    const siteOrigin = new URL(app.config.baseUrl).origin;
    app.addHook('onRequest', async (request, reply) => {
      if (request.method !== 'POST' || request.routeOptions.config.formBody !== true) return;
      const origin = request.headers.origin;
      if (origin === undefined || origin === siteOrigin) return;
      const refusal = new ForbiddenError('The form was sent from another site.');
      return sendErrorPage(
        request,
        reply,
        refusal,
        refusal,
        `This form was sent from another site; nothing was changed. Open the page at ${siteOrigin} (this site's address: BASE_URL) and send it again.`,
      );
    });

    const { sessions, signInThrottle } = app.services;
    app.decorate(
      'web',
      new WebContext(sessions, {
        baseUrl: app.config.baseUrl,
        sessionSecret: app.config.sessionSecret,
        throttle: signInThrottle,
      }),
    );

    app.get(STYLESHEET_PATH, async (_request, reply) =>
      reply
        .type('text/css; charset=utf-8')
        .header('cache-control', 'public, max-age=3600')
        .send(stylesheet),
    );
    app.get(ICON_PATH, async (_request, reply) =>
      reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(icon),
    );
    // Browsers and crawlers ask for /favicon.ico whatever the page says: the same icon.
    app.get('/favicon.ico', async (_request, reply) =>
      reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(icon),
    );
    registerLoginRoutes(app);
  },
  {
    name: 'web',
    fastify: '5.x',
    dependencies: ['config', 'services', 'envelope'],
  },
);
