-- GET /api/v1/listings?seller=me&status=draft&q=...: the owner's view, a first page
-- Built by src/listings/search-statement.ts searchStatement.
-- Written by scripts/sql-snapshots.ts (npm run sql:snapshots): do not edit; change the
-- builder and run it again. The text as sent; its parameters:
--   $1 = :status
--   $2 = :q
--   $3 = :scope_seller
--   $4 = :scope_environment
--   $5 = :q
--   $6 = :scope_environment
--   $7 = :scope_seller
--   $8 = :q
--   $9 = :status
--   $10 = :q
--   $11 = :scope_seller
--   $12 = :scope_environment
--   $13 = :status
--   $14 = :q
with walk as materialized (
      select w.id, w.hit, w.rn from (
        select l.id, (l.status = $1 and l.search @@ websearch_to_tsquery('english', $2)) as hit, row_number() over walk_order as rn,
          lead(l.id) over walk_order is null as last
        from listings l
        where l.seller_id = $3 and l.environment = $4 and numnode(websearch_to_tsquery('english', $5)) > 0 and true
        window walk_order as (order by l.published_at desc nulls last)
        order by l.published_at desc nulls last limit 5000
      ) w
      where w.hit or w.rn = 5000 or w.last
      limit 26
    ), gathered as materialized (
        select m.id from listings_matching(quote_literal('seller:' || $6::text || ':' || $7::text)::tsquery && websearch_to_tsquery('english', $8) && quote_literal('status:' || $9::text)::tsquery, 5001) as m(id)
        where numnode(websearch_to_tsquery('english', $10)) > 0 and (select count(*) from walk where walk.hit) < 25
          and exists (select 1 from walk where walk.rn = 5000)
      ), flags as materialized (
      select (((select count(*) from walk where walk.hit) < 25
          and exists (select 1 from walk where walk.rn = 5000))
        and (select count(*) from gathered) <= 5000) as by_gather,
        (select coalesce(max(rn), 0) from walk) as walked,
        (select count(*) from gathered) as gathered
    ), page as ((
        select l.id, l.seller_id, l.app_id, l.environment, l.status, l.title, l.description, l.category, l.condition, l.brand, l.size, l.color, l.price_cents, l.currency, l.impact_mode, l.cover_image_url, l.image_urls, l.tags, l.like_count, l.external_id, to_char(l.published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as published_at, to_char(l.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at, to_char(l.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as updated_at, u.username as seller_username, u.display_name as seller_display_name, u.avatar_url as seller_avatar_url, l.xmin::text as row_version, u.xmin::text as seller_version, null::text as sort_rank, null::text as window_top, row_number() over (order by l.published_at desc nulls last) as pos, true as hit
        from gathered g join lateral (select listings.*, listings.xmin from listings
      where listings.id = g.id offset 0) l on true join users u on u.id = l.seller_id
        where (select by_gather from flags) and l.seller_id = $11 and l.environment = $12 and l.status = $13 and l.search @@ websearch_to_tsquery('english', $14)
        order by l.published_at desc nulls last limit 25
      ) union all (
        select l.id, l.seller_id, l.app_id, l.environment, l.status, l.title, l.description, l.category, l.condition, l.brand, l.size, l.color, l.price_cents, l.currency, l.impact_mode, l.cover_image_url, l.image_urls, l.tags, l.like_count, l.external_id, to_char(l.published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as published_at, to_char(l.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at, to_char(l.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as updated_at, u.username as seller_username, u.display_name as seller_display_name, u.avatar_url as seller_avatar_url, l.xmin::text as row_version, u.xmin::text as seller_version, null::text as sort_rank, null::text as window_top, k.rn as pos, k.hit
        from walk k join listings l on l.id = k.id join users u on u.id = l.seller_id
        where not (select by_gather from flags)
      ))
    select f.walked, f.gathered, f.by_gather, p.*
    from flags f left join page p on true
    order by p.pos;
