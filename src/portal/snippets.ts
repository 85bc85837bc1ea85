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

/** The environment variable the SDK's `listen` command reads the credential from. */
export const LISTEN_KEY_VARIABLE = 'MARKETPLACE_KEY';

/**
 * The SDK's `listen` command for one environment of an app (docs/webhooks.md, "Developing
 * locally"), as it runs today: from the root of a checkout of this repository (the SDK is not on
 * a registry yet). The key is a placeholder, since keys are shown once.
 */
export function listenCommand(baseUrl: string, env: 'sandbox' | 'live'): string {
  return (
    `${LISTEN_KEY_VARIABLE}=svc_${env}_… MARKETPLACE_URL=${baseUrl} ` +
    'npm run --silent listen -- --forward-to http://localhost:4000/hooks'
  );
}
