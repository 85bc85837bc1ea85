/**
 * The roles a member of an app has (src/access.ts decides what each may do; docs/portal.md
 * "Members and roles" is the table), from the most to the least: the schema checks the column
 * against this list.
 */
export const APP_ROLES = ['owner', 'admin', 'developer', 'viewer'] as const;
export type AppRole = (typeof APP_ROLES)[number];
