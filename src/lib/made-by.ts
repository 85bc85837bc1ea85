/**
 * Who made an app's key or webhook endpoint (docs/portal.md, "Members and roles": what a member
 * made stays the app's and is listed with who made it): the columns created_by and created_via
 * (drizzle/0028) as a door sets them, and the portal's "Made by" in words.
 */

/**
 * How a key or a webhook endpoint was made: by a signed-in member on the portal, with the admin
 * CLI, or (endpoints only) through the API with one of the app's keys.
 */
export const MADE_VIA = ['portal', 'admin_cli', 'api_key'] as const;
export type MadeVia = (typeof MADE_VIA)[number];

/**
 * A member signed in to the portal, an operator's admin CLI, or (endpoints) one of the app's API
 * keys through the API: a key acts as the app's account holder, not as a person, so it names
 * nobody here; the audit log's entry names the key.
 */
export type Maker = { via: 'portal'; userId: string } | { via: 'admin_cli' } | { via: 'api_key' };

/** The row's created_by and created_via for a maker (none given: neither is known). */
export function madeColumns(maker: Maker | undefined): {
  createdBy: string | null;
  createdVia: MadeVia | null;
} {
  if (!maker) return { createdBy: null, createdVia: null };
  return { createdBy: maker.via === 'portal' ? maker.userId : null, createdVia: maker.via };
}

/**
 * "Made by" in words: the member's username; "admin CLI"; "an API key"; "—" when it is not known
 * (made before it was kept, or the member's account is gone).
 */
export function madeByWords(row: { createdVia: MadeVia | null; createdByUsername: string | null }) {
  if (row.createdByUsername !== null) return row.createdByUsername;
  if (row.createdVia === 'admin_cli') return 'admin CLI';
  if (row.createdVia === 'api_key') return 'an API key';
  return '—';
}
