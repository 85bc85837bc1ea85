/**
 * Request validation (src/lib/validator.ts): strict bodies, coerced parameters with decimal
 * integers only, and JSON as the one text body type of the API.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { compileBody, compileParameters } from '../lib/validator.ts';

export default fp(
  async function validation(app: FastifyInstance) {
    // The API speaks JSON (the OAuth plugin adds form bodies where RFC 6749 wants them):
    // any other content type is 415 unsupported_media_type, not a body parsed as text.
    app.removeContentTypeParser(['text/plain']);
    app.setValidatorCompiler(({ schema, httpPart }) =>
      httpPart === 'body' ? compileBody(schema as object) : compileParameters(schema as object),
    );
  },
  { name: 'validation', fastify: '5.x' },
);
