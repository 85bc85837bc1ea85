-- POST /api/v1/listings in the sandbox: the app's sandbox_listing milestone too
-- Built by src/listings/listings-repository.ts.
-- Written by scripts/sql-snapshots.ts (npm run sql:snapshots): do not edit; change the
-- builder and run it again. The text as sent; its parameters:
--   $1 = "[{\"ord\":0,\"title\":\"Wool coat\",\"description\":\"Warm and plain\",\"category\":\"Ou…
--   $2 = "0190a5a0-0000-7000-8000-000000000001"
--   $3 = "0190a5a0-0000-7000-8000-000000000002"
--   $4 = "sandbox"
--   $5 = "sandbox"
--   $6 = "listing.created"
--   $7 = null
--   $8 = "sandbox"
--   $9 = "listing.created"
with x as (
            select * from jsonb_to_recordset($1::jsonb) as x(ord int, status text, title text, description text, category text, condition text, brand text, size text, color text, price_cents int, currency text, impact_mode boolean, cover_image_url text, image_urls text[], tags text[], external_id text)
          ), "keys" as (
      select date_trunc('milliseconds', min(s.t) over ())
          + (s.v - (min(s.v) over ()) / 1000 * 1000) * interval '1 microsecond' as at,
        (row_number() over (order by s.v) - 1)::int as k
      from (select clock_timestamp() as t, nextval('listings_published_seq') as v
            from generate_series(1, (select count(*)::int from x))) s
    ), ins as (
            insert into listings (seller_id, app_id, environment, status, title, description, category, condition,
              brand, size, color, price_cents, currency, impact_mode, cover_image_url, image_urls, tags,
              external_id, published_at, created_at, updated_at)
            select $2, $3, $4, x.status, x.title, x.description,
              x.category, x.condition, x.brand, x.size, x.color, x.price_cents, x.currency, x.impact_mode,
              x.cover_image_url, coalesce(x.image_urls, '{}'), coalesce(x.tags, '{}'), x.external_id,
              keys.at, keys.at, keys.at
            from x join keys on keys.k = x.ord
            order by x.ord
            on conflict (seller_id, environment, external_id) where external_id is not null do nothing
            returning *
          ), inserted as (
            select keys.k as ord, l.id, l.seller_id, l.app_id, l.environment, l.status, l.title, l.description, l.category, l.condition, l.brand, l.size, l.color, l.price_cents, l.currency, l.impact_mode, l.cover_image_url, l.image_urls, l.tags, l.like_count, l.external_id, to_char(l.published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as published_at, to_char(l.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at, to_char(l.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as updated_at, u.username as seller_username, u.display_name as seller_display_name, u.avatar_url as seller_avatar_url
            from ins l join keys on keys.at = l.published_at
            join users u on u.id = l.seller_id
          ), "changed" as (select r.ord as "ord", json_build_object('listing', json_build_object('id', r.id, 'title', r.title, 'description', r.description, 'category', r.category, 'condition', r.condition, 'price_cents', r.price_cents, 'currency', r.currency, 'status', r.status, 'impact_mode', r.impact_mode, 'cover_image_url', r.cover_image_url, 'like_count', r.like_count, 'published_at', r.published_at, 'seller', json_build_object('id', r.seller_id, 'username', r.seller_username, 'display_name', r.seller_display_name, 'avatar_url', r.seller_avatar_url), 'brand', r.brand, 'size', r.size, 'color', r.color, 'tags', r.tags, 'image_urls', r.image_urls, 'created_at', r.created_at, 'updated_at', r.updated_at, 'external_id', r.external_id, 'api_environment', r.environment)) as "data", r.id as "listing_id", r.seller_id as "seller_id", r.app_id as "app_id" from "inserted" r), event_sources as (
      select "changed"."data" as data, "changed"."listing_id" as listing_id, "changed"."seller_id" as seller_id,
        "changed"."app_id" as app_id, (row_number() over (order by "changed"."ord") - 1)::int as k
      from "changed"
      where "changed"."app_id" is not null and ("changed"."seller_id" is null
    or exists (select 1 from apps a
      where a.id = "changed"."app_id" and coalesce(a.owner_id, a.owner_id) = "changed"."seller_id" and a.deleted_at is null)
    or exists (select 1 from oauth_grants g
      where g.user_id = "changed"."seller_id" and g.app_id = "changed"."app_id" and (g.revoked_at is null and exists (select 1 from oauth_tokens live_token
    where live_token.grant_id = g.id and live_token.revoked_at is null
      and live_token.expires_at > now()))))
    ), "event_keys" as (
      select date_trunc('milliseconds', min(s.t) over ())
          + (s.v - (min(s.v) over ()) / 1000 * 1000) * interval '1 microsecond' as at,
        (row_number() over (order by s.v) - 1)::int as k
      from (select clock_timestamp() as t, nextval('webhook_events_created_seq') as v
            from generate_series(1, (select count(*)::int from event_sources))) s
    ),
    event_rows as (
      insert into webhook_events (id, app_id, environment, type, data, listing_id, seller_id, trace_id, created_at)
      select (lpad(to_hex(floor(extract(epoch from event_keys.at) * 1000)::bigint), 12, '0') || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 14)), s.app_id, $5, $6, s.data::text,
        s.listing_id, s.seller_id, $7::text, event_keys.at
      from event_sources s join event_keys on event_keys.k = s.k
      order by s.k
      returning id, app_id, created_at
    ), event_deliveries as (
      insert into webhook_deliveries (id, event_id, endpoint_id, event_created_at)
      select (lpad(to_hex(floor(extract(epoch from e.created_at) * 1000)::bigint), 12, '0') || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 14)), e.id, ep.id, e.created_at
      from event_rows e
      join webhook_endpoints ep on ep.app_id = e.app_id and ep.environment = $8 and ep.active
        and ep.enabled_events && array['*', $9]::text[]
      returning id
    ), listing_match_enqueued as (
      insert into listing_match_queue (listing_id) select "changed"."listing_id" from "changed"
      where exists (select 1 from saved_searches)
      returning listing_id
    ), sandbox_milestone as (
      insert into app_milestones (app_id, name)
      select distinct "changed"."app_id", 'sandbox_listing' from "changed" where "changed"."app_id" is not null
      on conflict do nothing
    ), "queued_work" as (select array_remove(array[case when exists (select 1 from event_deliveries) then 'deliveries' end, case when exists (select 1 from listing_match_enqueued) then 'matching' end]::text[], null) as lanes)
          select *, (select "queued_work".lanes from "queued_work") as queued_lanes from inserted;
