-- GET /api/v1/listings: a search's second page, sort=newest, the walk-only first
-- Built by src/listings/search-statement.ts searchStatement.
-- Written by scripts/sql-snapshots.ts (npm run sql:snapshots): do not edit; change the
-- builder and run it again. The text as sent; its parameters:
--   $1 = :q
--   $2 = :category
--   $3 = :condition_0
--   $4 = :condition_1
--   $5 = :tag_0
--   $6 = :maxPriceCents
--   $7 = :after_published_at
--   $8 = :q
--   $9 = :q
--   $10 = :category
--   $11 = :condition_0
--   $12 = :condition_1
--   $13 = :tag_0
--   $14 = :q
--   $15 = :q
--   $16 = :category
--   $17 = :condition_0
--   $18 = :condition_1
--   $19 = :tag_0
--   $20 = :maxPriceCents
--   $21 = :after_published_at
with walk as materialized (
      select w.id, w.hit, w.rn from (
        select l.id, (l.search @@ websearch_to_tsquery('english', $1) and lower(l.category) = lower($2) and l.condition = any(array[$3, $4]::text[]) and l.tags @> array[$5]::text[] and l.price_cents <= $6) as hit, row_number() over walk_order as rn,
          lead(l.id) over walk_order is null as last
        from listings l
        where l.environment = 'live' and l.status = 'active' and l.published_at < $7::timestamptz and numnode(websearch_to_tsquery('english', $8)) > 0 and true
        window walk_order as (order by l.published_at desc nulls last)
        order by l.published_at desc nulls last limit 5000
      ) w
      where w.hit or w.rn = 5000 or w.last
      limit 26
    ), gathered as materialized (
        select m.id from listings_matching(quote_literal('scope:public')::tsquery && websearch_to_tsquery('english', $9) && quote_literal('category:' || md5(lower($10)))::tsquery && (quote_literal('condition:' || $11::text)::tsquery || quote_literal('condition:' || $12::text)::tsquery) && quote_literal('tag:' || md5($13))::tsquery, 5001) as m(id)
        where numnode(websearch_to_tsquery('english', $14)) > 0 and false
      ), flags as materialized (
      select ((false)
        and (select count(*) from gathered) <= 5000) as by_gather,
        (select coalesce(max(rn), 0) from walk) as walked,
        (select count(*) from gathered) as gathered
    ), page as ((
        select l.id, l.seller_id, l.app_id, l.environment, l.status, l.title, l.description, l.category, l.condition, l.brand, l.size, l.color, l.price_cents, l.currency, l.impact_mode, l.cover_image_url, l.image_urls, l.tags, l.like_count, l.external_id, to_char(l.published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as published_at, to_char(l.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at, to_char(l.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as updated_at, u.username as seller_username, u.display_name as seller_display_name, u.avatar_url as seller_avatar_url, l.xmin::text as row_version, u.xmin::text as seller_version, null::text as sort_rank, null::text as window_top, row_number() over (order by l.published_at desc nulls last) as pos, true as hit
        from gathered g join lateral (select listings.*, listings.xmin from listings
      where listings.id = g.id offset 0) l on true join users u on u.id = l.seller_id
        where (select by_gather from flags) and l.environment = 'live' and l.status = 'active' and l.search @@ websearch_to_tsquery('english', $15) and lower(l.category) = lower($16) and l.condition = any(array[$17, $18]::text[]) and l.tags @> array[$19]::text[] and l.price_cents <= $20 and l.published_at < $21::timestamptz
        order by l.published_at desc nulls last limit 25
      ) union all (
        select l.id, l.seller_id, l.app_id, l.environment, l.status, l.title, l.description, l.category, l.condition, l.brand, l.size, l.color, l.price_cents, l.currency, l.impact_mode, l.cover_image_url, l.image_urls, l.tags, l.like_count, l.external_id, to_char(l.published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as published_at, to_char(l.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at, to_char(l.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as updated_at, u.username as seller_username, u.display_name as seller_display_name, u.avatar_url as seller_avatar_url, l.xmin::text as row_version, u.xmin::text as seller_version, null::text as sort_rank, null::text as window_top, k.rn as pos, k.hit
        from walk k join listings l on l.id = k.id join users u on u.id = l.seller_id
        where not (select by_gather from flags)
      ))
    select f.walked, f.gathered, f.by_gather, p.*
    from flags f left join page p on true
    order by p.pos;
