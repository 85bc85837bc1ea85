CREATE TABLE "saved_search_match_budgets" (
	"owner_id" uuid PRIMARY KEY NOT NULL,
	"window_start" timestamp with time zone NOT NULL,
	"used" integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE "listing_match_queue" ADD COLUMN "weight" integer;--> statement-breakpoint
ALTER TABLE "saved_search_match_budgets" ADD CONSTRAINT "saved_search_match_budgets_owner_id_users_id_fk" FOREIGN KEY ("owner_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "listing_match_queue_light_idx" ON "listing_match_queue" USING btree ("id") WHERE coalesce("listing_match_queue"."weight", 0) <= 200;--> statement-breakpoint
CREATE INDEX "listing_match_queue_heavy_idx" ON "listing_match_queue" USING btree ("id") WHERE "listing_match_queue"."weight" > 200;