/**
 * The validators of GET /listings and GET /listings/{id} (the document's "Caching and conditional
 * requests"). An answer's ETag is a digest of what it holds: each listing's and its seller's
 * stored version (xmin: any update writes a new one), which listings are in the owner's view, the
 * caller's environment (meta.environment), whether more pages follow, and the contract
 * (DOCUMENT_DIGEST). Not meta.request_id, which names the exchange. So it is computed alike from
 * the full rows (a 200) and from the versions alone (a 304, without building the answer).
 */
import { hash } from 'node:crypto';
import { DOCUMENT_DIGEST } from '../generated/constants.ts';
import type { RowVersion } from './listing-row.ts';

export interface Validated {
  /** 'page' or 'listing': a one-listing page and the listing itself are different answers. */
  kind: 'page' | 'listing';
  environment: string;
  rows: readonly { version: RowVersion; owner: boolean }[];
  more?: boolean;
  /** A searched page: its query and next cursor (the plain feed's follow from its rows). */
  query?: string;
}

export function etagOf(answer: Validated): string {
  // One string, hashed in one call: a Hash object updated per row cost more than the hashing.
  let text = `${DOCUMENT_DIGEST}|${answer.kind}|${answer.environment}|`;
  for (const { version, owner } of answer.rows) {
    text += `${version.id}:${version.row_version}:${version.seller_version}:${owner ? 1 : 0};`;
  }
  text += answer.more ? '+' : '.';
  if (answer.query !== undefined) text += `|${answer.query}`;
  return `"${hash('sha256', text, 'base64url').slice(0, 22)}"`;
}

/**
 * Whether If-None-Match names this ETag: `*`, or a list compared weakly (a `W/` prefix is
 * ignored), as RFC 9110 (13.1.2) has it for If-None-Match.
 */
export function matchesAny(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
}
