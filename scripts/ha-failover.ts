/**
 * A failover run under load (issue #60 items 4 and 7): an API process whose DATABASE_URL is
 * HAProxy's primary port and DATABASE_REPLICA_URL its replica port (scripts/ha-cluster.ts), and
 * against it, while faults hit the cluster one after the other:
 *
 * - `writers` loops creating listings, each with an Idempotency-Key of its own, the same key
 *   sent again after a 5xx or a network error until the write is acknowledged;
 * - `readers` anonymous loops reading the feed (the replica's traffic);
 * - one long poll, GET /api/v1/events?type=listing.created&wait=..., with the writers' key;
 * - before each fault a fresh key in use (GET /api/v1/me) by a prober, revoked (from this
 *   process, through the services) right after the fault.
 *
 * Faults: `kill` (kill -9 of the primary's postmaster: Patroni fails over) and `switchover`
 * (patronictl switchover). Measured (FailoverReport): per fault the outage window for writes
 * (the fault to the first 2xx write after writes started failing) and the time to a healthy
 * cluster; over the run the status counts, the longest any request waited (long polls apart),
 * acknowledged writes missing on the primary afterwards, Idempotency-Keys with more than one
 * listing, the time until the long poll had seen every acknowledged listing's event, and any
 * request with a revoked key answered 2xx after its revocation had committed.
 *
 * Used by `npm run bench:failover` (bench/src/failover.ts) and the CI leg
 * (test/hardening/failover.ci.ts).
 */
import postgres from 'postgres';
import { openDatabase } from '../src/db/client.ts';
import { createServices } from '../src/services.ts';
import type { HaCluster } from './ha-cluster.ts';

export type Fault = 'kill' | 'switchover';

export interface FailoverOptions {
  cluster: HaCluster;
  /** The API's origin (http://127.0.0.1:PORT). */
  origin: string;
  faults: Fault[];
  writers?: number;
  readers?: number;
  /** Load before the first fault and after each recovery (ms). */
  steadyMs?: number;
  /** The long poll's `wait` (s). */
  waitSeconds?: number;
  log?: (line: string) => void;
}

type Kind = 'write' | 'read' | 'poll' | 'revoked';

interface Outcome {
  kind: Kind;
  status: number; // 0: no HTTP answer
  startedAt: number;
  endedAt: number;
  code?: string | undefined;
  retryAfter: string | null;
  /** The key a `revoked` request was sent with. */
  credential?: string;
}

export interface FaultReport {
  fault: Fault;
  /** When, in ms into the run. */
  at: number;
  /** The primary before and after. */
  from: string;
  to: string | null;
  /** The fault to the first 2xx write after writes started failing (0: none failed). */
  writeOutageMs: number;
  /**
   * The first failed write's sending to the first 2xx write after it: the outage as a client saw
   * it (a switchover's primary takes writes for a few seconds after it was asked).
   */
  clientOutageMs: number;
  /** Writes that failed (non-2xx or no answer) after the fault, before the first 2xx. */
  failedWrites: number;
  /** The fault to a cluster with a leader, a synchronous standby and HAProxy routing again. */
  healthyAfterMs: number;
  /** The fault to the revocation's commit (it is retried while no primary answers). */
  revokedAfterMs: number;
  /**
   * Writes and reads that failed (5xx or no answer), sent after the new primary served its first
   * write (the first 2xx write sent after Patroni named the new leader) and before the next fault
   * or the end of the load: 0 when the recovery holds.
   */
  failedAfterRecovery: number;
}

export interface FailoverReport {
  faults: FaultReport[];
  /** Status -> count, per kind of request (0: no HTTP answer). */
  statuses: Record<Kind, Record<string, number>>;
  /** Responses 5xx other than 503, and requests with no HTTP answer. */
  unexpected: number;
  /** The longest any write, read or revoked-key request waited for its answer (ms). */
  longestWaitMs: number;
  /** The five slowest of those: kind, status, ms waited, ms into the run it was sent. */
  slowest: { kind: Kind; status: number; ms: number; sentAt: number }[];
  /** Writes and reads answered 503 without Retry-After. */
  withoutRetryAfter: number;
  acknowledged: number;
  /** Acknowledged listings not found on the primary at the end. */
  lost: number;
  /** Idempotency-Keys with more than one listing. */
  duplicates: number;
  /** The longest from a write's acknowledgement to its event in the long poll (ms). */
  longestEventMs: number;
  /** Acknowledged listings whose listing.created the long poll never answered with. */
  eventsMissing: number;
  /** From the end of the load to the long poll having seen every acknowledged listing (ms). */
  eventsDrainedMs: number;
  /** Events the long poll answered twice. */
  eventsRepeated: number;
  /**
   * The first missing events: created_at (null: no such event), when the write was acknowledged
   * and the long poll's page whose cursor passed the event (ms into the run).
   */
  missed: {
    createdAt: string | null;
    acknowledgedAt: number;
    passedBy: { from: string; to: string; at: number } | null;
  }[];
  /** Requests with a revoked key answered 2xx, sent after the revocation had committed. */
  revokedAccepted: number;
  durationMs: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Until `check` holds (polled every `everyMs`), or throws naming `what` after `timeoutMs`. */
async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await sleep(25);
  }
}

export async function runFailover(options: FailoverOptions): Promise<FailoverReport> {
  const { cluster, origin } = options;
  const log = options.log ?? ((line: string) => process.stderr.write(`[failover] ${line}\n`));
  const writers = options.writers ?? 8;
  const readers = options.readers ?? 2;
  const steadyMs = options.steadyMs ?? 3000;
  const waitSeconds = options.waitSeconds ?? 10;
  const startedAt = Date.now();
  // The accounts, and the revocations, through the services over HAProxy's primary port: another
  // process than the API's, as an operator's would be.
  const handle = await openDatabase({
    databaseUrl: cluster.primaryUrl,
    pgliteDir: '',
    poolSize: 2,
  });
  const services = createServices(handle.db);
  const username = `failover_${startedAt.toString(36)}`;
  const user = await services.users.create({
    username,
    password: 'failover-password-not-secret',
    email: `${username}@example.com`,
  });
  const app = await services.apps.create({ ownerUsername: user.username, name: `${username} app` });
  const { key } = await services.keys.create({ appId: app.id, env: 'sandbox' });

  const outcomes: Outcome[] = [];
  /** Idempotency-Key -> the listing id acknowledged, and when. */
  const acknowledged = new Map<string, { id: string; at: number }>();
  /** event id -> how often the long poll answered with it. */
  const answered = new Map<string, number>();
  /** listing id -> how often the long poll answered with its listing.created, and first when. */
  const seen = new Map<string, { count: number; at: number }>();
  let running = true;
  /**
   * The long poll goes on after the load until it is told to stop: once it has seen every
   * acknowledged listing (or that wait ran out), its wait in flight is aborted and not counted.
   * (It used to stop by itself once nothing was pending after the load: the writers' last
   * acknowledgements, recorded after that check, were then never polled for.)
   */
  let polling = true;
  const stopPolling = new AbortController();

  async function call(
    kind: Kind,
    path: string,
    init: RequestInit,
    timeoutMs = 30_000,
    credential?: string,
  ) {
    const begun = Date.now();
    const signals = [AbortSignal.timeout(timeoutMs)];
    if (kind === 'poll') signals.push(stopPolling.signal);
    try {
      const res = await fetch(origin + path, { ...init, signal: AbortSignal.any(signals) });
      const text = await res.text();
      const body = (text ? JSON.parse(text) : {}) as Record<string, any>;
      outcomes.push({
        kind,
        status: res.status,
        startedAt: begun,
        endedAt: Date.now(),
        code: body.error?.code,
        retryAfter: res.headers.get('retry-after'),
        credential,
      });
      return { status: res.status, body };
    } catch {
      // A long poll ended by the run, not by the server.
      if (kind === 'poll' && stopPolling.signal.aborted) return { status: 0, body: {} };
      outcomes.push({
        kind,
        status: 0,
        startedAt: begun,
        endedAt: Date.now(),
        retryAfter: null,
        credential,
      });
      return { status: 0, body: {} as Record<string, any> };
    }
  }

  const writer = async (w: number) => {
    for (let i = 0; running; i += 1) {
      const idempotencyKey = `${username}-w${w}-${i}`;
      for (;;) {
        const { status, body } = await call('write', '/api/v1/listings', {
          method: 'POST',
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            'idempotency-key': idempotencyKey,
          },
          body: JSON.stringify({ title: `Failover ${idempotencyKey}`, price_cents: 1000 + i }),
        });
        if ((status === 200 || status === 201) && body.data?.id) {
          acknowledged.set(idempotencyKey, { id: body.data.id as string, at: Date.now() });
          break;
        }
        // A 4xx is not retried (none is expected: counted and reported).
        if (status >= 400 && status < 500) break;
        if (!running) break;
        await sleep(50);
      }
    }
  };
  const reader = async () => {
    while (running) {
      const { status } = await call('read', '/api/v1/listings?limit=5', {});
      if (status !== 200) await sleep(50);
    }
  };
  let cursor: string | undefined;
  /** The long poll's pages that moved its cursor: from, to, and when answered (Date.now()). */
  const pages: { from: string; to: string; at: number }[] = [];
  const poller = async () => {
    // Without a cursor the first wait starts from now: the first one is sent before any write.
    cursor = new Date(startedAt - 1000).toISOString();
    while (polling) {
      const query = new URLSearchParams({
        type: 'listing.created',
        wait: String(waitSeconds),
        limit: '100',
        cursor: cursor!,
      });
      const { status, body } = await call(
        'poll',
        `/api/v1/events?${query}`,
        { headers: { authorization: `Bearer ${key}` } },
        (waitSeconds + 30) * 1000,
      );
      if (status !== 200) {
        await sleep(100);
        continue;
      }
      for (const event of body.data as { event_id: string; data: { listing: { id: string } } }[]) {
        const id = event.data.listing.id;
        const entry = seen.get(id);
        if (entry) entry.count += 1;
        else seen.set(id, { count: 1, at: Date.now() });
        answered.set(event.event_id, (answered.get(event.event_id) ?? 0) + 1);
      }
      if (body.meta.next_cursor !== cursor)
        pages.push({ from: cursor!, to: body.meta.next_cursor as string, at: Date.now() });
      cursor = body.meta.next_cursor as string;
    }
  };
  const ids = () => new Set([...acknowledged.values()].map((a) => a.id));
  const pendingEvents = () => [...ids()].filter((id) => !seen.has(id)).length;

  /** A key in use before the fault (so held by the API's credential cache), revoked after it. */
  const revocations: { key: string; revokedAt: number | null }[] = [];
  const prober = async () => {
    while (running) {
      for (const r of revocations)
        await call(
          'revoked',
          '/api/v1/me',
          { headers: { authorization: `Bearer ${r.key}` } },
          30_000,
          r.key,
        );
      await sleep(20);
    }
  };

  const loops = [
    ...Array.from({ length: writers }, (_, w) => writer(w)),
    ...Array.from({ length: readers }, () => reader()),
    prober(),
  ];
  const poll = poller();
  const faults: FaultReport[] = [];
  /** Per fault, when the first 2xx write after it ended (Date.now()). */
  const recoveredAt: number[] = [];
  const okWrites = (after: number) =>
    outcomes.filter((o) => o.kind === 'write' && o.startedAt >= after && o.status < 300).length;
  try {
    await sleep(steadyMs);
    for (const fault of options.faults) {
      await cluster.waitHealthy(60_000);
      const steady = Date.now();
      await until('writes acknowledged before the fault', () => okWrites(steady) >= 20, 30_000);
      const victim = await services.keys.create({ appId: app.id, env: 'sandbox' });
      const revocation = { key: victim.key, revokedAt: null as number | null };
      revocations.push(revocation);
      await until(
        'the key to be in use',
        () =>
          outcomes.some((o) => o.kind === 'revoked' && o.status === 200 && o.startedAt >= steady),
        10_000,
      );
      const from = (await cluster.leader())!;
      let at: number;
      let to: string | null = null;
      let switched: Promise<unknown> = Promise.resolve();
      if (fault === 'kill') at = (await cluster.killPrimary()).at;
      else {
        // patronictl returns once the switchover is done: the fault began when it was asked.
        switched = cluster.switchover().then((done) => (to = done.to));
        at = Date.now();
      }
      // When Patroni first names another member the running leader: from then on a write that
      // succeeds was served by the new primary (the old one is gone or demoted, and the pool
      // refuses a standby), so a request failing after that write is a failure of the recovery.
      let newLeaderAt = Infinity;
      const promoted = (async () => {
        for (;;) {
          const leader = await cluster.leader().catch(() => null);
          if (leader && leader !== from) return void (newLeaderAt = Date.now());
          await sleep(50);
        }
      })();
      const failed = (o: Outcome) => o.kind === 'write' && o.startedAt >= at && o.status >= 500;
      // Revoked within the failover: once writes fail (the old primary is gone, or demoted), and
      // retried until the new primary takes it. A switchover that never cuts writes gets it
      // when patronictl returns.
      await Promise.race([until('writes to fail', () => outcomes.some(failed), 60_000), switched]);
      for (;;) {
        try {
          await services.keys.revoke(victim.id);
          revocation.revokedAt = Date.now();
          break;
        } catch {
          await sleep(100);
        }
      }
      await switched;
      await cluster.waitHealthy(60_000);
      const healthyAt = Date.now();
      await promoted;
      to = (await cluster.leader()) ?? to;
      await until('a write acknowledged after the fault', () => okWrites(at) > 0, 60_000);
      const writes = outcomes
        .filter((o) => o.kind === 'write' && o.endedAt > at)
        .sort((a, b) => a.endedAt - b.endedAt);
      const firstFailure = writes.find((o) => o.status === 0 || o.status >= 500);
      const firstOk = firstFailure
        ? writes.find((o) => o.status < 300 && o.endedAt > firstFailure.endedAt)
        : undefined;
      const firstFailedSent = Math.min(
        ...writes.filter((o) => o.status === 0 || o.status >= 500).map((o) => o.startedAt),
      );
      const report: FaultReport = {
        fault,
        at: at - startedAt,
        from,
        to,
        writeOutageMs: firstOk ? firstOk.endedAt - at : 0,
        clientOutageMs: firstOk ? firstOk.endedAt - firstFailedSent : 0,
        failedWrites: writes.filter(
          (o) => (o.status === 0 || o.status >= 500) && (!firstOk || o.endedAt <= firstOk.endedAt),
        ).length,
        healthyAfterMs: healthyAt - at,
        revokedAfterMs: revocation.revokedAt! - at,
        failedAfterRecovery: 0,
      };
      const servedByNew = writes.find((o) => o.status < 300 && o.startedAt >= newLeaderAt);
      recoveredAt.push(servedByNew?.endedAt ?? Infinity);
      faults.push(report);
      log(
        `${fault} ${from} -> ${to}: writes out ${report.writeOutageMs} ms after the fault, ` +
          `${report.clientOutageMs} ms from the first failure (${report.failedWrites} failed), ` +
          `healthy after ${report.healthyAfterMs} ms, key revoked after ${report.revokedAfterMs} ms`,
      );
      await sleep(steadyMs);
    }
  } catch (err) {
    polling = false;
    stopPolling.abort();
    throw err;
  } finally {
    running = false;
    await Promise.all(loops);
  }
  const loadEndedAt = Date.now();
  for (const [i, fault] of faults.entries()) {
    const end = i + 1 < faults.length ? faults[i + 1]!.at + startedAt : loadEndedAt;
    fault.failedAfterRecovery = outcomes.filter(
      (o) =>
        (o.kind === 'write' || o.kind === 'read') &&
        o.startedAt > recoveredAt[i]! &&
        o.startedAt < end &&
        (o.status === 0 || o.status >= 500),
    ).length;
  }
  await until(
    'the long poll to see every acknowledged listing',
    () => pendingEvents() === 0,
    60_000,
  ).catch((err: Error) => log(err.message));
  const eventsDrainedMs = Date.now() - loadEndedAt;
  polling = false;
  stopPolling.abort();
  await poll;

  // What the primary holds now, read directly through HAProxy's primary port.
  const sql = postgres(cluster.primaryUrl, { max: 1, onnotice: () => {} });
  let lost = 0;
  let duplicates = 0;
  const missed: FailoverReport['missed'] = [];
  try {
    const all = [...ids()];
    const [found] = await sql<{ n: number }[]>`
      select count(*)::int as n from listings where id = any(${all}::uuid[])`;
    lost = all.length - found!.n;
    const [dup] = await sql<{ n: number }[]>`
      select count(*)::int as n from (
        select external_id from listings where external_id like ${`${username}-%`}
        group by seller_id, external_id having count(*) > 1) d`;
    duplicates = dup!.n;
    // Each event the long poll never answered with: its created_at, when its write was
    // acknowledged, and the page whose cursor passed it (answered when, ms into the run).
    const unseen = [...acknowledged.values()].filter((a) => !seen.has(a.id)).slice(0, 10);
    for (const a of unseen) {
      const [row] = await sql<{ created_at: string }[]>`
        select to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at
        from webhook_events
        where type = 'listing.created' and data::jsonb->'listing'->>'id' = ${a.id}`;
      const at = row?.created_at;
      const passed = at ? pages.find((p) => p.from < at && p.to >= at) : undefined;
      missed.push({
        createdAt: at ?? null,
        acknowledgedAt: a.at - startedAt,
        passedBy: passed ? { ...passed, at: passed.at - startedAt } : null,
      });
    }
  } finally {
    await sql.end({ timeout: 5 });
    await handle.close();
  }

  const statuses: FailoverReport['statuses'] = { write: {}, read: {}, poll: {}, revoked: {} };
  for (const o of outcomes) statuses[o.kind][o.status] = (statuses[o.kind][o.status] ?? 0) + 1;
  const timed = outcomes.filter((o) => o.kind !== 'poll');
  const revokedAccepted = outcomes.filter((o) => {
    if (o.kind !== 'revoked' || o.status >= 300) return false;
    const r = revocations.find((v) => v.key === o.credential);
    return r?.revokedAt != null && o.startedAt > r.revokedAt;
  }).length;
  const eventLags = [...acknowledged.values()].flatMap((a) => {
    const s = seen.get(a.id);
    return s ? [Math.max(0, s.at - a.at)] : [];
  });
  const report: FailoverReport = {
    faults,
    statuses,
    unexpected: outcomes.filter((o) => o.status === 0 || (o.status >= 500 && o.status !== 503))
      .length,
    longestWaitMs: Math.max(0, ...timed.map((o) => o.endedAt - o.startedAt)),
    slowest: timed
      .map((o) => ({
        kind: o.kind,
        status: o.status,
        ms: o.endedAt - o.startedAt,
        sentAt: o.startedAt - startedAt,
      }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 5),
    withoutRetryAfter: outcomes.filter((o) => o.status === 503 && o.retryAfter === null).length,
    acknowledged: acknowledged.size,
    lost,
    duplicates,
    longestEventMs: Math.max(0, ...eventLags),
    eventsMissing: pendingEvents(),
    eventsDrainedMs,
    eventsRepeated: [...answered.values()].filter((n) => n > 1).length,
    missed,
    revokedAccepted,
    durationMs: Date.now() - startedAt,
  };
  log(`load ended ${loadEndedAt - startedAt} ms into the run; ${JSON.stringify(report)}`);
  return report;
}
