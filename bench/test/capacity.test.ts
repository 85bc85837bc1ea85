/**
 * docs/scaling.md's capacity model is generated from the committed results files
 * (bench/src/capacity.ts): the block in the document is what they give now, so a new bench
 * run without `npm run bench:capacity`, or a hand edit of the block, fails here.
 */
import t from 'tap';
import { capacityBlocks } from '../src/capacity.ts';

t.test('docs/scaling.md holds the capacity block the results files give', async (t) => {
  const { committed, computed } = capacityBlocks();
  t.match(computed, /\| 100% \| \*\*the mix\*\*/, 'the block has the mix row');
  t.equal(committed, computed, 'run `npm run bench:capacity` after a bench run');
});
