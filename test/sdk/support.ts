/** What the SDK's tests share. */
import type { Test } from 'tap';
import { MarketplaceApiError } from '../../sdk/src/index.ts';

/** The error a call rejects with, checked to be a MarketplaceApiError (fails if it resolves). */
export async function rejection(t: Test, pending: Promise<unknown>): Promise<MarketplaceApiError> {
  try {
    await pending;
  } catch (error) {
    t.ok(error instanceof MarketplaceApiError, 'a MarketplaceApiError');
    return error as MarketplaceApiError;
  }
  throw new Error('expected the call to fail');
}
