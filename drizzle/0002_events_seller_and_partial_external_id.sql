DROP INDEX "listings_seller_environment_external_id_key";--> statement-breakpoint
ALTER TABLE "webhook_events" ADD COLUMN "listing_id" uuid;--> statement-breakpoint
ALTER TABLE "webhook_events" ADD COLUMN "seller_id" uuid;--> statement-breakpoint
CREATE INDEX "webhook_events_seller_feed_idx" ON "webhook_events" USING btree ("app_id","seller_id","environment","created_at" DESC NULLS LAST) WHERE "webhook_events"."seller_id" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "listings_seller_environment_external_id_key" ON "listings" USING btree ("seller_id","environment","external_id") WHERE "listings"."external_id" is not null;--> statement-breakpoint
-- Events recorded before these columns: their listing and seller are in the stored data.
UPDATE "webhook_events" SET "listing_id" = ("data"::jsonb #>> '{listing,id}')::uuid, "seller_id" = ("data"::jsonb #>> '{listing,seller,id}')::uuid WHERE "type" LIKE 'listing.%';
