/**
 * What code deep under a request needs of it without being handed the request: one
 * AsyncLocalStorage store per request (src/plugins/tracing.ts enters it in the first onRequest
 * hook; the rest of the request, hooks and handler, runs inside it, and its onResponse hook runs
 * what waited for the answer). Outside a request
 * (the workers, the admin CLI, start-up) there is no store.
 *
 * On Node 24 and later an AsyncLocalStorage is carried by AsyncContextFrame; on Node 20 by a
 * promise hook on every promise once any store is entered: docs/performance.md ("The request
 * scope") measures what that costs a request.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface RequestScope {
  /** The W3C trace id of its `traceparent` header (src/lib/trace.ts), or null. */
  readonly traceId: string | null;
  /**
   * The time its statements have waited for the database so far, in ms: for a place at the
   * pool's gate, and through an outage (src/db/pool-gate.ts). One DATABASE_POOL_WAIT_MS is the
   * whole request's, not each statement's (issue #60).
   */
  databaseWaitedMs: number;
  /** Whether an outage touched one of its statements: its later ones are strict (pool-gate.ts). */
  databaseOutageSeen: boolean;
  /** What runs once the request is answered (afterAnswer), each function once. */
  readonly whenAnswered: Set<() => void>;
}

const scopes = new AsyncLocalStorage<RequestScope>();

/** Runs `next` (the rest of the request) inside a new scope, and returns that scope. */
export function runInRequestScope(traceId: string | null, next: () => void): RequestScope {
  const scope: RequestScope = {
    traceId,
    databaseWaitedMs: 0,
    databaseOutageSeen: false,
    whenAnswered: new Set(),
  };
  scopes.run(scope, next);
  return scope;
}

/** The scope of the request being served, or undefined outside one. */
export function requestScope(): RequestScope | undefined {
  return scopes.getStore();
}

/**
 * Runs `work`, and what it starts, outside any request's scope: the background passes a request
 * only wakes (the delivery worker, the matcher, the request log's flush), which would otherwise
 * inherit the scope of the request whose timer started them, and so its trace id and its wait.
 */
export function outsideRequestScope<T>(work: () => T): T {
  return scopes.exit(work);
}

/**
 * Runs `work` once the request being served is answered, when what it wrote has committed (or
 * rolled back): once per request however often it is given the same function. Outside a
 * request (the admin CLI, a background pass), after the current turn of the event loop.
 */
export function afterAnswer(work: () => void): void {
  const scope = scopes.getStore();
  if (scope) scope.whenAnswered.add(work);
  else setImmediate(work);
}

/** The request of `scope` is answered: what waited for it runs now, outside its scope. */
export function answered(scope: RequestScope): void {
  if (scope.whenAnswered.size === 0) return;
  const waiting = [...scope.whenAnswered];
  scope.whenAnswered.clear();
  scopes.exit(() => {
    for (const work of waiting) work();
  });
}
