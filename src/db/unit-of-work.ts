/**
 * One unit of work: a change of several statements, from several repositories, and what must be
 * written with it (its audit entry, src/audit/audit-service.ts `audited`) commit together or not
 * at all. `UnitOfWork.run(work)` opens one transaction and runs `work` in it: every statement of
 * `UnitOfWork.db` (the `Db` createServices gives each repository) made while `work` runs goes to
 * that transaction, and a service's own `db.transaction` inside it becomes a savepoint
 * (docs/architecture.md, "The database"). Outside a unit, `UnitOfWork.db` is the database itself,
 * as before.
 *
 * What must follow the commit (forgetting held credentials, src/apps/key-cache.ts) is given to
 * `afterCommit`: run once the unit committed, never if it rolled back, at once outside a unit.
 * Anything slow or external (a webhook URL's DNS, a check ping) belongs before the unit, never in
 * it: a unit holds a connection of the pool for as long as its work takes.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Db } from './database.ts';

interface Unit {
  root: Db;
  tx: Db;
  /** Until the transaction ends: a promise begun in it and settled later sees the database. */
  open: boolean;
  committed: (() => void)[];
}

const units = new AsyncLocalStorage<Unit>();

export class UnitOfWork {
  /** The database, or inside a unit of work on it, the unit's transaction. */
  readonly db: Db;

  constructor(private readonly root: Db) {
    this.db = new Proxy(root, {
      get(target, property) {
        const unit = units.getStore();
        const db = unit?.open && unit.root === target ? unit.tx : target;
        const value: unknown = Reflect.get(db, property, db);
        return typeof value === 'function' ? (value as () => unknown).bind(db) : value;
      },
    });
  }

  /** Runs `work` in one transaction; inside a unit already, as part of it. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    const outer = units.getStore();
    if (outer?.open && outer.root === this.root) return work();
    const unit: Unit = { root: this.root, tx: this.root, open: false, committed: [] };
    let value: T;
    try {
      value = await this.root.transaction((tx) => {
        unit.tx = tx;
        unit.open = true;
        return units.run(unit, work);
      });
    } finally {
      unit.open = false;
    }
    for (const then of unit.committed) then();
    return value;
  }
}

/** Runs `then` once the unit of work running now commits (never if it rolls back), or now. */
export function afterCommit(then: () => void): void {
  const unit = units.getStore();
  if (unit?.open) unit.committed.push(then);
  else then();
}
