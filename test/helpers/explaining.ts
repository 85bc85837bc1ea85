/**
 * A database stand-in that runs each statement it is given prefixed with EXPLAIN (or EXPLAIN
 * ANALYZE) on `tx`, and answers with the plan's lines as rows: a repository handed it returns
 * the plan of its own SQL, so a plan test follows the query as it evolves. It is Drizzle over a
 * Connection of its own (src/db/database.ts), so every statement a repository runs reaches it
 * (db.execute, src/db/rows.ts queryRows and RenderedSql), rendered as it would be sent.
 */
import { sql, type Query } from 'drizzle-orm';
import { drizzleOn, type Connection } from '../../src/db/database.ts';
import type { Db } from '../../src/db/client.ts';

export function explaining(tx: Db, prefix: 'explain' | 'explain analyze'): Db {
  const connection: Connection = {
    query: (text, params) => tx.rendered({ sql: `${prefix} ${text}`, params }),
    transaction: (work) => work(connection),
  };
  return drizzleOn(connection);
}

/** The plan's text, from what `explaining` answered: rows, or PGlite's `{ rows }`. */
export function planText(result: unknown): string {
  const rows = Array.isArray(result) ? result : (result as { rows: unknown[] }).rows;
  return rows.map((r) => Object.values(r as Record<string, string>)[0]).join('\n');
}

/** A node of a JSON plan (EXPLAIN (FORMAT JSON)), as far as the plan tests read it. */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Function Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/** A plan's nodes, the root first. */
export const planNodes = (node: PlanNode): PlanNode[] => [
  node,
  ...(node.Plans ?? []).flatMap(planNodes),
];

/** The root node of what EXPLAIN (FORMAT JSON) answered: rows, or PGlite's `{ rows }`. */
export function jsonPlan(result: unknown): PlanNode {
  const rows = (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as Record<
    string,
    unknown
  >[];
  const value = Object.values(rows[0]!)[0];
  return ((typeof value === 'string' ? JSON.parse(value) : value) as { Plan: PlanNode }[])[0]!.Plan;
}

/** A parameter's value as a literal of EXECUTE's. */
function literal(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return `'${String(value).replace(/'/g, "''")}'`;
}

let prepared = 0;
/**
 * The plan of a statement run as a prepared statement under `mode` (force_generic_plan: planned
 * without its values, as PostgreSQL settles on for a prepared statement), EXPLAIN ANALYZE'd on
 * `tx`, which should be a transaction (the setting is local to it).
 */
export async function explainPrepared(
  tx: Db,
  statement: Query,
  mode: 'force_custom_plan' | 'force_generic_plan',
): Promise<PlanNode> {
  const name = `plan_test_${(prepared += 1)}`;
  await tx.execute(sql.raw(`set local plan_cache_mode = ${mode}`));
  await tx.execute(sql.raw(`prepare ${name} as ${statement.sql}`));
  const args = statement.params.length ? `(${statement.params.map(literal).join(', ')})` : '';
  const result = await tx.execute(sql.raw(`explain (analyze, format json) execute ${name}${args}`));
  await tx.execute(sql.raw(`deallocate ${name}`));
  return jsonPlan(result);
}
