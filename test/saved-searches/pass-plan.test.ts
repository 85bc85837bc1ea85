/**
 * What a matcher pass takes of what it claimed (src/saved-searches/matcher.ts planPass), in
 * process: the light listings in queue order as their candidates fit the pass's budget (the
 * first one whatever its weight), a listing found heavy kept for the heavy lane (not matched in
 * the light lane, so it delays none behind it), and the heavy lane's one listing beside them.
 */
import t from 'tap';
import { HEAVY, planPass } from '../../src/saved-searches/matcher.ts';

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
  const plan = planPass([row(1, 'a'), row(2, 'b'), row(3, 'c')], undefined, weights, 100);
  t.strictSame(plan.taken, ['a', 'c'], 'a and c fit; b, over the budget, waits (first next time)');
  t.strictSame(plan.foundHeavy, []);
});

t.test('the first light listing is taken whatever the budget', async (t) => {
  const plan = planPass([row(1, 'a')], undefined, new Map([['a', 150]]), 100);
  t.strictSame(plan.taken, ['a']);
});

t.test('a heavy listing moves to its lane; the light ones behind it are matched', async (t) => {
  const weights = new Map([
    ['flood', HEAVY + 1],
    ['probe', 1],
  ]);
  const plan = planPass([row(1, 'flood'), row(2, 'probe')], undefined, weights, 2000);
  t.strictSame(plan.taken, ['probe'], 'the probe, not the heavy one before it');
  t.strictSame(plan.foundHeavy, ['flood']);
});

t.test("the heavy lane's one listing comes beside the light ones", async (t) => {
  const heavy = row(0, 'old flood', HEAVY * 10);
  const weights = new Map([['probe', 3]]);
  t.strictSame(planPass([row(5, 'probe')], heavy, weights, 2000).taken, ['probe', 'old flood']);
  t.strictSame(planPass([], heavy, new Map(), 2000).taken, ['old flood'], 'or alone');
});

t.test('two writes of one listing are one listing', async (t) => {
  const plan = planPass([row(1, 'a'), row(2, 'a')], undefined, new Map([['a', 5]]), 100);
  t.strictSame(plan.taken, ['a']);
});
