ALTER TABLE "saved_search_keys" ADD COLUMN "min_price_cents" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "saved_search_keys" ADD COLUMN "max_price_cents" integer DEFAULT 2147483647 NOT NULL;--> statement-breakpoint
CREATE INDEX "saved_search_keys_price_idx" ON "saved_search_keys" USING btree ("token","max_price_cents","min_price_cents","saved_search_id");--> statement-breakpoint
-- The keys of saved searches made before this migration get their search's price range.
UPDATE "saved_search_keys" k SET "min_price_cents" = coalesce(s."min_price_cents", 0), "max_price_cents" = coalesce(s."max_price_cents", 2147483647) FROM "saved_searches" s WHERE s."id" = k."saved_search_id" AND (s."min_price_cents" IS NOT NULL OR s."max_price_cents" IS NOT NULL);
