/**
 * Named types of the SDK, all taken from the types generated from openapi/openapi.yaml
 * (src/generated/openapi-types.ts, openapi-typescript): nothing here is written twice.
 */
import type { components, operations, paths, webhooks } from './generated/openapi-types.js';

export type { components, operations, paths, webhooks };

type Schemas = components['schemas'];

export type Environment = Schemas['Environment'];
export type ListingStatus = Schemas['ListingStatus'];
export type ListingCondition = Schemas['ListingCondition'];
/**
 * The codes the document lists today. New codes may be added within v1 (docs/api.md, "Versioning").
 */
export type ErrorCode = Schemas['ErrorCode'];
export type ErrorDetail = Schemas['ErrorDetail'];
export type ErrorResponse = Schemas['ErrorResponse'];
export type Meta = Schemas['Meta'];
export type ListMeta = Schemas['ListMeta'];
export type Listing = Schemas['Listing'];
export type OwnerListing = Schemas['OwnerListing'];
export type ListingCreate = Schemas['ListingCreate'];
export type ListingUpdate = Schemas['ListingUpdate'];
export type BatchRequest = Schemas['BatchRequest'];
export type BatchItemResult = Schemas['BatchItemResult'];
export type BatchResponse = Schemas['BatchResponse'];
export type Profile = Schemas['Profile'];
export type PrivateProfile = Schemas['PrivateProfile'];
export type Health = Schemas['Health'];
export type Event = Schemas['Event'];
export type EventType = Schemas['EventType'];
export type ListingEvent = Schemas['ListingEvent'];
export type PingEvent = Schemas['PingEvent'];
export type EnabledEventType = Schemas['EnabledEventType'];
export type WebhookEndpoint = Schemas['WebhookEndpoint'];
export type CreatedWebhookEndpoint = Schemas['CreatedWebhookEndpoint'];
export type WebhookEndpointCreate = Schemas['WebhookEndpointCreate'];
export type WebhookEndpointUpdate = Schemas['WebhookEndpointUpdate'];
export type SavedSearch = Schemas['SavedSearch'];
export type SavedSearchCreate = Schemas['SavedSearchCreate'];
export type TestEventCreate = Schemas['TestEventCreate'];

export type HealthResponse = Schemas['HealthResponse'];
export type ProfileResponse = Schemas['ProfileResponse'];
export type PrivateProfileResponse = Schemas['PrivateProfileResponse'];
export type ListingResponse = Schemas['ListingResponse'];
export type ListingListResponse = Schemas['ListingListResponse'];
export type EventListResponse = Schemas['EventListResponse'];
export type TestEventCreatedResponse = Schemas['TestEventCreatedResponse'];
export type WebhookEndpointResponse = Schemas['WebhookEndpointResponse'];
export type WebhookEndpointCreatedResponse = Schemas['WebhookEndpointCreatedResponse'];
export type WebhookEndpointListResponse = Schemas['WebhookEndpointListResponse'];
export type SavedSearchResponse = Schemas['SavedSearchResponse'];
export type SavedSearchListResponse = Schemas['SavedSearchListResponse'];

export type ListListingsQuery = NonNullable<operations['listListings']['parameters']['query']>;
export type ListEventsQuery = NonNullable<operations['listEvents']['parameters']['query']>;
export type ListWebhookEndpointsQuery = NonNullable<
  operations['listWebhookEndpoints']['parameters']['query']
>;
export type ListSavedSearchesQuery = NonNullable<
  operations['listSavedSearches']['parameters']['query']
>;
