/**
 * The command lines the portal shows, ready to paste into a POSIX shell. Keys and URLs are
 * made of URL-safe characters, so single quotes are enough.
 */
const FIRST_LISTING = { title: 'My first sandbox listing', price_dollars: 25 } as const;

export function createListingCurl(baseUrl: string, key: string): string {
  return (
    `curl -s -X POST '${baseUrl}/api/v1/listings' -H 'Authorization: Bearer ${key}' ` +
    `-H 'Content-Type: application/json' -d '${JSON.stringify(FIRST_LISTING)}'`
  );
}

export function listListingsCurl(baseUrl: string, key: string): string {
  return `curl -s '${baseUrl}/api/v1/listings' -H 'Authorization: Bearer ${key}'`;
}

export function meCurl(baseUrl: string, key: string): string {
  return `curl -s '${baseUrl}/api/v1/me' -H 'Authorization: Bearer ${key}'`;
}
