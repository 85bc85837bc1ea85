/**
 * The Marketplace Listings API SDK: `import { createMarketplaceClient } from
 * 'marketplace-listings-api/sdk'`.
 *
 * A typed client generated from openapi/openapi.yaml (openapi-typescript types, openapi-fetch),
 * credentials for API keys and OAuth tokens, cursor iteration, typed errors carrying the error
 * code, Idempotency-Key support, and the webhook signature verification of src/webhooks/verify.ts.
 * docs/sdk.md has the walkthrough; the package's build of this entry is dist/ (npm run build:sdk).
 */
export {
  createMarketplaceClient,
  type CreatedListing,
  type CreateListingOptions,
  type MarketplaceClient,
  type MarketplaceClientOptions,
} from './client.ts';
export { apiKeyAuth, keyEnvironment, oauthTokenAuth, type Authenticator } from './auth.ts';
export { refreshAccessToken, type OAuthTokenResponse, type RefreshOptions } from './oauth.ts';
export { isMarketplaceApiError, MarketplaceApiError, type ApiErrorCode } from './errors.ts';
export { paginateItems, paginatePages, type CursorPage, type CursorQuery } from './pagination.ts';
export type * from './types.ts';
export {
  verifyServiceSignature,
  verifyWebhook,
  WebhookVerificationError,
  type HeaderSource,
  type VerifyOptions,
  type WebhookEvent,
  type WebhookEventType,
  type WebhookVerificationFailure,
} from '../webhooks/verify.ts';
