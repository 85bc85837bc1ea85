/**
 * A logged request as the request-log plugin records it (RequestLogEntry): a GET of the feed
 * with a 200, no error and no credential, its id a UUIDv7 of its time; the fields a test is
 * about given in `fields`.
 */
import { randomUUID } from 'node:crypto';
import type { RequestLogEntry } from '../../src/request-logs/request-logs-repository.ts';
import { uuidV7 } from '../../src/lib/uuid-v7.ts';

export function loggedRequest(
  fields: Pick<RequestLogEntry, 'app_id'> & Partial<RequestLogEntry>,
): RequestLogEntry {
  const createdAt = fields.created_at ?? new Date().toISOString();
  return {
    id: uuidV7(Date.parse(createdAt)),
    environment: 'sandbox',
    created_at: createdAt,
    method: 'GET',
    path: '/api/v1/listings',
    status: 200,
    error_code: null,
    error_message: null,
    error_details: null,
    latency_ms: 1,
    request_id: `req_${randomUUID().replaceAll('-', '')}`,
    key_id: null,
    user_id: null,
    rate_limit: null,
    ...fields,
  };
}
