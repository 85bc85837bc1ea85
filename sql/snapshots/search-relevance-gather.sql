-- GET /api/v1/listings: a search's second page, sort=relevance, the gather first
-- Built by src/listings/search-statement.ts searchStatement.
-- Written by scripts/sql-snapshots.ts (npm run sql:snapshots): do not edit; change the
-- builder and run it again. The text as sent; its parameters:
--   $1 = :q
--   $2 = :category
--   $3 = :condition_0
--   $4 = :condition_1
--   $5 = :tag_0
--   $6 = :q
--   $7 = :q
--   $8 = :category
--   $9 = :condition_0
--   $10 = :condition_1
--   $11 = :tag_0
--   $12 = :maxPriceCents
--   $13 = :published_by
--   $14 = :q
--   $15 = :q
--   $16 = :category
--   $17 = :condition_0
--   $18 = :condition_1
--   $19 = :tag_0
--   $20 = :maxPriceCents
--   $21 = :published_by
--   $22 = :q
--   $23 = :after_rank
--   $24 = :after_published_at
with gathered as materialized (
        select m.id from listings_matching(quote_literal('scope:public')::tsquery && websearch_to_tsquery('english', $1) && quote_literal('category:' || md5(lower($2)))::tsquery && (quote_literal('condition:' || $3::text)::tsquery || quote_literal('condition:' || $4::text)::tsquery) && quote_literal('tag:' || md5($5))::tsquery, 5001) as m(id)
        where numnode(websearch_to_tsquery('english', $6)) > 0 and true
      ), walk as materialized (
      select w.id, w.hit, w.rn from (
        select l.id, (l.search @@ websearch_to_tsquery('english', $7) and lower(l.category) = lower($8) and l.condition = any(array[$9, $10]::text[]) and l.tags @> array[$11]::text[] and l.price_cents <= $12) as hit, row_number() over walk_order as rn,
          lead(l.id) over walk_order is null as last
        from listings l
        where l.environment = 'live' and l.status = 'active' and l.published_at <= $13::timestamptz and numnode(websearch_to_tsquery('english', $14)) > 0 and (select count(*) from gathered) > 5000
        window walk_order as (order by l.published_at desc nulls last)
        order by l.published_at desc nulls last limit 5000
      ) w
      where w.hit or w.rn = 5000 or w.last
      limit 1001
    ), flags as materialized (
      select ((true)
        and (select count(*) from gathered) <= 5000) as by_gather,
        (select coalesce(max(rn), 0) from walk) as walked,
        (select count(*) from gathered) as gathered
    ), page as (with win as (
      (select g.id, l.published_at from gathered g join lateral (select listings.*, listings.xmin from listings
      where listings.id = g.id offset 0) l on true
        where (select by_gather from flags) and l.environment = 'live' and l.status = 'active' and l.search @@ websearch_to_tsquery('english', $15) and lower(l.category) = lower($16) and l.condition = any(array[$17, $18]::text[]) and l.tags @> array[$19]::text[] and l.price_cents <= $20 and l.published_at <= $21::timestamptz
        order by l.published_at desc limit 1000)
      union all
      (select k.id, l.published_at from walk k join listings l on l.id = k.id
        where not (select by_gather from flags) and k.hit)
    ), w as (
      select win.id, win.published_at, ts_rank(l.search, websearch_to_tsquery('english', $22)) as rank
      from win join listings l on l.id = win.id
    ), top as (
      select w.id, w.rank, w.published_at from w where (w.rank, w.published_at) < ($23::real, $24::timestamptz)
      order by w.rank desc, w.published_at desc limit 25
    )
    select l.id, l.seller_id, l.app_id, l.environment, l.status, l.title, l.description, l.category, l.condition, l.brand, l.size, l.color, l.price_cents, l.currency, l.impact_mode, l.cover_image_url, l.image_urls, l.tags, l.like_count, l.external_id, to_char(l.published_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as published_at, to_char(l.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at, to_char(l.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as updated_at, u.username as seller_username, u.display_name as seller_display_name, u.avatar_url as seller_avatar_url, l.xmin::text as row_version, u.xmin::text as seller_version, top.rank::text as sort_rank,
      to_char((select max(published_at) from w) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
        as window_top,
      row_number() over (order by top.rank desc, top.published_at desc) as pos, true as hit
    from top join listings l on l.id = top.id join users u on u.id = l.seller_id)
    select f.walked, f.gathered, f.by_gather, p.*
    from flags f left join page p on true
    order by p.pos;
