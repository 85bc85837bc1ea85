-- GET /api/v1/listings: a search's second page, sort=price_asc, the walk-only first
-- Built by src/listings/search-statement.ts searchStatement.
-- Written by scripts/sql-snapshots.ts (npm run sql:snapshots): do not edit; change the
-- builder and run it again. The text as sent; its parameters:
--   $1 = :q
--   $2 = :category
--   $3 = :condition_0
--   $4 = :condition_1
--   $5 = :tag_0
--   $6 = :after_price_cents
--   $7 = :after_published_at
--   $8 = :maxPriceCents
--   $9 = :q
--   $10 = :q
--   $11 = :category
--   $12 = :condition_0
--   $13 = :condition_1
--   $14 = :tag_0
--   $15 = :q
--   $16 = :q
--   $17 = :category
--   $18 = :condition_0
--   $19 = :condition_1
--   $20 = :tag_0
--   $21 = :maxPriceCents
--   $22 = :after_price_cents
--   $23 = :after_published_at
with walk as materialized (
      select w.id, w.hit, w.rn from (
        select l.id, (l.search @@ websearch_to_tsquery('english', $1) and lower(l.category) = lower($2) and l.condition = any(array[$3, $4]::text[]) and l.tags @> array[$5]::text[]) as hit, row_number() over walk_order as rn,
          lead(l.id) over walk_order is null as last
        from listings l
        where l.environment = 'live' and l.status = 'active' and (l.price_cents, l.published_at) > ($6::int, $7::timestamptz) and l.price_cents <= $8 and numnode(websearch_to_tsquery('english', $9)) > 0 and true
        window walk_order as (order by l.price_cents, l.published_at)
        order by l.price_cents, l.published_at limit 5000
      ) w
      where w.hit or w.rn = 5000 or w.last
      limit 26
    ), gathered as materialized (
        select m.id from listings_matching(quote_literal('scope:public')::tsquery && websearch_to_tsquery('english', $10) && quote_literal('category:' || md5(lower($11)))::tsquery && (quote_literal('condition:' || $12::text)::tsquery || quote_literal('condition:' || $13::text)::tsquery) && quote_literal('tag:' || md5($14))::tsquery, 5001) as m(id)
        where numnode(websearch_to_tsquery('english', $15)) > 0 and false
      ), flags as materialized (
      select ((false)
        and (select count(*) from gathered) <= 5000) as by_gather,
        (select coalesce(max(rn), 0) from walk) as walked,
        (select count(*) from gathered) as gathered
    ), page as ((
        select l.id, l.seller_id, l.app_id, l.environment, l.status, l.title, l.description, l.category, l.condition, l.brand, l.size, l.color, l.price_cents, l.currency, l.impact_mode, l.cover_image_url, l.image_urls, l.tags, l.like_count, l.external_id, to_char(l.published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as published_at, to_char(l.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at, to_char(l.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as updated_at, u.username as seller_username, u.display_name as seller_display_name, u.avatar_url as seller_avatar_url, l.xmin::text as row_version, u.xmin::text as seller_version, null::text as sort_rank, null::text as window_top, row_number() over (order by l.price_cents, l.published_at) as pos, true as hit
        from gathered g join lateral (select listings.*, listings.xmin from listings
      where listings.id = g.id offset 0) l on true join users u on u.id = l.seller_id
        where (select by_gather from flags) and l.environment = 'live' and l.status = 'active' and l.search @@ websearch_to_tsquery('english', $16) and lower(l.category) = lower($17) and l.condition = any(array[$18, $19]::text[]) and l.tags @> array[$20]::text[] and l.price_cents <= $21 and (l.price_cents, l.published_at) > ($22::int, $23::timestamptz)
        order by l.price_cents, l.published_at limit 25
      ) union all (
        select l.id, l.seller_id, l.app_id, l.environment, l.status, l.title, l.description, l.category, l.condition, l.brand, l.size, l.color, l.price_cents, l.currency, l.impact_mode, l.cover_image_url, l.image_urls, l.tags, l.like_count, l.external_id, to_char(l.published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as published_at, to_char(l.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at, to_char(l.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as updated_at, u.username as seller_username, u.display_name as seller_display_name, u.avatar_url as seller_avatar_url, l.xmin::text as row_version, u.xmin::text as seller_version, null::text as sort_rank, null::text as window_top, k.rn as pos, k.hit
        from walk k join listings l on l.id = k.id join users u on u.id = l.seller_id
        where not (select by_gather from flags)
      ))
    select f.walked, f.gathered, f.by_gather, p.*
    from flags f left join page p on true
    order by p.pos;
