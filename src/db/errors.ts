/** PostgreSQL error classification, identical on postgres.js and PGlite (both expose SQLSTATE as `code`). */
function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown; cause?: { code?: unknown } } | null)?.code ?? (err as { cause?: { code?: unknown } })?.cause?.code;
  return typeof code === 'string' ? code : undefined;
}

export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  if (sqlState(err) !== '23505') return false;
  if (!constraint) return true;
  const e = err as { constraint?: string; constraint_name?: string; cause?: { constraint?: string; constraint_name?: string } };
  const name = e.constraint_name ?? e.constraint ?? e.cause?.constraint_name ?? e.cause?.constraint;
  return name === constraint;
}
