/**
 * The memory side of the rate-limit counters (src/lib/rate-limit-store.ts), in process: the same
 * fixed window as Redis's (the first count starts it; counts inside it add up; after it a count
 * starts a new one), a read that changes nothing, and a bound on the keys held. The clock is
 * injected: elapsed time is the subject.
 */
import t from 'tap';
import { MemoryCounters, ResilientStore, type Counter } from '../../src/lib/rate-limit-store.ts';

t.test('a fixed window per key', async (t) => {
  let now = 1_000_000;
  const counters = new MemoryCounters(10, () => now);
  t.same(counters.read('a', 60_000), { current: 0, ttl: 0 }, 'no counter yet');
  t.same(counters.incrBy('a', 1, 60_000), { current: 1, ttl: 60_000 }, 'the first count starts it');
  now += 20_000;
  t.same(counters.incrBy('a', 3, 60_000), { current: 4, ttl: 40_000 }, 'counts add up inside it');
  t.same(counters.read('a', 60_000), { current: 4, ttl: 40_000 }, 'a read counts nothing');
  t.same(counters.read('a', 60_000), { current: 4, ttl: 40_000 });
  t.same(counters.incrBy('b', 1, 60_000), { current: 1, ttl: 60_000 }, 'each key its own');
  now += 40_000;
  t.same(counters.read('a', 60_000), { current: 0, ttl: 0 }, 'ended with its window');
  t.same(counters.incrBy('a', 1, 60_000), { current: 1, ttl: 60_000 }, 'the next count: a new one');
  counters.delete('a');
  t.same(counters.read('a', 60_000), { current: 0, ttl: 0 }, 'forgotten');
});

t.test('at most `size` keys: the least recently counted go first', async (t) => {
  const counters = new MemoryCounters(2, () => 0);
  counters.incrBy('a', 1, 60_000);
  counters.incrBy('b', 1, 60_000);
  counters.incrBy('a', 1, 60_000);
  counters.incrBy('c', 1, 60_000);
  t.equal(counters.read('b', 60_000).current, 0, 'b, counted least recently, was dropped');
  t.equal(counters.read('a', 60_000).current, 2);
  t.equal(counters.read('c', 60_000).current, 1);
});

t.test("the store's contract without Redis: incr, read, reset", async (t) => {
  const store = new ResilientStore(null).child({ groupId: 'api' });
  const call = (method: 'incr' | 'read') =>
    new Promise<Counter>((resolve, reject) =>
      store[method]('k', (err, result) => (err ? reject(err) : resolve(result!)), 60_000),
    );
  t.equal((await call('incr')).current, 1);
  t.equal((await call('incr')).current, 2);
  t.equal((await call('read')).current, 2, 'read does not count');
  await store.reset('k');
  t.same(await call('read'), { current: 0, ttl: 0 }, 'reset forgets it');
});
