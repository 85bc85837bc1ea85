/**
 * Files the server reads at run time (migrations, the OpenAPI document, page assets), by their
 * path from the project root. The root is found from this module's location, so the same code
 * works under tsx (src/...) and in the bundled build (dist/server.js, `npm run build`), where
 * every module shares the bundle's import.meta.url.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(start: string): string {
  for (let dir = start; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'openapi', 'openapi.yaml'))) return dir;
    if (path.dirname(dir) === dir)
      throw new Error(`the project root (with openapi/openapi.yaml) was not found above ${start}`);
  }
}

const projectRoot = findRoot(path.dirname(fileURLToPath(import.meta.url)));

export const projectFile = (...segments: string[]): string => path.join(projectRoot, ...segments);
