/**
 * What every contract test file starts from: an app of its own (its own database on
 * PostgreSQL), the recorder that checks every answer against the document, accounts and
 * credentials made through the services as the CLI and the portal do, OAuth clients and access
 * tokens issued through the authorization code flow, and listings created through the API.
 * The files split the document by tag (system, profiles, listings, events, oauth); each one
 * replays its tag's documented examples (replay.ts), drives its statuses and checks its
 * coverage.
 */
import { eq } from 'drizzle-orm';
import type { TAP } from 'tap';
import { oauthTokens } from '../../src/db/schema.ts';
import { hashSecret } from '../../src/lib/secrets.ts';
import { createDeveloper, createKey } from '../helpers/accounts.ts';
import { buildTestApp } from '../helpers/app.ts';
import { OpenApiDocument } from './document.ts';
import { OAuthFixtures } from './oauth-fixtures.ts';
import { ContractRecorder, type Asserter, type ContractRequest } from './recorder.ts';

const PHOTO = 'https://images.example.com/contract/cover.jpg';
export const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';
export const MiB = 1024 * 1024;
/** Well-formed keys that were never issued. */
const unknownLiveKey = `svc_live_${'Q'.repeat(43)}`;
const unknownSandboxKey = `svc_sandbox_${'Q'.repeat(43)}`;
/** A well-formed access token that was never issued. */
export const unknownToken = `svc_oauth_${'Q'.repeat(43)}`;

/** A valid create body of an active listing with a photo. */
export const listingBody = (title: string, extra: Record<string, unknown> = {}) => ({
  title,
  price_cents: 2500,
  status: 'active',
  cover_image_url: PHOTO,
  ...extra,
});

export const past = () => new Date(Date.now() - 60_000);

export type ContractSuite = Awaited<ReturnType<typeof contractSuite>>;

/**
 * Builds the app and its accounts, and queues the fixture tests (listings created through the
 * API, access tokens issued through POST /oauth/token): the file's tests that follow run once
 * they have filled `fixtures` and `tokens`.
 */
export async function contractSuite(t: TAP) {
  const doc = new OpenApiDocument();
  const app = await buildTestApp(t);
  const contract = new ContractRecorder(app, doc);
  const send = (t: Asserter, request: ContractRequest) => contract.send(t, request);

  const seller = await createDeveloper(app);
  const rival = await createDeveloper(app);
  const keys = {
    // Every scope: the saved searches' operations need `searches`, not on a key by default.
    sandbox: await createKey(app, seller, 'sandbox', 'read listings:write searches'),
    live: await createKey(app, seller, 'live', 'read listings:write searches'),
    /** Only `read`: no listings:write. */
    readOnly: await createKey(app, seller, 'sandbox', 'read'),
    /** Only `listings:write`: no read. */
    writeOnly: await createKey(app, seller, 'sandbox', 'listings:write'),
    rivalLive: await createKey(app, rival, 'live'),
    /** With the key-only scope webhooks:write (the Webhooks operations). */
    webhooksSandbox: await createKey(app, seller, 'sandbox', 'read listings:write webhooks:write'),
    webhooksLive: await createKey(app, seller, 'live', 'read listings:write webhooks:write'),
    /** With the key-only scope audit:read (the Audit operation). */
    auditSandbox: await createKey(app, seller, 'sandbox', 'audit:read'),
    auditLive: await createKey(app, seller, 'live', 'read audit:read'),
  };
  const revokedKey = await app.services.keys.create({ appId: seller.appId, env: 'sandbox' });
  await app.services.keys.revoke(revokedKey.id);

  /**
   * OAuth: registered apps, and a user (a seller of their own, not the keys' owner) who signs
   * in and consents in a real browser session. Access tokens are issued in the fixtures test
   * below, through POST /oauth/token.
   */
  const oauth = await OAuthFixtures.create(app, contract);
  const tokens = {
    /** `read listings:write`: the caller of the oauth2 security alternative. */
    full: '',
    readOnly: '',
    writeOnly: '',
    revoked: '',
    expired: '',
  };
  /** The scope of the documented authorization request (authorize's `scope` example). */
  const documentedScope = String(
    doc.operation('authorize').parameters.find((p) => p.name === 'scope')?.example ?? 'read',
  );

  async function createListing(
    t: Asserter,
    credential: string,
    body: Record<string, unknown>,
    label: string,
  ): Promise<string> {
    const res = await send(t, {
      op: 'createListing',
      label: `fixture: ${label}`,
      credential,
      body,
      expect: [201, 200],
    });
    return String(res.json?.data?.id);
  }

  const fixtures = {
    liveActive: '',
    sandboxActive: '',
    sandboxDraftNoPhoto: '',
    rivalLiveActive: '',
    rivalLiveDraft: '',
    sandboxArchived: '',
    archivedExternalId: 'contract-archived',
  };

  t.test('fixtures: listings created through the API', async (t) => {
    fixtures.liveActive = await createListing(
      t,
      keys.live,
      listingBody('Live active fixture'),
      'live active listing',
    );
    fixtures.sandboxActive = await createListing(
      t,
      keys.sandbox,
      listingBody('Sandbox active fixture'),
      'sandbox active listing',
    );
    fixtures.sandboxDraftNoPhoto = await createListing(
      t,
      keys.sandbox,
      { title: 'Draft without photo', price_cents: 900 },
      'draft, no photo',
    );
    fixtures.rivalLiveActive = await createListing(
      t,
      keys.rivalLive,
      listingBody('Rival active fixture'),
      "another seller's live active listing",
    );
    fixtures.rivalLiveDraft = await createListing(
      t,
      keys.rivalLive,
      { title: 'Rival draft fixture', price_cents: 900 },
      "another seller's live draft",
    );
    fixtures.sandboxArchived = await createListing(
      t,
      keys.sandbox,
      listingBody('Archived fixture', { external_id: fixtures.archivedExternalId }),
      'listing to archive',
    );
    await send(t, {
      op: 'archiveListing',
      label: 'fixture: archive it',
      credential: keys.sandbox,
      path: { id: fixtures.sandboxArchived },
      expect: 200,
    });
  });

  t.test('fixtures: access tokens issued through the authorization code flow', async (t) => {
    tokens.full = await oauth.token(t, 'token with read listings:write', {
      scope: 'read listings:write',
    });
    tokens.readOnly = await oauth.token(t, 'token with read', { scope: 'read' });
    tokens.writeOnly = await oauth.token(t, 'token with listings:write', {
      scope: 'listings:write',
    });
    tokens.revoked = await oauth.token(t, 'token to revoke');
    await oauth.revoke(t, tokens.revoked, 'revoke it');
    tokens.expired = await oauth.token(t, 'token to expire');
    // Thirty days cannot be waited for: the stored expiry is moved into the past.
    await app.db
      .update(oauthTokens)
      .set({ expiresAt: past() })
      .where(eq(oauthTokens.tokenHash, hashSecret(tokens.expired)));
  });

  /** Invalid credentials: each must be 401 on public reads too, never silently anonymous. */
  const badCredentials = () => [
    { name: 'an unknown live key', credential: unknownLiveKey },
    { name: 'an unknown sandbox key', credential: unknownSandboxKey },
    { name: 'a revoked key', credential: revokedKey.key },
    { name: 'a token of no known kind', credential: 'not_a_known_credential' },
    { name: 'an unknown access token', credential: unknownToken },
    { name: 'a revoked access token', credential: tokens.revoked },
    { name: 'an expired access token', credential: tokens.expired },
  ];

  async function unauthorized(
    t: Asserter,
    op: string,
    path: Record<string, string> = {},
    extra: Partial<ContractRequest> = {},
  ) {
    for (const bad of badCredentials()) {
      await send(t, {
        op,
        label: `with ${bad.name}`,
        credential: bad.credential,
        path,
        ...extra,
        expect: 401,
      });
    }
    await send(t, {
      op,
      label: 'with a non-Bearer Authorization header',
      headers: { authorization: 'Basic dXNlcjpwYXNz' },
      path,
      ...extra,
      expect: 401,
    });
  }

  return {
    doc,
    app,
    contract,
    send,
    seller,
    rival,
    keys,
    oauth,
    tokens,
    documentedScope,
    fixtures,
    createListing,
    unauthorized,
  };
}
