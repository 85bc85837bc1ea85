/**
 * docs/performance.md's "Where each microsecond goes" block is generated from bench/features.json
 * (scripts/bench/features.ts): a new run without its report, or a hand edit of the block, fails.
 */
import t from 'tap';
import { featuresBlocks } from '../../scripts/bench/features.ts';

t.test('docs/performance.md holds the features block bench/features.json gives', async (t) => {
  const { committed, computed } = featuresBlocks();
  t.match(computed, /\| \*\*everything on\*\* \|/, 'the block has the everything-on row');
  t.equal(committed, computed, 'run `npm run bench:features` (it writes both)');
});
