import { defineConfig } from 'drizzle-kit';

/**
 * The request log's own database (REQUEST_LOG_DATABASE_URL): its tables only, with migrations of
 * their own (applied at start by src/db/migrations.ts, bookkept apart from the primary's).
 */
export default defineConfig({
  dialect: 'postgresql',
  schema: ['./src/db/request-log-schema.ts'],
  out: './drizzle/request-log',
});
