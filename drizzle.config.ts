import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: [
    './src/db/schema.ts',
    './src/db/outbox-schema.ts',
    './src/db/primary-request-log-schema.ts',
  ],
  out: './drizzle',
});
