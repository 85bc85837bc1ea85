/**
 * What a light pass of the matcher takes of what it claimed (src/saved-searches/matcher-worker.ts
 * planPass), in process: its listings in queue order as their candidates fit the pass's budget
 * (the first one whatever its weight), and none found heavy (left for the heavy lane's own
 * passes, so it delays none behind it).
 */
import t from 'tap';
import { HEAVY, planPass } from '../../src/saved-searches/matcher-worker.ts';

const row = (id: number, listing: string, weight: number | null = null) => ({
  id: String(id),
  listing_id: listing,
  weight,
});

t.test('light listings in order as they fit; the rest left', async (t) => {
  const weights = new Map([
    ['a', 50],
    ['b', 60],
    ['c', 10],
  ]);
  const taken = planPass([row(1, 'a'), row(2, 'b'), row(3, 'c')], weights, 100);
  t.strictSame(taken, ['a', 'c'], 'a and c fit; b, over the budget, waits (first next time)');
});

t.test('the first light listing is taken whatever the budget', async (t) => {
  t.strictSame(planPass([row(1, 'a')], new Map([['a', 150]]), 100), ['a']);
});

t.test('a heavy listing is left for its lane; the light ones behind it are matched', async (t) => {
  const weights = new Map([
    ['flood', HEAVY + 1],
    ['probe', 1],
  ]);
  const taken = planPass([row(1, 'flood'), row(2, 'probe')], weights, 2000);
  t.strictSame(taken, ['probe'], 'the probe, not the heavy one before it');
  t.strictSame(planPass([row(1, 'flood')], weights, 2000), [], 'nor when it is alone');
});

t.test('two writes of one listing are one listing', async (t) => {
  t.strictSame(planPass([row(1, 'a'), row(2, 'a')], new Map([['a', 5]]), 100), ['a']);
});
