CREATE TABLE "request_usage" (
	"app_id" uuid NOT NULL,
	"environment" text NOT NULL,
	"hour" timestamp with time zone NOT NULL,
	"outcome" text NOT NULL,
	"requests" integer NOT NULL,
	"latency_buckets" integer[] NOT NULL,
	CONSTRAINT "request_usage_app_id_environment_hour_outcome_pk" PRIMARY KEY("app_id","environment","hour","outcome")
);
--> statement-breakpoint
ALTER TABLE "request_usage" ADD CONSTRAINT "request_usage_app_id_apps_id_fk" FOREIGN KEY ("app_id") REFERENCES "public"."apps"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "request_usage_hour_idx" ON "request_usage" USING btree ("hour");