/** Listing bodies shared by the listing, webhook and contract tests. */

let serial = 0;

/** A valid create body (a draft unless overridden); each call gets its own title and price. */
export function listingBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  serial += 1;
  return { title: `Test listing ${serial}`, price_cents: 1000 + serial, ...overrides };
}
