/**
 * The snapshot an in-memory database (`DATABASE_URL=memory://`) starts from: a freshly created
 * and migrated PGlite data directory, dumped once and loaded by every later in-memory database,
 * in this process or any other. PGlite 0.5 runs initdb for each new database, about 4.8 s of CPU
 * on this project's machines, where loading the snapshot takes about 0.9 s (a test suite opens
 * hundreds of in-memory databases: docs/development.md, "The embedded database in tests").
 *
 * Kept where build tools keep their caches, `node_modules/.cache/marketplace-listings-api/` under
 * the working directory, and named by a digest of PGlite's version and of the migrations:
 * a new migration or a PGlite upgrade makes a new snapshot, and the stale one is removed. A
 * cache only: without a node_modules directory there (or if it cannot be written or read), each
 * in-memory database runs initdb as before; a damaged snapshot (gunzip's check fails) is
 * replaced.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gunzip as gunzipCb } from 'node:zlib';

const gunzip = promisify(gunzipCb);

const PREFIX = 'pglite-';
const SUFFIX = '.tar.gz';

export interface PgliteTemplate {
  /** The snapshot (a tar), or undefined when there is none yet (or it cannot be read whole). */
  read(): Promise<Blob | undefined>;
  /**
   * Stores `dump` (PGlite's gzip dump) as the snapshot: written aside, then renamed, so readers
   * see all of it or nothing.
   */
  write(dump: Blob): Promise<void>;
  /** Removes a snapshot PGlite could not load. */
  discard(): Promise<void>;
}

/** The template for the migrations in `migrationsFolder`, or undefined without a cache. */
export async function pgliteTemplate(
  migrationsFolder: string,
  cwd = process.cwd(),
): Promise<PgliteTemplate | undefined> {
  const modules = path.join(cwd, 'node_modules');
  if (!existsSync(modules)) return undefined;
  const key = await templateKey(migrationsFolder);
  if (!key) return undefined;
  const dir = path.join(modules, '.cache', 'marketplace-listings-api');
  const file = path.join(dir, `${PREFIX}${key}${SUFFIX}`);
  return {
    async read() {
      try {
        // Unpacked here, not by PGlite: gunzip checks the CRC (a damaged file is no snapshot),
        // where PGlite's own decompression leaves a damaged file's error unhandled.
        return new Blob([await gunzip(await readFile(file))], { type: 'application/x-tar' });
      } catch {
        return undefined;
      }
    },
    async write(dump) {
      try {
        await mkdir(dir, { recursive: true });
        const aside = `${file}.${randomBytes(6).toString('hex')}.tmp`;
        await writeFile(aside, new Uint8Array(await dump.arrayBuffer()));
        await rename(aside, file);
        for (const name of await readdir(dir))
          if (name.startsWith(PREFIX) && path.join(dir, name) !== file && !name.endsWith('.tmp'))
            await rm(path.join(dir, name), { force: true });
      } catch {
        // A cache: the next in-memory database runs initdb and tries again.
      }
    },
    async discard() {
      await rm(file, { force: true });
    },
  };
}

/** A digest of PGlite's version and the migrations (undefined if either is unreadable). */
async function templateKey(migrationsFolder: string): Promise<string | undefined> {
  try {
    const entry = fileURLToPath(import.meta.resolve('@electric-sql/pglite'));
    const manifest = JSON.parse(
      await readFile(path.join(path.dirname(entry), '..', 'package.json'), 'utf8'),
    ) as { version: string };
    const hash = createHash('sha256').update(`pglite ${manifest.version}\n`);
    const sql = (await readdir(migrationsFolder)).filter((name) => name.endsWith('.sql')).sort();
    for (const name of [...sql, path.join('meta', '_journal.json')])
      hash.update(`${name}\n`).update(await readFile(path.join(migrationsFolder, name)));
    return hash.digest('hex').slice(0, 24);
  } catch {
    return undefined;
  }
}
