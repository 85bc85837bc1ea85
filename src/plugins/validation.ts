/**
 * Request validation (src/lib/validator.ts): strict bodies, coerced parameters with decimal
 * integers only, no U+0000 in any query string or form, and JSON as the one text body type of
 * the API.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { compileBody, compileParameters, nulInRequest } from '../lib/validator.ts';

export default fp(
  async function validation(app: FastifyInstance) {
    // The API speaks JSON (the OAuth plugin adds form bodies where RFC 6749 wants them):
    // any other content type is 415 unsupported_media_type, not a body parsed as text.
    app.removeContentTypeParser(['text/plain']);
    // Every route, with a schema or not (the portal's pages, OAuth's): U+0000 in the query string
    // or a form body is a 400 naming the parameter, never text sent to PostgreSQL. In
    // preValidation, beside the schema's own checks: after every onRequest hook, so the answer
    // has the request id, security and CORS headers, and is rate limited, metered and logged
    // like any other 400.
    app.addHook('preValidation', (request, _reply, done) => {
      done(nulInRequest(request));
    });
    app.setValidatorCompiler(({ schema, httpPart }) =>
      httpPart === 'body' ? compileBody(schema as object) : compileParameters(schema as object),
    );
  },
  { name: 'validation', fastify: '5.x' },
);
