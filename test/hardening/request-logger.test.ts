/**
 * A request's logger (src/lib/logging.ts requestLogger): below info, pino's child is made only
 * when the request writes a line, and that line carries the request's bindings as a child's would.
 */
import { Writable } from 'node:stream';
import Fastify from 'fastify';
import t from 'tap';
import { loggerOptions, requestLogger } from '../../src/lib/logging.ts';

function logger(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  // Fastify's logger, as the app builds it (pino with our options).
  const parent = Fastify({ logger: { ...loggerOptions(level), stream } }).log;
  return { parent: parent as Parameters<typeof requestLogger>[0], lines };
}

t.test('at warn: nothing below it is written, a warning carries the bindings', async (t) => {
  const { parent, lines } = logger('warn');
  const log = requestLogger(parent, { reqId: 'req_1', traceId: 'abc' });
  log.info('incoming request');
  log.debug('detail');
  t.same(lines, [], 'info and debug are no-ops');
  log.warn({ authorization: 'Bearer svc_live_secret' }, 'backing service unavailable');
  log.error(new Error('boom'), 'request failed');
  t.equal(lines.length, 2);
  t.match(lines[0], {
    level: 40,
    reqId: 'req_1',
    traceId: 'abc',
    msg: 'backing service unavailable',
  });
  t.notMatch(JSON.stringify(lines[0]), /svc_live_secret/, 'still redacted');
  t.match(lines[1], { level: 50, reqId: 'req_1', err: { message: 'boom' } });
  t.same(log.bindings(), { reqId: 'req_1', traceId: 'abc' });
  log.child({ component: 'x' }).error('from a child');
  t.match(lines[2], { reqId: 'req_1', component: 'x', msg: 'from a child' });
  t.equal(log.level, 'warn');
  t.ok(log.isLevelEnabled('warn') && !log.isLevelEnabled('info'));
});

t.test('two requests keep their own bindings', async (t) => {
  const { parent, lines } = logger('warn');
  requestLogger(parent, { reqId: 'req_a' }).warn('a');
  requestLogger(parent, { reqId: 'req_b' }).warn('b');
  t.match(lines, [
    { reqId: 'req_a', msg: 'a' },
    { reqId: 'req_b', msg: 'b' },
  ]);
});

t.test('at info and below: a plain pino child', async (t) => {
  const { parent, lines } = logger('info');
  const log = requestLogger(parent, { reqId: 'req_2' });
  t.equal(Object.getPrototypeOf(log), parent, "pino's child");
  log.info('incoming request');
  t.match(lines, [{ reqId: 'req_2', msg: 'incoming request' }]);
});
