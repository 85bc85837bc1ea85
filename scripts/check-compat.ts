/**
 * Backward-compatibility check of the OpenAPI document against the last released version
 * (docs/api.md, OpenAPI "Versioning"): exits 1 when the document breaks a v1 client, unless
 * `info.version` moves to a new major version (a breaking change ships as v2 under /api/v2).
 *
 * Usage: node --import tsx scripts/check-compat.ts [--base openapi/released/v1.yaml] [--head
 * openapi/openapi.yaml]
 *
 * The diff and its rules are Optic's (`optic diff --check`, its `breaking-changes` ruleset:
 * removed operations, status codes or response properties, new required request fields or
 * parameters, changed types, narrowed enums...). Before diffing, both documents are prepared the
 * same way so that the rules cover what this API promises:
 *   - each webhook becomes a pseudo-operation `POST /webhooks/{name}` whose payload is a
 *     response (we send it, receivers parse it), so removing a webhook or a payload field, or
 *     changing a payload field's type, is breaking too (Optic does not check `webhooks` itself);
 *   - the enums the document declares open within v1 (error codes, event types: "new error
 *     codes and new event types may appear") lose their `enum`, so adding a value passes;
 *   - `jsonSchemaDialect` (the 3.1 default, which Optic's strict validator rejects) is dropped.
 * Not caught by Optic: tightened constraints (a lower maxLength, a new pattern). Review those.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { parse, stringify } from 'yaml';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const optic = path.join(root, 'node_modules/.bin/optic');

/** Schemas whose enum may grow within v1 (openapi.yaml "Errors" and "Versioning"). */
export const OPEN_ENUMS = ['ErrorCode', 'EventType'];

type Doc = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export function prepareForDiff(doc: Doc): Doc {
  const out: Doc = structuredClone(doc);
  delete out.jsonSchemaDialect;
  for (const name of OPEN_ENUMS) {
    const schema = out.components?.schemas?.[name];
    if (schema && Array.isArray(schema.enum)) delete schema.enum;
  }
  out.paths ??= {};
  for (const [name, item] of Object.entries<Doc>(out.webhooks ?? {})) {
    const operations: Doc = {};
    for (const [method, op] of Object.entries<Doc>(item)) {
      if (!['get', 'put', 'post', 'delete', 'patch'].includes(method)) continue;
      operations[method] = {
        operationId: op.operationId ?? `webhook ${name}`,
        summary: `Webhook ${name} (payload shown as a response: the API sends it)`,
        responses: {
          '200': {
            description: 'The webhook payload',
            ...(op.requestBody?.content ? { content: op.requestBody.content } : {}),
          },
        },
      };
    }
    out.paths[`/webhooks/${name}`] = operations;
  }
  delete out.webhooks;
  untypeYamlText(out);
  return out;
}

const YAML_MEDIA = /^application\/(.+\+)?yaml$/;

/**
 * A response schema describes the body as its media type parses it (OpenAPI 3.1, "Media Type
 * Object"): for YAML, the value the text parses to. v1.0.0 described GET /api/v1/openapi.yaml
 * as `type: string`, the text itself, which says nothing of that value (issue #58: tools parse
 * the YAML, then report the object as not a string); such a schema is read as no schema, so
 * that describing the parsed value is additive. Any other YAML schema is compared as is.
 */
function untypeYamlText(doc: Doc): void {
  for (const item of Object.values<Doc>(doc.paths ?? {}))
    for (const op of Object.values<Doc>(item))
      for (const response of Object.values<Doc>(op?.responses ?? {}))
        for (const [media, content] of Object.entries<Doc>(response?.content ?? {}))
          if (YAML_MEDIA.test(media) && isTextOnly(content.schema)) {
            delete content.schema;
            delete content.example;
          }
}

const isTextOnly = (schema: Doc | undefined) =>
  schema !== undefined && Object.keys(schema).length === 1 && schema.type === 'string';

/** Runs the Optic CLI (node_modules/.bin, no npx) and collects its output. */
function runOptic(args: string[], cwd: string): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(optic, args, {
      cwd,
      // No usage reporting: CI reaches no network but the registries, and nothing is to be sent.
      env: {
        ...process.env,
        OPTIC_TELEMETRY_LEVEL: 'off',
        NO_COLOR: '1',
        FORCE_COLOR: '0',
        NODE_EXTRA_CA_CERTS: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGTERM'), 120_000);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, output });
    });
  });
}

export const majorOf = (doc: Doc): number => Number(String(doc.info?.version ?? '0').split('.')[0]);

export interface CompatResult {
  ok: boolean;
  /** Optic's report. */
  output: string;
  baseVersion: string;
  headVersion: string;
  majorChange: boolean;
}

export async function checkCompat(basePath: string, headPath: string): Promise<CompatResult> {
  const base = parse(readFileSync(basePath, 'utf8')) as Doc;
  const head = parse(readFileSync(headPath, 'utf8')) as Doc;
  const work = mkdtempSync(path.join(tmpdir(), 'compat-'));
  try {
    // Named after the inputs, so Optic's report says which file is which.
    const baseFile = path.join(work, `base-${path.basename(basePath)}`);
    const headFile = path.join(work, `head-${path.basename(headPath)}`);
    const standard = path.join(work, 'standard.yml');
    writeFileSync(baseFile, stringify(prepareForDiff(base)));
    writeFileSync(headFile, stringify(prepareForDiff(head)));
    // A new major version (v2, served under /api/v2) may break v1: OpenAPI "Versioning".
    writeFileSync(
      standard,
      'ruleset:\n  - breaking-changes:\n      skip_when_major_version_changes: true\n',
    );
    const run = await runOptic(
      ['diff', baseFile, headFile, '--check', '--standard', standard, '--severity', 'error'],
      work,
    );
    const output = run.output;
    if (run.status !== 0 && run.status !== 1)
      throw new Error(`optic exited with ${run.status}:\n${output}`);
    // Exit 1 is either failed checks or an invalid document; only the former is a verdict.
    if (run.status === 1 && !/This is a breaking change|Checks: \d+\/\d+ passed/.test(output)) {
      throw new Error(`optic could not compare the documents:\n${output}`);
    }
    return {
      ok: run.status === 0,
      output,
      baseVersion: String(base.info?.version),
      headVersion: String(head.info?.version),
      majorChange: majorOf(head) > majorOf(base),
    };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: 'string', default: path.join(root, 'openapi/released/v1.yaml') },
      head: { type: 'string', default: path.join(root, 'openapi/openapi.yaml') },
    },
  });
  const result = await checkCompat(values.base!, values.head!);
  process.stdout.write(result.output.endsWith('\n') ? result.output : `${result.output}\n`);
  const versions = `${path.relative(root, values.base!)} (${result.baseVersion}) -> ${path.relative(root, values.head!)} (${result.headVersion})`;
  if (result.ok) {
    const note = result.majorChange
      ? ': a new major version, breaking changes allowed'
      : ': no breaking change';
    process.stdout.write(`compatibility: ${versions}${note}\n`);
    return;
  }
  process.stderr.write(
    `compatibility: ${versions}: BREAKING CHANGES (above). Within v1 only additive changes ship ` +
      '(README "Versioning"); make the change additive, or move it to v2 (info.version 2.x, /api/v2).\n',
  );
  process.exitCode = 1;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  await main();
