import { readFileSync } from 'node:fs';
import { parse, stringify } from 'yaml';
import { projectFile } from '../project-files.ts';

export const openapiPath = projectFile('openapi', 'openapi.yaml');

export interface ServedDocument {
  json: string;
  yaml: string;
}

/** The document as served: read once, with `servers` pointing at this deployment's BASE_URL. */
export function loadServedDocument(baseUrl: string): ServedDocument {
  const document = parse(readFileSync(openapiPath, 'utf8')) as Record<string, unknown>;
  document.servers = [{ url: baseUrl, description: 'This server' }];
  return { json: JSON.stringify(document), yaml: stringify(document) };
}
