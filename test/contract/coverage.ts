/** The coverage table of the contract tests: operation x documented status. */
import type { DocOperation } from './document.ts';

export interface CoverageReport {
  /** Markdown-ish table, one row per operation, one column per status seen in the document. */
  table: string;
  /** `operationId status` pairs documented but never answered. */
  notExercised: string[];
  /** Operations with no documented 2xx answered. */
  without2xx: string[];
  /** `operationId status` pairs answered but not documented (also failed where they happened). */
  undocumented: string[];
}

const isDocumentedStatus = (key: string) => /^\d{3}$/.test(key);

export function coverageReport(
  operations: readonly DocOperation[],
  coverage: ReadonlyMap<string, ReadonlyMap<number, number>>,
): CoverageReport {
  const statuses = new Set<number>();
  for (const op of operations) {
    for (const key of op.responses.keys()) if (isDocumentedStatus(key)) statuses.add(Number(key));
    for (const status of coverage.get(op.operationId)?.keys() ?? []) statuses.add(status);
  }
  const columns = [...statuses].sort((a, b) => a - b);
  const width = Math.max(...operations.map((op) => op.operationId.length), 'operation'.length);

  const lines = [
    `| ${'operation'.padEnd(width)} | ${columns.map((c) => String(c).padStart(4)).join(' | ')} |`,
    `|${'-'.repeat(width + 2)}|${columns.map(() => '-----:').join('|')}|`,
  ];
  const notExercised: string[] = [];
  const without2xx: string[] = [];
  const undocumented: string[] = [];
  for (const op of operations) {
    const seen = coverage.get(op.operationId) ?? new Map<number, number>();
    const cells = columns.map((status) => {
      const documented = op.responses.has(String(status));
      const count = seen.get(status) ?? 0;
      if (documented && count > 0) return String(count).padStart(4);
      if (documented) {
        notExercised.push(`${op.operationId} ${status}`);
        return '   -';
      }
      if (count > 0) {
        undocumented.push(`${op.operationId} ${status}`);
        return `!${count}`.padStart(4);
      }
      return '    ';
    });
    const success = [...op.responses.keys()]
      .filter((k) => /^2\d\d$/.test(k))
      .some((k) => (seen.get(Number(k)) ?? 0) > 0);
    if (!success) without2xx.push(op.operationId);
    lines.push(`| ${op.operationId.padEnd(width)} | ${cells.join(' | ')} |`);
  }
  lines.push(
    '',
    'cells: number of responses; "-" documented but not exercised; blank not documented; "!n" answered but not documented.',
  );
  return { table: lines.join('\n'), notExercised, without2xx, undocumented };
}
