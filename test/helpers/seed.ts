/**
 * The seed of the suite's generated cases (fast-check's properties and the files' own seeded
 * generators): fixed unless TEST_SEED says otherwise, so every CI run tests the same cases and a
 * failure reruns as it was. `TEST_SEED=n` reruns a seed a failure named; `TEST_SEED=random` (as
 * `npm run test:random` sets it) draws a new one for each file, printed as a comment and in the
 * name of each property's failure (fast-check's report names it and the path of the shrunk case).
 */
import fc from 'fast-check';

const FIXED = 20_261_202;

function chosen(): number {
  const value = process.env.TEST_SEED;
  if (value === undefined || value === '') return FIXED;
  if (value === 'random') return Math.floor(Math.random() * 2 ** 31);
  const seed = Number(value);
  if (!Number.isSafeInteger(seed)) throw new Error(`TEST_SEED=${value}: an integer or "random"`);
  return seed;
}

/** This process's seed, given to fast-check for every property of the file. */
export const seed = chosen();
fc.configureGlobal({ ...fc.readConfigureGlobal(), seed });

/** mulberry32: a small generator of numbers in [0, 1), from `seed`. */
export function seededRandom(from = seed): () => number {
  let state = from;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let x = Math.imul(state ^ (state >>> 15), 1 | state);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4_294_967_296;
  };
}
