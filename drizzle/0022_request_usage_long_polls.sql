-- Long polls counted apart in the usage rollup (issue #59 item 5; src/request-logs/usage.ts): of
-- `requests`, those with `wait` above 0, whose latency is the wait and is kept out of
-- latency_buckets. A constant default: a catalog change, no rewrite; older rows count none.
ALTER TABLE "request_usage" ADD COLUMN "long_polls" integer DEFAULT 0 NOT NULL;
