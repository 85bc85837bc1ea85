-- Bounded search (OpenAPI "Search and sync"): every search page reads at most a walk of one
-- order's index (WALK_ROWS) plus a capped gathering of its matches through one GIN index.
--
-- The tokens a search's filters are matched by, beside the words of the search document: the
-- scope (`scope:public` for live active listings; `seller:<environment>:<seller id>`), the status,
-- the condition and impact mode as they are, and category, brand, size, color (ignoring case)
-- and each tag as an md5 digest, so that any value is a token of fixed, safe characters. The text
-- parser never makes a lexeme with a colon, so no word can be taken for a token. IMMUTABLE as a
-- generated column needs (see listings_search_document in 0010).
CREATE FUNCTION "listings_match_document"(title text, description text, brand text, category text,
    tags text[], size text, color text, condition text, impact_mode boolean, environment text,
    status text, seller_id uuid)
  RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT listings_search_document(title, description, brand, category, tags)
      || array_to_tsvector(array_remove(ARRAY[
           CASE WHEN environment = 'live' AND status = 'active' THEN 'scope:public' END,
           'seller:' || environment || ':' || seller_id::text,
           'status:' || status,
           'category:' || md5(lower(category)),
           'brand:' || md5(lower(brand)),
           'size:' || md5(lower(size)),
           'color:' || md5(lower(color)),
           'condition:' || condition,
           'impact:' || impact_mode::text
         ] || ARRAY(SELECT 'tag:' || md5(tag) FROM unnest(tags) AS tag), NULL))
  $$;--> statement-breakpoint
DROP INDEX "listings_search_idx";--> statement-breakpoint
DROP INDEX "listings_public_category_idx";--> statement-breakpoint
DROP INDEX "listings_public_brand_idx";--> statement-breakpoint
ALTER TABLE "listings" ADD COLUMN "match" "tsvector" GENERATED ALWAYS AS (listings_match_document(title, description, brand, category, tags, size, color, condition, impact_mode, environment, status, seller_id)) STORED NOT NULL;--> statement-breakpoint
CREATE INDEX "listings_match_idx" ON "listings" USING gin ("match") WITH (fastupdate=false);--> statement-breakpoint
DROP INDEX "listings_seller_environment_external_id_key";--> statement-breakpoint
CREATE UNIQUE INDEX "listings_seller_environment_external_id_key" ON "listings" USING btree ("external_id","seller_id","environment") WHERE "listings"."external_id" is not null;--> statement-breakpoint
CREATE INDEX "listings_seller_price_idx" ON "listings" USING btree ("seller_id","environment","price_cents","published_at");--> statement-breakpoint
-- The ids of at most `cap` listings whose tokens and words match `query`, through
-- listings_match_idx whatever the planner's statistics say: with sequential scans off (for this
-- function's own statement only, restored when it returns) the GIN index is the one way to
-- answer, and GIN intersects the query's entries starting from the one with the fewest items.
-- A function rather than SET LOCAL: one statement, through a transaction-mode pooler too.
CREATE FUNCTION "listings_matching"(query tsquery, cap integer)
  RETURNS SETOF uuid LANGUAGE sql STABLE PARALLEL SAFE ROWS 100
  SET enable_seqscan = off
  AS $$ SELECT id FROM listings WHERE match @@ query LIMIT cap $$;
