import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Credential prefixes (OpenAPI "Authentication"): the prefix says what a secret is. */
export const PREFIX = {
  sandboxKey: 'svc_sandbox_',
  liveKey: 'svc_live_',
  clientSecret: 'svc_cs_',
  authorizationCode: 'svc_ac_',
  accessToken: 'svc_oauth_',
  refreshToken: 'svc_rt_',
  /** Endpoint signing secrets (CONTRACT.md section 6; src/webhooks/signing.ts newSigningSecret). */
  webhookSecret: 'svc_whsec_',
} as const;

/**
 * The Standard Webhooks prefix: an endpoint secret without its `svc_` (what those libraries take)
 * and the SDK's `listen` secret. Not a credential prefix of ours, but redacted as one.
 */
export const STANDARD_WEBHOOK_PREFIX = 'whsec_';

/** prefix + 43 url-safe characters (32 random bytes). */
export function generateSecret(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url');
}

/**
 * Secrets are stored as SHA-256 digests only. They carry 256 bits of entropy, so a fast hash
 * is the right tool (as GitHub and Stripe do for tokens): a dump holds nothing usable, and
 * lookups stay a single indexed equality.
 */
export function hashSecret(secret: string): string {
  // crypto.hash: one call, no Hash object (every keyed request hashes its key).
  return hash('sha256', secret, 'hex');
}

/** Constant-time string comparison (digests and signatures). */
export function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  if (left.length !== right.length) {
    timingSafeEqual(left, left); // spend the same time either way
    return false;
  }
  return timingSafeEqual(left, right);
}

/** What can be shown of a secret after creation: its prefix and first characters. */
export function displayPrefix(secret: string, prefix: string): string {
  return secret.slice(0, prefix.length + 6);
}
