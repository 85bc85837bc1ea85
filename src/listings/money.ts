import { ValidationError } from '../errors.ts';

/**
 * price_dollars -> price_cents without floating point: the number's shortest decimal
 * representation (what JSON carried) is split into digits, so 19.99 -> 1999 and 0.07 -> 7.
 * More than two decimals is a validation error, never a rounding.
 */
export function dollarsToCents(dollars: number, path = '/price_dollars'): number {
  if (!Number.isFinite(dollars) || dollars <= 0)
    throw ValidationError.field(path, 'must be a positive number');
  const text = dollars.toString();
  const match = /^(\d+)(?:\.(\d+))?$/.exec(text);
  if (!match)
    throw ValidationError.field(path, 'must be a plain decimal amount with at most 2 decimals');
  const [, whole, fraction = ''] = match;
  if (fraction.length > 2) throw ValidationError.field(path, 'must have at most 2 decimals');
  const cents = Number(whole) * 100 + Number(fraction.padEnd(2, '0'));
  if (!Number.isSafeInteger(cents) || cents < 1)
    throw ValidationError.field(path, 'must be at least 0.01');
  return cents;
}
