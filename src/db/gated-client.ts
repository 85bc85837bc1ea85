/**
 * The database boundary (database.ts Connection) on PostgreSQL: every statement and transaction
 * through postgres.js's documented `unsafe`, `begin` and `savepoint`, after the pool's gate
 * (pool-gate.ts) and with the pool's counters kept. Drizzle never sees postgres.js: it runs
 * over this Connection (database.ts drizzleOn), so no statement can reach the pool another way.
 */
import type { Row, Sql, TransactionSql } from 'postgres';
import { requestScope } from '../lib/request-scope.ts';
import type { Connection } from './database.ts';
import { DatabaseDownError, Passage, type ConnectionGate, type PoolCounters } from './pool-gate.ts';

/**
 * Every statement is prepared (postgres.js's own default) where Drizzle's postgres-js driver
 * would send it unprepared: unprepared, each statement with parameters costs two round trips
 * (Parse/Describe, then Bind/Execute) and a fresh parse and plan on the server, where planning
 * the feed query takes as long as running it. Prepared, a statement is parsed and
 * planned once per connection and then runs in one round trip: `npm run bench` measures the
 * difference (docs/performance.md). Our statements are a bounded set of texts, so the
 * per-connection cache stays small; postgres.js forgets it on reconnect and re-prepares when
 * a migration invalidates a plan.
 *
 * Except statements whose text starts with PLANNED_PER_RUN: searches beyond the first shapes a
 * process prepares, or whose plan would depend on their values (src/listings/listings-search-
 * repository.ts, mayPrepare); a search's texts are too many shapes to keep all prepared.
 */
export const PLANNED_PER_RUN = '/* planned per run */ ';

/**
 * The pool's Connection (database.ts): `client` (the pool, a replica's pool, or one connection
 * of its own: the request log's writer) behind `gate`, the pool's counters kept in `stats`.
 * `gate` is undefined for a single connection, which nothing else queues on.
 */
export function gatedConnection(
  client: Sql,
  stats: PoolCounters,
  gate: ConnectionGate | undefined,
): Connection {
  return new PoolConnection(client, stats, gate);
}

class PoolConnection implements Connection {
  constructor(
    private readonly client: Sql,
    private readonly stats: PoolCounters,
    private readonly gate: ConnectionGate | undefined,
  ) {}

  query(text: string, params: unknown[], arrays: boolean): Promise<unknown[]> {
    return statement(this.client, text, params, arrays, this.stats, this.gate);
  }

  /**
   * A transaction: one pass through the gate, counted busy once; its statements run on the
   * connection it holds until it ends. Its BEGIN answered is the server's word for the gate; a
   * transaction given up on before that (the pool down) never runs its work: it rolls back at
   * once if its connection comes later.
   */
  async transaction<T>(work: (tx: Connection) => Promise<T>): Promise<T> {
    const { gate, stats } = this;
    if (!gate)
      return this.client.begin((sql) => work(new TransactionConnection(sql, stats))) as Promise<T>;
    stats.busy += 1;
    const passage = new Passage(gate, requestScope());
    try {
      await gate.acquire(true, passage.budgetMs);
    } catch (err) {
      stats.busy -= 1;
      passage.ended();
      throw err;
    }
    passage.granted();
    return answered(
      gate,
      passage,
      (begun) =>
        this.client.begin((sql) => {
          if (!begun()) throw new DatabaseDownError(0);
          return work(new TransactionConnection(sql, stats));
        }) as Promise<T>,
      () => {
        stats.busy -= 1;
        gate.release(true);
      },
    );
  }
}

/** A transaction's Connection: its statements (errors counted) and savepoints. */
class TransactionConnection implements Connection {
  constructor(
    private readonly client: TransactionSql,
    private readonly stats: PoolCounters,
  ) {}

  query(text: string, params: unknown[], arrays: boolean): Promise<unknown[]> {
    return statement(this.client, text, params, arrays, this.stats, undefined);
  }

  transaction<T>(work: (tx: Connection) => Promise<T>): Promise<T> {
    return this.client.savepoint((sql) =>
      work(new TransactionConnection(sql, this.stats)),
    ) as Promise<T>;
  }
}

/**
 * A statement, sent through postgres.js's documented `unsafe` (rows as objects, or through
 * `.values()` as arrays). It is counted in `stats`: busy from the gate's pass until answered,
 * and its error. On the pool it is handed to postgres.js only once the gate lets it through;
 * refused, it fails with the gate's PoolTimeoutError, never having been sent.
 */
async function statement(
  client: Pick<Sql, 'unsafe'>,
  text: string,
  params: unknown[],
  arrays: boolean,
  stats: PoolCounters,
  gate: ConnectionGate | undefined,
): Promise<unknown[]> {
  const send = async () => {
    try {
      const query = client.unsafe<Row[]>(text, params as never[], {
        prepare: !text.startsWith(PLANNED_PER_RUN),
      });
      return await (arrays ? query.values() : query);
    } catch (err) {
      stats.errors += 1;
      throw err;
    }
  };
  if (!gate) return send();
  stats.busy += 1;
  const passage = new Passage(gate, requestScope());
  // The common case, a free connection, sends without a turn of the event loop.
  if (gate.tryAcquire(false)) passage.granted(passage.askedAt);
  else {
    try {
      await gate.acquire(false, passage.budgetMs);
    } catch (err) {
      stats.busy -= 1;
      passage.ended();
      throw err;
    }
    passage.granted();
  }
  return answered(gate, passage, send, () => {
    stats.busy -= 1;
    gate.release(false);
  });
}

/**
 * `start`'s work, let through the gate, for its caller; what the driver says of it is the
 * server's word on the pool for the gate (ConnectionGate.outcome), heard at its end or, for a
 * transaction, when its BEGIN is answered (`begun`, which says whether its caller still waits).
 * While the pool is down the gate gives up on it once its request's part of
 * DATABASE_POOL_WAIT_MS has passed since it came to the gate (`passage`, which charges the
 * request what it waited once the caller has its answer), and at its cut whatever the pool's
 * state once an outage has touched it (Passage.cutAt): the caller gets DatabaseDownError (503)
 * then, and the driver's late answer is dropped. Its place at the gate is held until the driver
 * is done with it (`release`). No postgres.js cancel(): on a statement already sent it opens a
 * connection whose failure nobody can catch.
 */
function answered<T>(
  gate: ConnectionGate,
  passage: Passage,
  start: (begun: () => boolean) => Promise<T>,
  release: () => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let abandoned = false;
    let charged = false;
    const charge = () => {
      if (charged) return;
      charged = true;
      passage.ended();
    };
    const giveUp = (err: Error) => {
      abandoned = true;
      charge();
      reject(err);
    };
    const running = gate.track(passage.deadline, giveUp);
    // An outage touched it or its request: given up on at its cut whatever the pool's state; a
    // transaction only before its BEGIN is answered, never once its work runs.
    const cutAt = passage.cutAt();
    let cut: NodeJS.Timeout | undefined;
    if (cutAt !== undefined) {
      cut = setTimeout(
        () => {
          running.done();
          giveUp(new DatabaseDownError(passage.budgetMs));
        },
        Math.max(0, cutAt - performance.now()),
      );
      cut.unref();
    }
    const hear = (err?: unknown) => {
      clearTimeout(cut);
      running.done();
      if (!abandoned) gate.outcome(err);
    };
    start(() => {
      hear();
      return !abandoned;
    })
      .then(
        (value) => {
          hear();
          if (abandoned) return;
          charge();
          resolve(value);
        },
        (err: unknown) => {
          hear(err);
          if (abandoned) return;
          charge();
          reject(err);
        },
      )
      .finally(release);
  });
}
