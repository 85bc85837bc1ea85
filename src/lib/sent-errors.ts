/**
 * The error each answered request carried, as sent: the envelope (src/plugins/envelope.ts)
 * records it when it writes the error's body, and the request log
 * (src/request-logs/request-logs-plugin.ts) reads it when the response has gone.
 */
import type { FastifyRequest } from 'fastify';
import type { ErrorResponse } from '../generated/schemas.ts';

const sentErrors = new WeakMap<FastifyRequest, ErrorResponse['error']>();

export function recordSentError(request: FastifyRequest, error: ErrorResponse['error']): void {
  sentErrors.set(request, error);
}

export function sentError(request: FastifyRequest): ErrorResponse['error'] | undefined {
  return sentErrors.get(request);
}
