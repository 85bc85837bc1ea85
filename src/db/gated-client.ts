/**
 * What Drizzle's postgres-js driver is given as its client: the part of a postgres.js client it
 * uses, each member passing to postgres.js's documented method of the same name, after the pool's
 * gate (pool-gate.ts) and with the pool's counters kept.
 *
 * drizzle-orm's postgres-js driver (0.45) uses exactly `options` (it sets the parsers and
 * serializers of date, time and JSON types), `unsafe(text, params, { prepare })` (awaited, or
 * read through `.values()`), `begin` (db.transaction) and, on a transaction's client, `savepoint`
 * (a nested db.transaction). This class has those and nothing else: should a later Drizzle use
 * another member, every statement fails with a TypeError in the first test that runs one (the
 * suite runs each of these ways against the gate: test/db/pool-wait.test.ts), instead of going past
 * the gate unseen as a pass-through would let it.
 */
import type { PendingQuery, Row, Sql, TransactionSql } from 'postgres';
import { requestScope } from '../lib/request-scope.ts';
import { DatabaseDownError, Passage, type ConnectionGate, type PoolCounters } from './pool-gate.ts';

/**
 * Drizzle runs every query through postgres.js with `prepare: false` (only named queries are
 * prepared), so each statement with parameters costs two round trips (Parse/Describe, then
 * Bind/Execute) and a fresh parse and plan on the server, where planning the feed query takes
 * as long as running it. Prepared (postgres.js's own default), a statement is parsed and
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
 * Drizzle's client over a postgres.js client (the pool, the request log's connection, a
 * replica's pool), typed as the client Drizzle's `drizzle({ client })` asks for. `gate` is
 * the pool's; undefined for a single connection.
 */
export function drizzleClient(
  client: Sql,
  stats: PoolCounters,
  gate: ConnectionGate | undefined,
): Sql {
  return new GatedClient(client, stats, gate) as unknown as Sql;
}

class GatedClient {
  constructor(
    private readonly client: Sql,
    private readonly stats: PoolCounters,
    private readonly gate: ConnectionGate | undefined,
  ) {}

  get options(): Sql['options'] {
    return this.client.options;
  }

  unsafe(query: string, args?: unknown[], options?: { prepare?: boolean }): GatedStatement {
    return statement(this.client, query, args, options, this.stats, this.gate);
  }

  /**
   * A transaction (Drizzle's db.transaction): one pass through the gate, counted busy once;
   * its statements run on the connection it holds until it ends. Its BEGIN answered is the
   * server's word for the gate; a transaction given up on before that (the pool down) never
   * runs its callback: it rolls back at once if its connection comes later.
   */
  async begin<T>(callback: (sql: TransactionClient) => Promise<T>): Promise<T> {
    const { gate, stats } = this;
    if (!gate)
      return this.client.begin((sql) => callback(new TransactionClient(sql, stats))) as Promise<T>;
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
          return callback(new TransactionClient(sql, stats));
        }) as Promise<T>,
      () => {
        stats.busy -= 1;
        gate.release(true);
      },
    );
  }
}

/** A transaction's client: its statements (errors counted) and savepoints (nested transactions). */
class TransactionClient {
  constructor(
    private readonly client: TransactionSql,
    private readonly stats: PoolCounters,
  ) {}

  unsafe(query: string, args?: unknown[], options?: { prepare?: boolean }): GatedStatement {
    return statement(this.client, query, args, options, this.stats, undefined);
  }

  savepoint<T>(callback: (sql: TransactionClient) => Promise<T>): Promise<T> {
    return this.client.savepoint((sql) =>
      callback(new TransactionClient(sql, this.stats)),
    ) as Promise<T>;
  }
}

function statement(
  client: Pick<Sql, 'unsafe'>,
  query: string,
  args: unknown[] | undefined,
  options: { prepare?: boolean } | undefined,
  stats: PoolCounters,
  gate: ConnectionGate | undefined,
): GatedStatement {
  const send = () =>
    client.unsafe<Row[]>(query, args as never[], {
      ...options,
      prepare: !query.startsWith(PLANNED_PER_RUN),
    });
  return new GatedStatement(send, stats, gate);
}

/**
 * A statement as Drizzle gets it from `unsafe`: awaited (rows as objects) or through
 * `.values()` (rows as arrays), the two ways Drizzle's postgres-js session reads a statement.
 * It is counted in `stats` when awaited: busy from then until answered (when it takes a pool
 * connection of its own), and its error. On the pool it is handed to postgres.js (the
 * documented `unsafe`, which sends a statement once awaited) only once the gate lets it
 * through; refused, it fails with the gate's PoolTimeoutError, never having been sent.
 */
class GatedStatement implements PromiseLike<unknown> {
  /** Sent once, however often it is awaited (as a postgres.js query is). */
  private running: Promise<unknown> | undefined;

  constructor(
    private readonly send: () => PendingQuery<Row[]>,
    private readonly stats: PoolCounters,
    private readonly gate: ConnectionGate | undefined,
  ) {}

  values(): Promise<unknown> {
    this.running ??= this.run((query) => query.values());
    return this.running;
  }

  then<A = unknown, B = never>(
    onFulfilled?: ((value: unknown) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    this.running ??= this.run((query) => query);
    return this.running.then(onFulfilled, onRejected);
  }

  private async run(read: (query: PendingQuery<Row[]>) => PromiseLike<unknown>): Promise<unknown> {
    const { stats, gate } = this;
    if (!gate) return this.answer(read);
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
    return answered(
      gate,
      passage,
      () => this.answer(read),
      () => {
        stats.busy -= 1;
        gate.release(false);
      },
    );
  }

  private async answer(read: (query: PendingQuery<Row[]>) => PromiseLike<unknown>) {
    try {
      return await read(this.send());
    } catch (err) {
      this.stats.errors += 1;
      throw err;
    }
  }
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
