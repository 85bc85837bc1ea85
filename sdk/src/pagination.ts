/**
 * Keyset pagination as async iterators (openapi "Pagination"): pass `meta.next_cursor` of a page
 * as the next `cursor` until it is null. Every request repeats the first one's query (filters,
 * sort) with only the cursor changed: a search's cursor is valid only with the same query.
 */

export interface CursorQuery {
  limit?: number;
  cursor?: string;
}

export interface CursorPage<T> {
  data: T[];
  meta: { next_cursor: string | null };
}

/** Every page from `query.cursor` (or the newest) to the last one. */
export async function* paginatePages<Q extends CursorQuery, P extends CursorPage<unknown>>(
  fetchPage: (query: Q) => Promise<P>,
  query: Q,
): AsyncGenerator<P, void, undefined> {
  let cursor = query.cursor;
  for (;;) {
    const page = await fetchPage(cursor === undefined ? query : { ...query, cursor });
    yield page;
    const next = page.meta.next_cursor;
    if (next === null) return;
    // A cursor that does not move would loop forever: stop loudly instead.
    if (next === cursor)
      throw new Error(`pagination did not advance (next_cursor ${next} repeated)`);
    cursor = next;
  }
}

/** Every item of every page, in the order of the pages (the feed: newest first). */
export async function* paginateItems<Q extends CursorQuery, T>(
  fetchPage: (query: Q) => Promise<CursorPage<T>>,
  query: Q,
): AsyncGenerator<T, void, undefined> {
  for await (const page of paginatePages(fetchPage, query)) yield* page.data;
}
