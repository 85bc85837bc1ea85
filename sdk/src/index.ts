/**
 * The Marketplace Listings API SDK (package marketplace-listings-sdk):
 * `import { createMarketplaceClient } from 'marketplace-listings-sdk'`.
 *
 * A typed client generated from openapi/openapi.yaml (openapi-typescript types, openapi-fetch),
 * credentials for API keys and OAuth tokens, cursor iteration, typed errors carrying the error
 * code, Idempotency-Key support, and webhook signature verification (WebCrypto, ./webhooks.ts).
 * sdk/README.md has the walkthrough; `npm run build` in sdk/ builds dist/esm and dist/cjs.
 */
export {
  createMarketplaceClient,
  type CreatedListing,
  type CreateListingOptions,
  type MarketplaceClient,
  type MarketplaceClientOptions,
} from './client.js';
export { apiKeyAuth, keyEnvironment, oauthTokenAuth, type Authenticator } from './auth.js';
export { refreshAccessToken, type OAuthTokenResponse, type RefreshOptions } from './oauth.js';
export { isMarketplaceApiError, MarketplaceApiError, type ApiErrorCode } from './errors.js';
export { paginateItems, paginatePages, type CursorPage, type CursorQuery } from './pagination.js';
export type * from './types.js';
export {
  verifyServiceSignature,
  verifyWebhook,
  WebhookVerificationError,
  type HeaderSource,
  type VerifyOptions,
  type WebhookEvent,
  type WebhookEventType,
  type WebhookSecrets,
  type WebhookVerificationFailure,
} from './webhooks.js';
export {
  deliveryRequest,
  isLoopbackUrl,
  listen,
  ListenError,
  newListenSecret,
  type Forward,
  type ListenOptions,
} from './listen.js';
