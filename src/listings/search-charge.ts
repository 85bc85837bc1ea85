/**
 * What a page of GET /api/v1/listings costs against the rate limit (OpenAPI "Rate limits"): a
 * request is charged by the work it caused, as GitHub and Shopify charge their GraphQL queries by
 * cost. Every request counts 1 when it arrives; a search page counts 1 more per full 1,000
 * listing rows its statements read (ListingPage.rowsRead), at most CHARGE_MAX in all. A page
 * that read fewer than 1,000 rows (the plain feed, a filter its index serves) costs 1.
 */
const ROWS_PER_UNIT = 1000;
export const CHARGE_MAX = 10;

/** The units a page is charged in all (1 when it reports no rows read). */
export function searchCharge(rowsRead: number | undefined): number {
  if (rowsRead === undefined || !(rowsRead > 0)) return 1;
  return Math.min(CHARGE_MAX, 1 + Math.floor(rowsRead / ROWS_PER_UNIT));
}
