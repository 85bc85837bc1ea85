/**
 * The committed SQL snapshots (sql/snapshots/, written by scripts/sql-snapshots.ts; CI checks
 * them against the code with `npm run sql:snapshots -- --check`) are statements the database
 * accepts as they stand: each is prepared (parsed, its parameters' types inferred, planned against
 * the migrated schema) on the suite's database, so a snapshot is SQL a reviewer can trust, not
 * text that merely looks like it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import t from 'tap';
import { projectFile } from '../../src/project-files.ts';
import { buildTestApp } from '../helpers/app.ts';

const dir = projectFile('sql', 'snapshots');
const files = readdirSync(dir).filter((name) => name.endsWith('.sql'));
const app = await buildTestApp(t);

t.ok(files.length >= 21, 'the snapshots are there (the searches, the matcher, the writes)');
let n = 0;
for (const name of files) {
  const text = readFileSync(`${dir}/${name}`, 'utf8').replace(/;\n$/, '');
  t.ok(/^-- /.test(text) && /\$1\b/.test(text), `${name}: a header, then text with parameters`);
  n += 1;
  // PREPARE parses the statement and types its parameters from their contexts; DEALLOCATE on the
  // same connection (one transaction's) leaves nothing prepared behind.
  await t.resolves(
    app.db.transaction(async (tx) => {
      await tx.execute(sql.raw(`prepare sql_snapshot_${n} as ${text}`));
      await tx.execute(sql.raw(`deallocate sql_snapshot_${n}`));
    }),
    `${name}: PostgreSQL prepares it`,
  );
}
