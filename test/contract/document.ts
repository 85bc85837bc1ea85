/**
 * The OpenAPI document as the contract tests read it: straight from openapi/openapi.yaml with
 * `yaml`, never through the generated code, so the tests check the generator and the server
 * independently. Response schemas are compiled with Ajv (JSON Schema 2020-12, the dialect of
 * OpenAPI 3.1) against the whole document, added under one $id, so every `#/components/...`
 * reference resolves exactly as it is written.
 */
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import formatsPlugin from 'ajv-formats';
import { parse } from 'yaml';

export type Node = Record<string, unknown>;

export const DOCUMENT_URL = new URL('../../openapi/openapi.yaml', import.meta.url);
/** The $id under which the whole document is known to Ajv. */
const DOCUMENT_ID = 'https://contract.test/openapi.yaml';

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

type SecurityRequirement = Record<string, string[]>;

export interface DocParameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required: boolean;
  example: unknown;
  hasExample: boolean;
  schemaPointer: string | null;
}

interface DocExample {
  name: string;
  value: unknown;
}

export interface DocMedia {
  /** JSON Pointer of the media type's schema in the document, if it has one. */
  schemaPointer: string | null;
  examples: DocExample[];
}

interface DocHeader {
  required: boolean;
  schemaPointer: string | null;
}

export interface DocResponse {
  status: string;
  pointer: string;
  /** Lower-cased header name -> definition. */
  headers: Map<string, DocHeader>;
  /** Media type -> definition; empty when the response has no body. */
  content: Map<string, DocMedia>;
}

export interface DocOperation {
  operationId: string;
  /** Upper case, as Fastify and HTTP write it. */
  method: string;
  path: string;
  /** `paths` or `webhooks`. */
  section: 'paths' | 'webhooks';
  /** The operation's tags (System, Listings, Events, OAuth, Profiles). */
  tags: string[];
  pointer: string;
  security: SecurityRequirement[];
  parameters: DocParameter[];
  requestBody: { required: boolean; content: Map<string, DocMedia> } | null;
  /** Status code (or `default`, `4XX`) -> response. */
  responses: Map<string, DocResponse>;
}

const isNode = (value: unknown): value is Node =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** One JSON Pointer token, escaped (RFC 6901) and made safe for a URI fragment. */
function pointerToken(token: string): string {
  return encodeURIComponent(token.replaceAll('~', '~0').replaceAll('/', '~1'));
}

export class OpenApiDocument {
  readonly raw: Node;
  readonly operations: DocOperation[];
  private readonly ajv: Ajv2020;
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(text: string = readFileSync(DOCUMENT_URL, 'utf8')) {
    this.raw = parse(text) as Node;
    this.ajv = new Ajv2020({
      strict: false,
      allErrors: true,
      validateSchema: false,
      validateFormats: true,
    });
    // ajv-formats is CommonJS: under NodeNext its default import is the module object.
    const addFormats = ((formatsPlugin as unknown as { default?: unknown }).default ??
      formatsPlugin) as (a: Ajv2020) => Ajv2020;
    addFormats(this.ajv);
    this.ajv.addSchema(this.raw, DOCUMENT_ID);
    this.operations = this.readOperations();
  }

  /** The value at a JSON Pointer written with pointerToken (URI-fragment form). */
  at(pointer: string): unknown {
    let node: unknown = this.raw;
    for (const token of pointer.split('/').slice(1)) {
      if (!isNode(node) && !Array.isArray(node)) return undefined;
      const key = decodeURIComponent(token).replaceAll('~1', '/').replaceAll('~0', '~');
      node = (node as Record<string, unknown>)[key];
    }
    return node;
  }

  /** Follows `$ref`s of non-schema objects (responses, parameters, headers) to their target. */
  deref(node: unknown, pointer: string): { node: Node; pointer: string } {
    let current = node;
    let at = pointer;
    for (let hops = 0; isNode(current) && typeof current.$ref === 'string'; hops += 1) {
      if (hops > 10 || !current.$ref.startsWith('#/'))
        throw new Error(`cannot follow $ref ${String(current.$ref)} at ${at}`);
      at = current.$ref
        .slice(1)
        .split('/')
        .map((t, i) => (i === 0 ? t : pointerToken(t.replaceAll('~1', '/').replaceAll('~0', '~'))))
        .join('/');
      current = this.at(at);
    }
    if (!isNode(current)) throw new Error(`no object at ${at}`);
    return { node: current, pointer: at };
  }

  operation(operationId: string): DocOperation {
    const op = this.operations.find((o) => o.operationId === operationId);
    if (!op) throw new Error(`the document has no operation ${operationId}`);
    return op;
  }

  /** The compiled validator of the schema at a pointer (cached). */
  validator(schemaPointer: string): ValidateFunction {
    let validate = this.validators.get(schemaPointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `${DOCUMENT_ID}#${schemaPointer}` });
      this.validators.set(schemaPointer, validate);
    }
    return validate;
  }

  /**
   * Validates a value against the schema at a pointer; returns readable Ajv errors (empty when
   * valid).
   */
  validate(schemaPointer: string, value: unknown): string[] {
    const validate = this.validator(schemaPointer);
    if (validate(value)) return [];
    return formatErrors(validate.errors ?? []);
  }

  schemaPointerOf(componentSchema: string): string {
    return `/components/schemas/${pointerToken(componentSchema)}`;
  }

  private readOperations(): DocOperation[] {
    const result: DocOperation[] = [];
    const defaultSecurity = (this.raw.security as SecurityRequirement[] | undefined) ?? [];
    for (const section of ['paths', 'webhooks'] as const) {
      const items = this.raw[section];
      if (!isNode(items)) continue;
      for (const [path, item] of Object.entries(items)) {
        if (!isNode(item)) continue;
        const itemPointer = `/${section}/${pointerToken(path)}`;
        const shared = this.readParameters(item.parameters, `${itemPointer}/parameters`);
        for (const method of HTTP_METHODS) {
          const op = item[method];
          if (!isNode(op) || typeof op.operationId !== 'string') continue;
          const pointer = `${itemPointer}/${method}`;
          const own = this.readParameters(op.parameters, `${pointer}/parameters`);
          // Operation-level parameters override path-level ones with the same name and location.
          const parameters = [
            ...shared.filter((p) => !own.some((o) => o.name === p.name && o.in === p.in)),
            ...own,
          ];
          result.push({
            operationId: op.operationId,
            method: method.toUpperCase(),
            path,
            section,
            tags: Array.isArray(op.tags) ? op.tags.map(String) : [],
            pointer,
            security: (op.security as SecurityRequirement[] | undefined) ?? defaultSecurity,
            parameters,
            requestBody: this.readRequestBody(op.requestBody, `${pointer}/requestBody`),
            responses: this.readResponses(op.responses, `${pointer}/responses`),
          });
        }
      }
    }
    return result;
  }

  private readParameters(list: unknown, pointer: string): DocParameter[] {
    if (!Array.isArray(list)) return [];
    return list.map((entry, index) => {
      const { node, pointer: at } = this.deref(entry, `${pointer}/${index}`);
      return {
        name: String(node.name),
        in: node.in as DocParameter['in'],
        required: node.required === true,
        example: node.example,
        hasExample: 'example' in node,
        schemaPointer: isNode(node.schema) ? `${at}/schema` : null,
      };
    });
  }

  private readContent(content: unknown, pointer: string): Map<string, DocMedia> {
    const result = new Map<string, DocMedia>();
    if (!isNode(content)) return result;
    for (const [media, definition] of Object.entries(content)) {
      if (!isNode(definition)) continue;
      const at = `${pointer}/${pointerToken(media)}`;
      const examples: DocExample[] = [];
      if ('example' in definition) examples.push({ name: 'example', value: definition.example });
      if (isNode(definition.examples)) {
        for (const [name, example] of Object.entries(definition.examples)) {
          const { node } = this.deref(example, `${at}/examples/${pointerToken(name)}`);
          if ('value' in node) examples.push({ name, value: node.value });
        }
      }
      result.set(media.toLowerCase(), {
        schemaPointer: isNode(definition.schema) ? `${at}/schema` : null,
        examples,
      });
    }
    return result;
  }

  private readRequestBody(body: unknown, pointer: string): DocOperation['requestBody'] {
    if (body === undefined) return null;
    const { node, pointer: at } = this.deref(body, pointer);
    return {
      required: node.required === true,
      content: this.readContent(node.content, `${at}/content`),
    };
  }

  private readResponses(responses: unknown, pointer: string): Map<string, DocResponse> {
    const result = new Map<string, DocResponse>();
    if (!isNode(responses)) return result;
    for (const [status, entry] of Object.entries(responses)) {
      const { node, pointer: at } = this.deref(entry, `${pointer}/${pointerToken(status)}`);
      const headers = new Map<string, DocHeader>();
      if (isNode(node.headers)) {
        for (const [name, header] of Object.entries(node.headers)) {
          const resolved = this.deref(header, `${at}/headers/${pointerToken(name)}`);
          headers.set(name.toLowerCase(), {
            required: resolved.node.required === true,
            schemaPointer: isNode(resolved.node.schema) ? `${resolved.pointer}/schema` : null,
          });
        }
      }
      result.set(status, {
        status,
        pointer: at,
        headers,
        content: this.readContent(node.content, `${at}/content`),
      });
    }
    return result;
  }
}

function formatErrors(errors: ErrorObject[]): string[] {
  return errors.map((e) => {
    const params = Object.keys(e.params ?? {}).length > 0 ? ` ${JSON.stringify(e.params)}` : '';
    return `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}${params} [schema ${e.schemaPath}]`;
  });
}

/** The documented response for a status: exact code, then `4XX`-style ranges, then `default`. */
export function responseFor(op: DocOperation, status: number): DocResponse | undefined {
  return (
    op.responses.get(String(status)) ??
    op.responses.get(`${String(status)[0]}XX`) ??
    op.responses.get('default')
  );
}

/** Media types are compared without parameters and case-insensitively (RFC 9110 §8.3.1). */
export function baseMediaType(contentType: string | undefined): string | null {
  if (!contentType) return null;
  return contentType.split(';')[0]!.trim().toLowerCase();
}

export function isJsonMedia(media: string): boolean {
  return media === 'application/json' || media.endsWith('+json');
}

/** YAML bodies: their schema describes the value the text parses to, as a JSON body's does. */
export function isYamlMedia(media: string): boolean {
  return media === 'application/yaml' || media.endsWith('+yaml');
}
