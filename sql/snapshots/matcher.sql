-- The matcher's pass: the matches of three queued listings
-- Built by src/saved-searches/matcher-worker.ts matchingStatement.
-- Written by scripts/sql-snapshots.ts (npm run sql:snapshots): do not edit; change the
-- builder and run it again. The text as sent; its parameters:
--   $1 = "0190a5a0-0000-7000-8000-000000000003"
--   $2 = "0190a5a0-0000-7000-8000-000000000004"
--   $3 = "0190a5a0-0000-7000-8000-000000000005"
--   $4 = "0190a5a0-0000-7000-8000-000000000003"
--   $5 = "0190a5a0-0000-7000-8000-000000000004"
--   $6 = "0190a5a0-0000-7000-8000-000000000005"
--   $7 = 100
--   $8 = 1000
--   $9 = 100
--   $10 = "0190a5a0-0000-7000-8000-000000000003"
--   $11 = "0190a5a0-0000-7000-8000-000000000004"
--   $12 = "0190a5a0-0000-7000-8000-000000000005"
--   $13 = 100
with candidates as materialized (
      select distinct k.saved_search_id, c.id as listing_id from listings c
      cross join lateral unnest(tsvector_to_array(c.match)) as t(token)
      cross join lateral (
        select k.saved_search_id from saved_search_keys k
        where k.token = t.token
          and k.max_price_cents >= c.price_cents and k.min_price_cents <= c.price_cents
        offset 0) k
      where c.id = any(array[$1, $2, $3]::uuid[])
    ), holding as (
      select s.id as saved_search_id, l.id as listing_id, a.owner_id, o.ord,
        row_number() over (partition by l.id, a.owner_id order by s.id) as rank,
        exists (select 1 from saved_search_matches m
          where m.saved_search_id = s.id and m.listing_id = l.id) as known
      from candidates c
      join saved_searches s on s.id = c.saved_search_id
      join apps a on a.id = s.app_id and a.deleted_at is null
      join listings l on l.id = c.listing_id
      join unnest(array[$4, $5, $6]::uuid[]) with ordinality as o(id, ord) on o.id = l.id
      where l.status = 'active' and ((s.environment = 'live' and l.environment = 'live' and l.status = 'active')
        or (s.environment = 'sandbox' and l.seller_id = s.user_id and l.environment = s.environment)) and (s.q is null or l.search @@ websearch_to_tsquery('english', s.q)) and (s.category is null or lower(l.category) = lower(s.category)) and (s.brand is null or lower(l.brand) = lower(s.brand)) and (s.size is null or lower(l.size) = lower(s.size)) and (s.color is null or lower(l.color) = lower(s.color)) and (s.condition is null or l.condition = any(s.condition)) and (s.tag is null or l.tags @> s.tag) and (s.min_price_cents is null or l.price_cents >= s.min_price_cents) and (s.max_price_cents is null or l.price_cents <= s.max_price_cents) and (s.impact_mode is null or l.impact_mode = s.impact_mode) and (s.seller_username is null or l.seller_id = (select id from users where username = s.seller_username))
        and (not s.via_token or exists (select 1 from oauth_grants g
          where g.user_id = s.user_id and g.app_id = s.app_id and 'searches' = any(g.scopes)
            and (g.revoked_at is null and exists (select 1 from oauth_tokens live_token
    where live_token.grant_id = g.id and live_token.revoked_at is null
      and live_token.expires_at > now()))))
    ), fresh as (
      select h.saved_search_id, h.listing_id, h.owner_id,
        row_number() over (partition by h.owner_id order by h.ord, h.saved_search_id) as spend
      from holding h where h.rank <= $7 and not h.known
    ), room as (
      select f.owner_id, $8
          - coalesce((select b.used from saved_search_match_budgets b
            where b.owner_id = f.owner_id and b.window_start > now() - interval '1 minute'), 0) as room
      from (select distinct owner_id from fresh) f
    ), matched as (
      select saved_search_id, listing_id from holding
      where rank <= $9 and known
      union all
      select f.saved_search_id, f.listing_id from fresh f join room r on r.owner_id = f.owner_id
      where f.spend <= r.room
    ), gone as (
      delete from saved_search_matches m
      where m.listing_id = any(array[$10, $11, $12]::uuid[])
        and not exists (select 1 from matched
          where matched.saved_search_id = m.saved_search_id and matched.listing_id = m.listing_id)
    ), added as (
      insert into saved_search_matches (saved_search_id, listing_id)
      select saved_search_id, listing_id from matched
      on conflict do nothing
      returning saved_search_id, listing_id
    ), spent as (
      insert into saved_search_match_budgets as b (owner_id, window_start, used)
      select f.owner_id, now(), count(*)::int from added a
      join fresh f on f.saved_search_id = a.saved_search_id and f.listing_id = a.listing_id
      group by f.owner_id
      on conflict (owner_id) do update set
        used = case when b.window_start > now() - interval '1 minute' then b.used + excluded.used else excluded.used end,
        window_start = case when b.window_start > now() - interval '1 minute' then b.window_start else now() end
    ), touched as (
      update saved_searches set last_matched_at = now()
      where id in (select saved_search_id from added)
      returning id, app_id, environment, user_id
    )
    select (select count(*)::int from candidates) as examined,
      ((select count(*) from holding where rank > $13)
        + (select count(*) from fresh f join room r on r.owner_id = f.owner_id
          where f.spend > r.room))::int as over_budget,
      a.saved_search_id::text as saved_search_id, s.app_id::text as match_app_id,
      s.environment as match_environment, s.user_id::text as match_user_id,
      o.owner_id::text as match_owner_id, l.id, l.seller_id, l.app_id, l.environment, l.status, l.title, l.description, l.category, l.condition, l.brand, l.size, l.color, l.price_cents, l.currency, l.impact_mode, l.cover_image_url, l.image_urls, l.tags, l.like_count, l.external_id, to_char(l.published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as published_at, to_char(l.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at, to_char(l.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as updated_at, u.username as seller_username, u.display_name as seller_display_name, u.avatar_url as seller_avatar_url
    from (select 1) as one
    left join (added a join touched s on s.id = a.saved_search_id join apps o on o.id = s.app_id
      join listings l on l.id = a.listing_id join users u on u.id = l.seller_id) on true;
