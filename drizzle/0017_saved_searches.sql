CREATE TABLE "listing_match_queue" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "listing_match_queue_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"listing_id" uuid NOT NULL
);
--> statement-breakpoint
CREATE TABLE "saved_search_keys" (
	"token" text NOT NULL,
	"saved_search_id" uuid NOT NULL,
	CONSTRAINT "saved_search_keys_token_saved_search_id_pk" PRIMARY KEY("token","saved_search_id")
);
--> statement-breakpoint
CREATE TABLE "saved_search_matches" (
	"saved_search_id" uuid NOT NULL,
	"listing_id" uuid NOT NULL,
	"matched_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "saved_search_matches_saved_search_id_listing_id_pk" PRIMARY KEY("saved_search_id","listing_id")
);
--> statement-breakpoint
CREATE TABLE "saved_searches" (
	"id" uuid PRIMARY KEY NOT NULL,
	"app_id" uuid NOT NULL,
	"environment" text NOT NULL,
	"user_id" uuid NOT NULL,
	"via_token" boolean NOT NULL,
	"name" text NOT NULL,
	"q" text,
	"category" text,
	"condition" text[],
	"tag" text[],
	"brand" text,
	"size" text,
	"color" text,
	"min_price_cents" integer,
	"max_price_cents" integer,
	"impact_mode" boolean,
	"seller_username" text,
	"created_at" timestamp(6) with time zone DEFAULT now() NOT NULL,
	"last_matched_at" timestamp(6) with time zone,
	CONSTRAINT "saved_searches_environment" CHECK ("saved_searches"."environment" in ('sandbox', 'live'))
);
--> statement-breakpoint
ALTER TABLE "saved_search_keys" ADD CONSTRAINT "saved_search_keys_saved_search_id_saved_searches_id_fk" FOREIGN KEY ("saved_search_id") REFERENCES "public"."saved_searches"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "saved_search_matches" ADD CONSTRAINT "saved_search_matches_saved_search_id_saved_searches_id_fk" FOREIGN KEY ("saved_search_id") REFERENCES "public"."saved_searches"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "saved_searches" ADD CONSTRAINT "saved_searches_app_id_apps_id_fk" FOREIGN KEY ("app_id") REFERENCES "public"."apps"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "saved_searches" ADD CONSTRAINT "saved_searches_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "saved_search_keys_search_idx" ON "saved_search_keys" USING btree ("saved_search_id");--> statement-breakpoint
CREATE INDEX "saved_search_matches_listing_idx" ON "saved_search_matches" USING btree ("listing_id");--> statement-breakpoint
CREATE INDEX "saved_searches_app_env_idx" ON "saved_searches" USING btree ("app_id","environment","id");