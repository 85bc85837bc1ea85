/**
 * No line over the configured width (Prettier's printWidth in .prettierrc.json) in the code of
 * src/, scripts/, test/, sdk/ and bench/, comments included. Prettier wraps code but never
 * splits a string, a template literal or a regular expression, so a line that holds one of those
 * may run longer:
 * the same exemptions as ESLint's max-len with ignoreStrings, ignoreTemplateLiterals,
 * ignoreRegExpLiterals and ignoreUrls. Lines are told apart with TypeScript's own scanner.
 * Exits 1 listing file:line for each line over the width.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import ts from 'typescript';

const width = (JSON.parse(readFileSync('.prettierrc.json', 'utf8')) as { printWidth: number })
  .printWidth;
const GENERATED = /^(src\/generated|sdk\/src\/generated|test\/scripts\/fixtures\/generated)\//;
const files = execFileSync(
  'git',
  ['ls-files', '--', 'src', 'scripts', 'test', 'sdk/src', 'sdk/scripts', 'bench/src', 'bench/test'],
  {
    encoding: 'utf8',
  },
)
  .split('\n')
  .filter((file) => /\.(ts|mjs)$/.test(file) && !GENERATED.test(file));

const LITERALS = new Set([
  ts.SyntaxKind.StringLiteral,
  ts.SyntaxKind.NoSubstitutionTemplateLiteral,
  ts.SyntaxKind.TemplateHead,
  ts.SyntaxKind.TemplateMiddle,
  ts.SyntaxKind.TemplateTail,
  ts.SyntaxKind.RegularExpressionLiteral,
]);

/** The lines (1-based) that hold a string, template or regular expression literal. */
function linesWithLiterals(text: string): Set<number> {
  const source = ts.createSourceFile('file.ts', text, ts.ScriptTarget.Latest, true);
  const lines = new Set<number>();
  const visit = (node: ts.Node): void => {
    if (LITERALS.has(node.kind) || ts.isTemplateExpression(node)) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      for (let line = start; line <= end; line += 1) lines.add(line + 1);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return lines;
}

const problems: string[] = [];
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const literals = linesWithLiterals(text);
  text.split('\n').forEach((line, index) => {
    if (line.length <= width || literals.has(index + 1) || /https?:\/\/\S+/.test(line)) return;
    problems.push(`${file}:${index + 1}: ${line.length} characters (width ${width})`);
  });
}
if (problems.length > 0) {
  process.stderr.write(`${problems.join('\n')}\n${problems.length} line(s) over ${width}.\n`);
  process.exit(1);
}
process.stdout.write(`${files.length} files, no line over ${width} outside literals.\n`);
