CREATE TABLE "app_invitations" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"app_id" uuid NOT NULL,
	"user_id" uuid NOT NULL,
	"role" text NOT NULL,
	"invited_by" uuid,
	"created_at" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"resolution" text,
	"resolved_at" timestamp with time zone,
	CONSTRAINT "app_invitations_role" CHECK (role in ('owner', 'admin', 'developer', 'viewer'))
);
--> statement-breakpoint
ALTER TABLE "app_invitations" ADD CONSTRAINT "app_invitations_app_id_apps_id_fk" FOREIGN KEY ("app_id") REFERENCES "public"."apps"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app_invitations" ADD CONSTRAINT "app_invitations_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app_invitations" ADD CONSTRAINT "app_invitations_invited_by_users_id_fk" FOREIGN KEY ("invited_by") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "app_invitations_open_key" ON "app_invitations" USING btree ("app_id","user_id") WHERE "app_invitations"."resolution" is null;--> statement-breakpoint
CREATE INDEX "app_invitations_user_idx" ON "app_invitations" USING btree ("user_id");