/**
 * Which methods a path of the document allows, for the `405 method_not_allowed` and its `Allow`
 * header (OpenAPI "Errors"). A URL is the document path it matches that is most literal, segment
 * by segment (`/listings/batch` before `/listings/{id}`), as the router picks a route: a literal
 * segment wins over a parameter, whatever the method.
 */
import { MethodNotAllowedError } from '../errors.ts';
import { operations } from '../generated/operations.ts';

interface DocumentPath {
  /** Fastify's form of the path (`:id`). */
  url: string;
  regex: RegExp;
  /** One per segment: 0 for a literal, 1 for a parameter; lower sorts first (more literal). */
  rank: number[];
  methods: string[];
}

const byPath = new Map<string, DocumentPath>();
for (const op of Object.values(operations)) {
  let path = byPath.get(op.path);
  if (!path) {
    const segments = op.path.split('/');
    path = {
      url: op.url,
      regex: new RegExp(
        `^${op.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/]+')}$`,
      ),
      rank: segments.map((segment) => (segment.startsWith('{') ? 1 : 0)),
      methods: [],
    };
    byPath.set(op.path, path);
  }
  path.methods.push(op.method);
}
const PATHS = [...byPath.values()].sort((a, b) => compareRanks(a.rank, b.rank));

function compareRanks(a: number[], b: number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** The document path a request path is, or undefined (no path of the document: a 404). */
function documentPath(path: string): DocumentPath | undefined {
  return PATHS.find((p) => p.regex.test(path));
}

/** The methods of the path's own operations, HEAD with GET (Fastify answers HEAD for GET). */
function allowedOn(path: DocumentPath): string[] {
  const methods = [...path.methods];
  if (methods.includes('GET')) methods.push('HEAD');
  return [...new Set(methods)];
}

/** The 405 for this method on this URL, or undefined: the method is allowed, or no such path. */
export function methodNotAllowed(method: string, url: string): MethodNotAllowedError | undefined {
  const path = documentPath(url.split('?')[0] ?? url);
  if (!path) return undefined;
  const allowed = allowedOn(path);
  if (allowed.includes(method)) return undefined;
  return new MethodNotAllowedError(
    `${method} is not allowed on this path; use ${allowed.join(', ')}.`,
    undefined,
    { allow: allowed.join(', ') },
  );
}

/**
 * The routes the router would otherwise give to a less literal path: each method that a path
 * lacks and a path with a parameter where it has a literal has (GET /listings/batch would be
 * GET /listings/{id}). Registered as 405s, so that the literal path answers for every method.
 */
export function shadowedRoutes(): { method: string; url: string }[] {
  const routes: { method: string; url: string }[] = [];
  for (const path of PATHS) {
    // The literal path as a URL: the paths that match it and are less literal shadow it.
    const shadowing = PATHS.filter(
      (other) => other.regex.test(path.url) && compareRanks(other.rank, path.rank) > 0,
    );
    const methods = new Set(shadowing.flatMap((other) => other.methods));
    for (const method of methods)
      if (!path.methods.includes(method)) routes.push({ method, url: path.url });
  }
  return routes;
}
