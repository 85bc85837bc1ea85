/**
 * The background delivery worker (docs/webhooks.md, "Deliveries"). It polls the outbox, claims due
 * attempts with FOR UPDATE SKIP LOCKED in one short statement (so any number of server
 * processes can run it on one PostgreSQL without sending an attempt twice), sends them outside
 * any transaction, and records each outcome: success, a retry on WEBHOOK_RETRY_SCHEDULE (with a
 * little jitter) or, after the last one, failure; 410 disables the endpoint. Everything lives in
 * the database, so a restart loses nothing: an attempt whose process died is claimed again once
 * its lease expires (at-least-once, same delivery id).
 *
 * Fair to owners and endpoints (docs/operations.md, "Webhook delivery"): a process sends at most
 * `concurrency` attempts at once (WEBHOOK_CONCURRENCY) and at most `endpointConcurrency` to one
 * endpoint (WEBHOOK_ENDPOINT_CONCURRENCY); a claim takes turns between owners (developers), by
 * their attempts in flight, then between each owner's endpoints (DeliveriesRepository.claim), so
 * a slow endpoint holds its own slots, never everyone's, and a developer with many endpoints and
 * a backlog cannot keep another's first delivery waiting. Each endpoint's room adapts like a
 * congestion window: it starts at one attempt, grows by one with every answer under a second (up
 * to the cap) and halves on a slow answer, a timeout or a connection failure, so slow endpoints
 * hold one slot each and fast ones get the cap. Caps are per process: with N processes an
 * endpoint gets at most N x its cap.
 *
 * Throughput (docs/operations.md, sizing): one claim statement fills every free slot, successes
 * are written in batches, and a slot is free as soon as its answer is in.
 */
import type { FastifyBaseLogger } from 'fastify';
import { outsideRequestScope } from '../lib/request-scope.ts';
import type {
  ClaimedDelivery,
  ClaimFairness,
  DeliveriesRepository,
} from './deliveries-repository.ts';
import {
  AgentPool,
  attemptOutcome,
  sendWebhook,
  type AttemptOutcome,
  type AttemptResult,
} from './sender.ts';
import { webhookBody, webhookHeaders } from './signing.ts';
import type { Resolver } from './ssrf.ts';

export interface WorkerOptions {
  timeoutMs: number;
  /** Seconds between attempts: attempt n+1 comes retryScheduleS[n-1] after attempt n fails. */
  retryScheduleS: readonly number[];
  allowPrivateNetworks: boolean;
  /** How often the outbox is polled when idle. */
  pollIntervalMs?: number;
  /** Attempts sent at the same time by this worker (WEBHOOK_CONCURRENCY). */
  concurrency?: number;
  /** Attempts sent at the same time to one endpoint (WEBHOOK_ENDPOINT_CONCURRENCY). */
  endpointConcurrency?: number;
  resolver?: Resolver | undefined;
  /** Extra random delay on each retry, as a fraction of it (default 0.1: up to +10 %). */
  jitter?: number;
  log?: Pick<FastifyBaseLogger, 'error' | 'warn' | 'info' | 'debug'>;
  /** Told how every attempt ended (the operator's metrics, plugins/metrics.ts). */
  onAttempt?: (outcome: AttemptOutcome) => void;
}

/**
 * Shortest wait between passes when something is due but could not be claimed (another worker has
 * it).
 */
const MIN_WAIT_MS = 25;

/** An answer slower than this halves the endpoint's window; a faster one grows it. */
const SLOW_ANSWER_MS = 1000;

/** A window at 1 with nothing in flight is the default: forgotten after this long unused. */
const FORGET_AFTER_MS = 10 * 60 * 1000;

export class DeliveryWorker {
  private timer: NodeJS.Timeout | undefined;
  /** The pass (claim) under way, if any. Passes never overlap. */
  private passing: Promise<void> | undefined;
  /** Attempts being sent; a slow endpoint holds one slot, never the whole worker. */
  private readonly inFlight = new Set<Promise<void>>();
  /** Successes answered and being written (their slots are already free). */
  private readonly recording = new Set<Promise<void>>();
  /** Attempts in flight per endpoint id. */
  private readonly perEndpoint = new Map<string, number>();
  /** Attempts each endpoint may have in flight (1..endpointConcurrency); absent: 1. */
  private readonly windows = new Map<string, { size: number; usedAt: number }>();
  private readonly agents: AgentPool;
  /** Successes waiting to be written, and whether a batch is being written now. */
  private readonly successes: {
    item: { id: string; attempts: number; responseCode: number; durationMs: number };
    resolve: () => void;
    reject: (err: unknown) => void;
  }[] = [];
  private writingSuccesses = false;
  private stopped = true;
  /** Aborted by stop() when its attempts run past their share of the shutdown. */
  private shutdown = new AbortController();
  private again = false;
  /** When passes started failing (the database is down), or null: the outage is logged once. */
  private failingSince: number | null = null;
  /**
   * During an outage, when passes started working again, or null. The outage is over once they
   * have kept working for a poll interval: while PostgreSQL shuts down, a pass on a connection
   * not yet terminated can still work between two that fail.
   */
  private workingSince: number | null = null;
  private readonly pollIntervalMs: number;
  private readonly concurrency: number;
  private readonly endpointConcurrency: number;
  /** A claim outlives the attempt: if the process dies, another worker takes over after it. */
  private readonly leaseMs: number;

  constructor(
    private readonly deliveries: DeliveriesRepository,
    private readonly options: WorkerOptions,
  ) {
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.concurrency = options.concurrency ?? 32;
    this.endpointConcurrency = Math.min(options.endpointConcurrency ?? 4, this.concurrency);
    this.leaseMs = options.timeoutMs + 60_000;
    this.agents = new AgentPool({ idleSocketsPerAgent: this.endpointConcurrency });
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    if (this.shutdown.signal.aborted) this.shutdown = new AbortController();
    this.schedule(0);
  }

  /** Something may be due: look now instead of at the next poll. */
  nudge(): void {
    if (this.stopped) return;
    if (this.passing) this.again = true;
    else this.schedule(0);
  }

  /**
   * Stops claiming; resolves once the attempts in flight are sent and their outcomes recorded.
   * Attempts still waiting for their answer after `cutAfterMs` (graceful shutdown's share) end
   * at once as failures (retried on the schedule) and are recorded so.
   */
  async stop(cutAfterMs = Infinity): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    const cut =
      Number.isFinite(cutAfterMs) && setTimeout(() => this.shutdown.abort(), cutAfterMs).unref();
    try {
      await this.passing;
      await Promise.allSettled([...this.inFlight]);
    } finally {
      if (cut) clearTimeout(cut);
    }
    await Promise.allSettled([...this.recording]);
    this.agents.close();
  }

  /**
   * How many more attempts each endpoint may get now, and how many it has in flight, for the
   * endpoints this process knows (busy, or with a window above 1); any other endpoint has room
   * for one and none in flight.
   */
  private endpointRoom(): ClaimFairness['endpointRoom'] {
    const now = Date.now();
    for (const [id, window] of this.windows) {
      if (!this.perEndpoint.has(id) && now - window.usedAt > FORGET_AFTER_MS)
        this.windows.delete(id);
    }
    const ids = new Set([...this.perEndpoint.keys(), ...this.windows.keys()]);
    return [...ids].map((id) => {
      const inFlight = this.perEndpoint.get(id) ?? 0;
      return {
        endpoint_id: id,
        room: Math.max(0, (this.windows.get(id)?.size ?? 1) - inFlight),
        in_flight: inFlight,
      };
    });
  }

  /** Grows the endpoint's window after a quick answer, halves it after a slow one or none. */
  private adapt(endpointId: string, kind: AttemptOutcome, tookMs: number): void {
    const size = this.windows.get(endpointId)?.size ?? 1;
    const answered = kind !== 'timeout' && kind !== 'connection_error' && kind !== 'error';
    const next =
      answered && tookMs < SLOW_ANSWER_MS
        ? Math.min(this.endpointConcurrency, size + 1)
        : Math.max(1, Math.floor(size / 2));
    this.windows.set(endpointId, { size: next, usedAt: Date.now() });
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.passing = outsideRequestScope(() => this.pass()).then((waitMs) => {
        this.passing = undefined;
        if (!this.stopped) this.schedule(this.again ? 0 : waitMs);
        this.again = false;
      });
    }, delayMs);
    this.timer.unref();
  }

  /**
   * Claims as many due attempts as there are free slots and starts them (without waiting for
   * them); resolves with how long to wait before the next pass: until the earliest pending
   * attempt is due, at most the poll interval. A finished attempt frees a slot and nudges.
   */
  private async pass(): Promise<number> {
    this.again = false;
    try {
      const free = this.concurrency - this.inFlight.size;
      if (free > 0) {
        const claims = await this.deliveries.claim(free, this.leaseMs, {
          defaultRoom: 1,
          endpointRoom: this.endpointRoom(),
        });
        for (const claim of claims) this.track(claim.endpoint_id, this.attempt(claim));
      }
      // While attempts are in flight, each one that finishes nudges a new pass: no need to ask
      // when the next is due (nor to poll fast while endpoints at their window hold back their
      // due attempts). A retry falling due meanwhile waits at most the poll interval.
      if (this.inFlight.size > 0) return this.recovered(this.pollIntervalMs);
      const dueInMs = await this.deliveries.nextDueInMs();
      return this.recovered(
        Math.min(this.pollIntervalMs, Math.max(MIN_WAIT_MS, dueInMs ?? Infinity)),
      );
    } catch (err) {
      // The database may be briefly unavailable; the next poll tries again. Logged when the
      // passes start failing and when they work again, not at every poll of the outage.
      this.workingSince = null;
      if (this.failingSince === null) {
        this.failingSince = Date.now();
        this.options.log?.error(
          { event: 'webhook_worker_down', err },
          'webhook worker: passes fail (database unavailable?); retrying every poll',
        );
      }
      return this.pollIntervalMs;
    }
  }

  /**
   * A pass worked: ends a logged outage once passes have worked for a poll interval (a pass
   * that fails meanwhile continues the outage, without a second line). Returns `waitMs`.
   */
  private recovered(waitMs: number): number {
    if (this.failingSince === null) return waitMs;
    const now = Date.now();
    // The next pass comes within a poll interval (waitMs is at most one), so the outage is logged
    // as over about one interval after it ended.
    if (this.workingSince === null) {
      this.workingSince = now;
      return waitMs;
    }
    if (now - this.workingSince < this.pollIntervalMs) return waitMs;
    this.options.log?.info(
      { event: 'webhook_worker_up', downForMs: this.workingSince - this.failingSince },
      'webhook worker: passes work again',
    );
    this.failingSince = null;
    this.workingSince = null;
    return waitMs;
  }

  private track(endpointId: string, attempt: Promise<void>): void {
    this.perEndpoint.set(endpointId, (this.perEndpoint.get(endpointId) ?? 0) + 1);
    const tracked = attempt.catch(this.notRecorded).finally(() => {
      this.inFlight.delete(tracked);
      const left = (this.perEndpoint.get(endpointId) ?? 1) - 1;
      if (left > 0) this.perEndpoint.set(endpointId, left);
      else this.perEndpoint.delete(endpointId);
      this.nudge();
    });
    this.inFlight.add(tracked);
  }

  private async attempt(claim: ClaimedDelivery): Promise<void> {
    if (claim.withdrawn) {
      // The seller removed the app since the event was recorded: nothing goes out.
      await this.deliveries.withdraw(claim);
      this.options.log?.debug({ delivery: claim.id }, 'webhook delivery withdrawn');
      return;
    }
    const body = webhookBody({
      deliveryId: claim.id,
      eventId: claim.event_id,
      type: claim.type,
      createdAt: claim.event_created_at,
      // Compact JSON: data recorded inside a listing insert is PostgreSQL's json text (`"a" : 1`).
      data: JSON.stringify(JSON.parse(claim.data)),
    });
    const headers = webhookHeaders({
      deliveryId: claim.id,
      type: claim.type,
      body,
      // During a rotation's overlap the previous secret signs too, and first: X-Service-Signature
      // stays on it until the overlap ends (docs/webhooks.md, rotating the signing secret).
      secrets: claim.previous_secret ? [claim.previous_secret, claim.secret] : [claim.secret],
      timestamp: Math.floor(Date.now() / 1000),
    });
    const started = Date.now();
    let result: AttemptResult;
    try {
      result = await sendWebhook(claim.url, body, headers, {
        ...this.options,
        agents: this.agents,
        agentKey: claim.endpoint_id,
        signal: this.shutdown.signal,
      });
    } catch (err) {
      result = {
        kind: 'failure',
        responseCode: null,
        error: `internal error: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
    const kind = attemptOutcome(result);
    this.options.onAttempt?.(kind);
    const durationMs = Date.now() - started;
    this.adapt(claim.endpoint_id, kind, durationMs);
    const outcome = { responseCode: result.responseCode, error: result.error, durationMs };
    if (result.kind === 'success') {
      // The slot is free as soon as the answer is in: the success is written with the next batch
      // in the background, so the endpoint's next attempt does not wait for that statement.
      // Until it is written the delivery keeps its lease, so no worker claims it again.
      this.record(claim, result, this.succeeded(claim, result.responseCode, durationMs));
      return;
    }
    // A failure or a 410 changes the endpoint (its failure clock, or disables it): written
    // before the slot is freed, so the endpoint's next claim sees it.
    if (result.kind === 'gone') await this.deliveries.gone(claim, outcome);
    else await this.deliveries.fail(claim, outcome, this.retryDelayMs(claim.attempts));
    this.logAttempt(claim, result);
  }

  /** Tracks a success being written after its slot was freed (stop() waits for it). */
  private record(claim: ClaimedDelivery, result: AttemptResult, written: Promise<void>): void {
    const tracked = written
      .then(() => this.logAttempt(claim, result))
      .catch(this.notRecorded)
      .finally(() => this.recording.delete(tracked));
    this.recording.add(tracked);
  }

  /** Not recorded (database trouble): the claim's lease expires and the attempt is made again. */
  private readonly notRecorded = (err: unknown): void => {
    this.options.log?.error({ err }, 'webhook outcome not recorded');
  };

  /** The attempt's log context: the trace of the request that recorded the event, if any. */
  private logAttempt(claim: ClaimedDelivery, result: AttemptResult): void {
    if (result.kind === 'failure' && result.detail)
      this.options.log?.info({ delivery: claim.id, refused: result.detail }, 'webhook refused');
    this.options.log?.debug(
      {
        delivery: claim.id,
        attempt: claim.attempts,
        result: result.kind,
        code: result.responseCode,
        ...(claim.trace_id ? { traceId: claim.trace_id } : {}),
      },
      'webhook attempt',
    );
  }

  /**
   * Records a success in the next batch: the successes that finish while a batch is being
   * written go together in the following one (one statement each), so a busy worker writes
   * outcomes in batches and an idle one writes each at once. Resolves once it is written.
   */
  private succeeded(
    claim: ClaimedDelivery,
    responseCode: number,
    durationMs: number,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.successes.push({
        item: { id: claim.id, attempts: claim.attempts, responseCode, durationMs },
        resolve,
        reject,
      });
      if (!this.writingSuccesses) void this.writeSuccesses();
    });
  }

  private async writeSuccesses(): Promise<void> {
    this.writingSuccesses = true;
    try {
      while (this.successes.length > 0) {
        const batch = this.successes.splice(0, 200);
        try {
          await this.deliveries.succeedMany(batch.map((entry) => entry.item));
          for (const entry of batch) entry.resolve();
        } catch (err) {
          for (const entry of batch) entry.reject(err);
        }
      }
    } finally {
      this.writingSuccesses = false;
    }
  }

  /**
   * After failed attempt n: the schedule's n-th delay with jitter, or null when it is exhausted.
   */
  retryDelayMs(attempt: number): number | null {
    const seconds = this.options.retryScheduleS[attempt - 1];
    if (seconds === undefined) return null;
    return seconds * 1000 * (1 + Math.random() * (this.options.jitter ?? 0.1));
  }
}
