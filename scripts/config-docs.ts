/**
 * docs/configuration.md's table of environment variables, generated from the schema in
 * src/config.ts (each variable's name, default as shown, and meaning): `npm run docs:config`
 * writes it between the markers, `npm run lint:config` (part of `npm run lint` and CI) fails when
 * the committed table differs from the schema.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { documentedVariables } from '../src/config.ts';
import { projectFile } from '../src/project-files.ts';

const file = projectFile('docs', 'configuration.md');
const BEGIN =
  '<!-- generated from src/config.ts by `npm run docs:config`: edit the schema, not this table -->';
const END = '<!-- end of the generated table -->';

const table = [
  '| name | default | meaning |',
  '|---|---|---|',
  ...documentedVariables().map(({ env, shown, doc }) => `| \`${env}\` | ${shown} | ${doc} |`),
].join('\n');

const current = readFileSync(file, 'utf8');
const start = current.indexOf(BEGIN);
const end = current.indexOf(END);
if (start < 0 || end < start) {
  console.error(`${file}: the markers of the generated table are missing`);
  process.exit(1);
}
const wanted = `${current.slice(0, start)}${BEGIN}\n\n${table}\n\n${current.slice(end)}`;
if (process.argv.includes('--check')) {
  if (wanted !== current) {
    console.error(
      'docs/configuration.md: the table of environment variables differs from src/config.ts: run `npm run docs:config` and commit',
    );
    process.exit(1);
  }
} else if (wanted !== current) {
  writeFileSync(file, wanted);
}
