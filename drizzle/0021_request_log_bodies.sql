-- Request and response bodies in the request log (issue #59 item 6; src/request-logs/logged-body.ts):
-- nullable columns without a default, so adding them to the partitioned table and its days is
-- a catalog change, no rewrite. Retention is the log's: a day's partition goes with its bodies.
ALTER TABLE "request_logs" ADD COLUMN "request_body" text;--> statement-breakpoint
ALTER TABLE "request_logs" ADD COLUMN "request_body_size" integer;--> statement-breakpoint
ALTER TABLE "request_logs" ADD COLUMN "response_body" text;--> statement-breakpoint
ALTER TABLE "request_logs" ADD COLUMN "response_body_size" integer;
