/**
 * Sends requests to the app on behalf of one documented operation and checks every answer
 * against the document: the status is documented for the operation, the Content-Type is one
 * documented for that status, the body validates against the documented schema, the documented
 * headers are present and valid, and the envelope keeps its promises (x-request-id equals
 * meta.request_id, meta.environment echoes the credential, the error code matches the status).
 * Every answer is recorded for the coverage table (operation x documented status).
 */
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import type { Test } from 'tap';
import { parse as parseYaml } from 'yaml';
import {
  baseMediaType,
  isJsonMedia,
  isYamlMedia,
  responseFor,
  type DocOperation,
  type DocResponse,
  type OpenApiDocument,
} from './document.ts';

/** The tap test that asserts on a request (each subtest passes its own). */
export type Asserter = Test;

export interface ContractRequest {
  /** The operationId this request exercises. */
  op: string;
  /** What the request is for, shown in assertion messages. */
  label: string;
  /** The Bearer credential; null or absent for anonymous. */
  credential?: string | null | undefined;
  path?: Record<string, string>;
  /** Query parameters; an array repeats the parameter. */
  query?: Record<string, string | readonly string[]>;
  headers?: Record<string, string>;
  /** A JSON body (serialised here). */
  body?: unknown;
  /** A raw body, sent as is (malformed JSON, other media types, oversized payloads). */
  rawBody?: string | Buffer;
  /** Content-Type of rawBody (default application/json). */
  contentType?: string;
  /**
   * The client address (default 127.0.0.1): limits kept per IP stay out of the way of scenarios.
   */
  remoteAddress?: string;
  /** The status(es) the scenario expects; the request fails its scenario otherwise. */
  expect: number | readonly number[];
}

export interface ContractResponse {
  status: number;
  headers: LightMyRequestResponse['headers'];
  text: string;
  /** The parsed JSON body, or undefined when it is not JSON. */
  json: any;
}

/**
 * Headers the document promises on every response whose feature has not landed yet:
 * missing ones are listed in the report, not failed. Present ones are still validated.
 */
export const DEFERRED_HEADERS: ReadonlyMap<string, string> = new Map([
  ['ratelimit-limit', 'rate limiting (a later issue)'],
  ['ratelimit-remaining', 'rate limiting (a later issue)'],
  ['ratelimit-reset', 'rate limiting (a later issue)'],
]);

/** The error code of each HTTP status ("Errors" table of the document's description). */
const ERROR_CODE_OF_STATUS: Readonly<Record<number, string>> = {
  400: 'validation_error',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  500: 'internal_error',
  503: 'service_unavailable',
};

const BEARER_SCHEMES = new Set(['apiKey', 'oauth2']);
/** The HTTP Basic client authentication of /oauth/token and /oauth/revoke (client_secret_basic). */
const CLIENT_BASIC_SCHEME = 'clientBasic';
/**
 * Schemas of the OAuth format (RFC 6749 §5.2): `{ error, error_description }`, never the API
 * envelope.
 */
const OAUTH_FORMAT_SCHEMAS = new Set([
  '#/components/schemas/OAuthError',
  '#/components/schemas/OAuthServiceError',
]);

export interface Problem {
  op: string;
  status: number;
  label: string;
  problem: string;
}

export class ContractRecorder {
  /** operationId -> status -> number of responses. */
  readonly coverage = new Map<string, Map<number, number>>();
  readonly problems: Problem[] = [];
  /** Deferred header -> number of responses that lacked it. */
  readonly deferredMissing = new Map<string, number>();
  /** Deferred header -> the `operationId status` pairs of the responses that lacked it. */
  readonly deferredMissingAt = new Map<string, Set<string>>();
  requests = 0;
  /** `operationId status` of the answer being checked (for deferredMissingAt). */
  private current: string | null = null;

  constructor(
    private readonly app: FastifyInstance,
    readonly doc: OpenApiDocument,
  ) {}

  url(
    op: DocOperation,
    path: Record<string, string> = {},
    query: Record<string, string | readonly string[]> = {},
  ): string {
    const url = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
      const value = path[name];
      if (value === undefined)
        throw new Error(`${op.operationId}: no value for path parameter ${name}`);
      return encodeURIComponent(value);
    });
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query))
      for (const v of typeof value === 'string' ? [value] : value) params.append(name, v);
    const search = params.toString();
    return search ? `${url}?${search}` : url;
  }

  /** Sends one request for an operation, checks the answer against the document and records it. */
  async send(t: Asserter, request: ContractRequest): Promise<ContractResponse> {
    const op = this.doc.operation(request.op);
    const headers: Record<string, string> = { ...request.headers };
    if (request.credential) headers.authorization = `Bearer ${request.credential}`;
    const options: InjectOptions = {
      method: op.method as InjectOptions['method'],
      url: this.url(op, request.path, request.query),
      headers,
    };
    if (request.remoteAddress) options.remoteAddress = request.remoteAddress;
    if (request.rawBody !== undefined) {
      headers['content-type'] = request.contentType ?? 'application/json';
      options.payload = request.rawBody;
    } else if (request.body !== undefined) {
      headers['content-type'] = 'application/json';
      options.payload = JSON.stringify(request.body);
    }

    const res = await this.app.inject(options);
    this.requests += 1;
    const response: ContractResponse = {
      status: res.statusCode,
      headers: res.headers,
      text: res.body,
      json: undefined,
    };
    const media = baseMediaType(header(res.headers, 'content-type'));
    if (media && isJsonMedia(media) && res.body.length > 0) {
      try {
        response.json = JSON.parse(res.body);
      } catch {
        // reported by check()
      }
    }

    const perStatus = this.coverage.get(op.operationId) ?? new Map<number, number>();
    perStatus.set(res.statusCode, (perStatus.get(res.statusCode) ?? 0) + 1);
    this.coverage.set(op.operationId, perStatus);

    const where = `${op.operationId} ${op.method} ${options.url!.toString().slice(0, 80)} -> ${res.statusCode} (${request.label})`;
    this.current = `${op.operationId} ${res.statusCode}`;
    const problems = this.check(op, headers, response);
    this.current = null;
    for (const problem of problems)
      this.problems.push({
        op: op.operationId,
        status: res.statusCode,
        label: request.label,
        problem,
      });
    t.strictSame(problems, [], `contract: ${where}`, { body: res.body.slice(0, 600) });

    const expected = typeof request.expect === 'number' ? [request.expect] : request.expect;
    t.ok(
      expected.includes(res.statusCode),
      `scenario: ${where}, expected ${expected.join(' or ')}`,
      {
        body: res.body.slice(0, 600),
      },
    );
    return response;
  }

  /** Everything the document says about this answer; returns the problems found. */
  check(op: DocOperation, requestHeaders: Record<string, string>, res: ContractResponse): string[] {
    const problems: string[] = [];
    const requestId = header(res.headers, 'x-request-id');
    const documented = responseFor(op, res.status);
    if (!documented) {
      problems.push(
        `status ${res.status} is not documented for ${op.operationId} (documented: ${[...op.responses.keys()].join(', ')})`,
      );
    } else {
      problems.push(...this.checkBody(documented, res));
      problems.push(...this.checkHeaders(documented, res));
    }
    if (requestId === undefined)
      problems.push('no X-Request-Id header (promised on every response)');

    const body = res.json as
      | {
          meta?: { request_id?: unknown; environment?: unknown };
          error?: { code?: unknown; details?: unknown };
        }
      | undefined;
    if (body && typeof body === 'object' && body.meta && typeof body.meta === 'object') {
      if (body.meta.request_id !== requestId) {
        problems.push(
          `meta.request_id ${JSON.stringify(body.meta.request_id)} differs from X-Request-Id ${JSON.stringify(requestId)}`,
        );
      }
      // "meta.environment echoes the credential's environment (read from the key prefix, so a
      // rejected svc_sandbox_… key still gets sandbox in its 401); live for anonymous and OAuth."
      const authorization = requestHeaders.authorization ?? '';
      const wanted = /^Bearer +svc_sandbox_/i.test(authorization) ? 'sandbox' : 'live';
      if (body.meta.environment !== wanted) {
        problems.push(
          `meta.environment is ${JSON.stringify(body.meta.environment)}, the credential's environment is ${wanted}`,
        );
      }
    }
    if (
      body &&
      typeof body === 'object' &&
      body.error &&
      typeof body.error === 'object' &&
      body.meta
    ) {
      const wantedCode = ERROR_CODE_OF_STATUS[res.status];
      if (wantedCode && body.error.code !== wantedCode) {
        problems.push(
          `error.code is ${JSON.stringify(body.error.code)}, the Errors table gives ${wantedCode} for ${res.status}`,
        );
      }
      // "error.details is present on validation_error only"
      const hasDetails = body.error.details !== undefined;
      if (body.error.code === 'validation_error' && !hasDetails)
        problems.push('validation_error without error.details');
      if (body.error.code !== 'validation_error' && hasDetails)
        problems.push(`error.details on ${String(body.error.code)} (validation_error only)`);
    }

    // "401 responses carry WWW-Authenticate: Bearer (RFC 6750)": `Bearer realm="api"` when no
    // credential was sent, `Bearer realm="api", error="invalid_token"` when it was rejected
    // (components.headers.WWW-Authenticate). An Authorization header of another scheme sends
    // no Bearer credential: no error code then (RFC 6750 §3.1).
    const bearerSecured = op.security.some((r) =>
      Object.keys(r).some((s) => BEARER_SCHEMES.has(s)),
    );
    if (res.status === 401 && bearerSecured) {
      const challenge = header(res.headers, 'www-authenticate') ?? '';
      const bearerSent = /^Bearer /i.test(requestHeaders.authorization ?? '');
      if (!/^Bearer\b/i.test(challenge)) {
        problems.push(
          `401 without a Bearer WWW-Authenticate challenge (got ${JSON.stringify(challenge)})`,
        );
      } else if (bearerSent && !/error="invalid_token"/.test(challenge)) {
        problems.push(
          `401 for a rejected Bearer credential: WWW-Authenticate ${JSON.stringify(challenge)} lacks error="invalid_token"`,
        );
      } else if (!bearerSent && /error=/.test(challenge)) {
        problems.push(
          `401 without a Bearer credential: WWW-Authenticate ${JSON.stringify(challenge)} should carry no error code`,
        );
      }
    }
    // OAuthInvalidClient: "`Basic realm=\"oauth\"`, sent when the client used HTTP Basic
    // authentication".
    const basicSecured = op.security.some((r) => CLIENT_BASIC_SCHEME in r);
    if (res.status === 401 && basicSecured && /^Basic /i.test(requestHeaders.authorization ?? '')) {
      const challenge = header(res.headers, 'www-authenticate') ?? '';
      if (!/^Basic\b/i.test(challenge))
        problems.push(
          `401 after HTTP Basic client authentication without a Basic challenge (got ${JSON.stringify(challenge)})`,
        );
    }
    // The OAuth format is "not wrapped in the API envelope".
    if (
      documented &&
      this.isOAuthFormat(documented, res) &&
      body &&
      typeof body === 'object' &&
      ('meta' in body || 'data' in body)
    ) {
      problems.push('an OAuth-format body wrapped in the API envelope (meta/data)');
    }
    return problems;
  }

  /** Whether the documented JSON schema of this answer is one of the OAuth-format schemas. */
  private isOAuthFormat(documented: DocResponse, res: ContractResponse): boolean {
    const media = baseMediaType(header(res.headers, 'content-type'));
    const pointer = media ? documented.content.get(media)?.schemaPointer : undefined;
    if (!pointer) return false;
    const ref = (this.doc.at(pointer) as { $ref?: unknown } | undefined)?.$ref;
    return typeof ref === 'string' && OAUTH_FORMAT_SCHEMAS.has(ref);
  }

  private checkBody(documented: DocResponse, res: ContractResponse): string[] {
    const problems: string[] = [];
    const contentType = header(res.headers, 'content-type');
    const media = baseMediaType(contentType);
    if (documented.content.size === 0) {
      if (res.text.length > 0)
        problems.push(
          `a body (${contentType ?? 'no Content-Type'}) where ${res.status} documents none`,
        );
      return problems;
    }
    const definition = media ? documented.content.get(media) : undefined;
    if (!definition) {
      problems.push(
        `Content-Type ${JSON.stringify(contentType)} is not documented for ${res.status} (documented: ${[...documented.content.keys()].join(', ')})`,
      );
      return problems;
    }
    if (!definition.schemaPointer) return problems;
    let value: unknown = res.text;
    if (isJsonMedia(media!)) {
      if (res.json === undefined)
        return [...problems, `the ${media} body is not JSON: ${res.text.slice(0, 120)}`];
      value = res.json;
    } else if (isYamlMedia(media!)) {
      try {
        value = parseYaml(res.text);
      } catch (err) {
        return [...problems, `the ${media} body is not YAML: ${(err as Error).message}`];
      }
    }
    for (const error of this.doc.validate(definition.schemaPointer, value))
      problems.push(`body: ${error}`);
    return problems;
  }

  private checkHeaders(documented: DocResponse, res: ContractResponse): string[] {
    const problems: string[] = [];
    for (const [name, definition] of documented.headers) {
      const raw = header(res.headers, name);
      if (raw === undefined) {
        if (!definition.required) continue;
        const deferred = DEFERRED_HEADERS.get(name);
        if (!deferred) {
          problems.push(`required header ${name} is missing`);
        } else if (this.current) {
          // Counted for answers of the server only, not for the checker's own tests.
          this.deferredMissing.set(name, (this.deferredMissing.get(name) ?? 0) + 1);
          this.deferredMissingAt.set(
            name,
            (this.deferredMissingAt.get(name) ?? new Set()).add(this.current),
          );
        }
        continue;
      }
      if (!definition.schemaPointer) continue;
      const schema = this.doc.at(definition.schemaPointer) as { type?: unknown } | undefined;
      const type = schema?.type;
      const value =
        type === 'integer' || type === 'number'
          ? /^-?\d+(\.\d+)?$/.test(raw)
            ? Number(raw)
            : raw
          : raw;
      for (const error of this.doc.validate(definition.schemaPointer, value))
        problems.push(`header ${name}: ${error}`);
    }
    return problems;
  }
}

export function header(
  headers: LightMyRequestResponse['headers'],
  name: string,
): string | undefined {
  const value = headers[name.toLowerCase()];
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(', ') : String(value);
}
