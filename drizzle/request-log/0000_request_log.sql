-- The request log's own database (REQUEST_LOG_DATABASE_URL; docs/operations.md, "Request log
-- database"): the log, its drop counts and the partition keeper's lease, as on the primary but
-- without a foreign key to apps (they live on the primary). Written by drizzle-kit
-- (drizzle.request-log.config.ts) but for PARTITION BY, which it cannot say: request_logs is
-- range-partitioned by created_at, a UTC day each, as the primary's since drizzle/0015; the
-- partitions, each with its own index on id, are made by src/db/partitions.ts at start.
CREATE TABLE "maintenance_leases" (
	"name" text PRIMARY KEY NOT NULL,
	"holder" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "request_log_drops" (
	"app_id" uuid NOT NULL,
	"environment" text NOT NULL,
	"dropped" integer DEFAULT 0 NOT NULL,
	"last_dropped_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "request_log_drops_app_id_environment_pk" PRIMARY KEY("app_id","environment")
);
--> statement-breakpoint
CREATE TABLE "request_logs" (
	"id" uuid DEFAULT gen_random_uuid() NOT NULL,
	"app_id" uuid NOT NULL,
	"environment" text NOT NULL,
	"created_at" timestamp(6) with time zone DEFAULT now() NOT NULL,
	"method" text NOT NULL,
	"path" text NOT NULL,
	"status" integer NOT NULL,
	"error_code" text,
	"error_message" text,
	"error_details" text,
	"latency_ms" integer NOT NULL,
	"request_id" text NOT NULL,
	"key_id" uuid,
	"user_id" uuid,
	"rate_limit" text
) PARTITION BY RANGE ("created_at");
--> statement-breakpoint
CREATE INDEX "request_logs_app_feed_idx" ON "request_logs" USING btree ("app_id","environment","created_at" DESC NULLS LAST);