CREATE TABLE "app_members" (
	"app_id" uuid NOT NULL,
	"user_id" uuid NOT NULL,
	"role" text NOT NULL,
	"added_by" uuid,
	"created_at" timestamp (6) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "app_members_app_id_user_id_pk" PRIMARY KEY("app_id","user_id"),
	CONSTRAINT "app_members_role" CHECK (role in ('owner', 'admin', 'developer', 'viewer'))
);
--> statement-breakpoint
ALTER TABLE "app_members" ADD CONSTRAINT "app_members_app_id_apps_id_fk" FOREIGN KEY ("app_id") REFERENCES "public"."apps"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app_members" ADD CONSTRAINT "app_members_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app_members" ADD CONSTRAINT "app_members_added_by_users_id_fk" FOREIGN KEY ("added_by") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "app_members_user_idx" ON "app_members" USING btree ("user_id");--> statement-breakpoint
-- Every app's account holder becomes its first owner (src/db/schema.ts appMembers).
INSERT INTO "app_members" ("app_id", "user_id", "role", "created_at")
SELECT "id", "owner_id", 'owner', "created_at" FROM "apps";
