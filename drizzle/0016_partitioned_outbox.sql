-- The webhook outbox partitioned by range of time, a week from Monday 00:00 UTC each (issue #45;
-- docs/scaling.md, partitions; src/webhooks/outbox-partitions.ts names them, src/db/partitions.ts
-- makes and drops them): events by created_at, deliveries by their event's created_at (a new
-- column, copied from the event, so a delivery lives in its event's week and goes with it),
-- attempts by attempted_at. As drizzle/0015 does for the request log, no row moves: each table
-- as it was becomes the partition of everything before the next Monday 00:00 UTC (from MINVALUE)
-- and is dropped whole once past retention. The foreign keys among the three go (a partitioned
-- table cannot be referenced without its partition key): the same week's drop replaces the
-- cascade. Those to apps and webhook_endpoints stay. The old primary keys on id stay as the old
-- partitions' indexes on id (each new partition gets its own, src/webhooks/outbox-partitions.ts);
-- the other indexes attach to the parents'. The one statement that reads rows is the backfill of
-- deliveries' event_created_at (an UPDATE joined to the events): docs/operations.md gives the
-- time it all took at 100,000 events.
ALTER TABLE "webhook_delivery_attempts" DROP CONSTRAINT "webhook_delivery_attempts_delivery_id_webhook_deliveries_id_fk";--> statement-breakpoint
ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_event_id_webhook_events_id_fk";--> statement-breakpoint
DROP TRIGGER "webhook_events_notify" ON "webhook_events";--> statement-breakpoint
ALTER TABLE "webhook_events" RENAME TO "webhook_events_before_partitions";--> statement-breakpoint
ALTER INDEX "webhook_events_pkey" RENAME TO "webhook_events_before_partitions_id_idx";--> statement-breakpoint
ALTER INDEX "webhook_events_environment_created_at_key" RENAME TO "webhook_events_before_partitions_environment_created_at_key";--> statement-breakpoint
ALTER INDEX "webhook_events_app_feed_idx" RENAME TO "webhook_events_before_partitions_app_feed_idx";--> statement-breakpoint
ALTER INDEX "webhook_events_seller_feed_idx" RENAME TO "webhook_events_before_partitions_seller_feed_idx";--> statement-breakpoint
ALTER TABLE "webhook_deliveries" RENAME TO "webhook_deliveries_before_partitions";--> statement-breakpoint
ALTER INDEX "webhook_deliveries_pkey" RENAME TO "webhook_deliveries_before_partitions_id_idx";--> statement-breakpoint
DROP INDEX "webhook_deliveries_event_endpoint_key";--> statement-breakpoint
ALTER INDEX "webhook_deliveries_due_idx" RENAME TO "webhook_deliveries_before_partitions_due_idx";--> statement-breakpoint
ALTER INDEX "webhook_deliveries_endpoint_idx" RENAME TO "webhook_deliveries_before_partitions_endpoint_idx";--> statement-breakpoint
ALTER INDEX "webhook_deliveries_endpoint_due_idx" RENAME TO "webhook_deliveries_before_partitions_endpoint_due_idx";--> statement-breakpoint
ALTER TABLE "webhook_deliveries_before_partitions" ADD COLUMN "event_created_at" timestamp(6) with time zone;--> statement-breakpoint
UPDATE "webhook_deliveries_before_partitions" d SET "event_created_at" = e."created_at"
  FROM "webhook_events_before_partitions" e WHERE e."id" = d."event_id";--> statement-breakpoint
ALTER TABLE "webhook_deliveries_before_partitions" ALTER COLUMN "event_created_at" SET NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "webhook_deliveries_before_partitions_event_endpoint_key" ON "webhook_deliveries_before_partitions" USING btree ("event_id","endpoint_id","event_created_at");--> statement-breakpoint
ALTER TABLE "webhook_delivery_attempts" RENAME TO "webhook_delivery_attempts_before_partitions";--> statement-breakpoint
ALTER TABLE "webhook_delivery_attempts_before_partitions" RENAME CONSTRAINT "webhook_delivery_attempts_delivery_id_attempted_at_pk" TO "webhook_delivery_attempts_before_partitions_pk";--> statement-breakpoint
CREATE TABLE "webhook_events" (
	"id" text NOT NULL,
	"app_id" uuid NOT NULL,
	"environment" text NOT NULL,
	"type" text NOT NULL,
	"data" text NOT NULL,
	"listing_id" uuid,
	"seller_id" uuid,
	"trace_id" text,
	"created_at" timestamp(6) with time zone NOT NULL
) PARTITION BY RANGE ("created_at");--> statement-breakpoint
ALTER TABLE "webhook_events" ADD CONSTRAINT "webhook_events_app_id_apps_id_fk" FOREIGN KEY ("app_id") REFERENCES "public"."apps"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "webhook_events_environment_created_at_key" ON "webhook_events" USING btree ("environment","created_at");--> statement-breakpoint
CREATE INDEX "webhook_events_app_feed_idx" ON "webhook_events" USING btree ("app_id","environment","created_at" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "webhook_events_seller_feed_idx" ON "webhook_events" USING btree ("app_id","seller_id","environment","created_at" DESC NULLS LAST) WHERE "webhook_events"."seller_id" is not null;--> statement-breakpoint
CREATE TRIGGER "webhook_events_notify"
  AFTER INSERT ON "webhook_events" REFERENCING NEW TABLE AS "new_events"
  FOR EACH STATEMENT EXECUTE FUNCTION "notify_webhook_events"();--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"id" text NOT NULL,
	"event_id" text NOT NULL,
	"endpoint_id" uuid NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_attempt_at" timestamp with time zone,
	"last_response_code" integer,
	"last_error" text,
	"created_at" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"event_created_at" timestamp(6) with time zone NOT NULL
) PARTITION BY RANGE ("event_created_at");--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_endpoint_id_webhook_endpoints_id_fk" FOREIGN KEY ("endpoint_id") REFERENCES "public"."webhook_endpoints"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "webhook_deliveries_event_endpoint_key" ON "webhook_deliveries" USING btree ("event_id","endpoint_id","event_created_at");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due_idx" ON "webhook_deliveries" USING btree ("next_attempt_at") WHERE "webhook_deliveries"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "webhook_deliveries_endpoint_idx" ON "webhook_deliveries" USING btree ("endpoint_id","created_at" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "webhook_deliveries_endpoint_due_idx" ON "webhook_deliveries" USING btree ("endpoint_id","next_attempt_at") WHERE "webhook_deliveries"."status" = 'pending';--> statement-breakpoint
CREATE TABLE "webhook_delivery_attempts" (
	"delivery_id" text NOT NULL,
	"attempt" integer NOT NULL,
	"attempted_at" timestamp(6) with time zone DEFAULT now() NOT NULL,
	"response_code" integer,
	"error" text,
	"duration_ms" integer NOT NULL,
	CONSTRAINT "webhook_delivery_attempts_delivery_id_attempted_at_pk" PRIMARY KEY("delivery_id","attempted_at")
) PARTITION BY RANGE ("attempted_at");--> statement-breakpoint
DO $$
DECLARE
  monday text := to_char(date_trunc('week', now() AT TIME ZONE 'UTC') + interval '7 days',
    'YYYY-MM-DD"T"HH24:MI:SS"Z"');
BEGIN
  EXECUTE format('ALTER TABLE "webhook_events" ATTACH PARTITION "webhook_events_before_partitions" FOR VALUES FROM (MINVALUE) TO (%L)', monday);
  EXECUTE format('ALTER TABLE "webhook_deliveries" ATTACH PARTITION "webhook_deliveries_before_partitions" FOR VALUES FROM (MINVALUE) TO (%L)', monday);
  EXECUTE format('ALTER TABLE "webhook_delivery_attempts" ATTACH PARTITION "webhook_delivery_attempts_before_partitions" FOR VALUES FROM (MINVALUE) TO (%L)', monday);
END
$$;
