/**
 * The background delivery worker (docs/webhooks.md, "Deliveries"). It polls the outbox, claims due
 * attempts with FOR UPDATE SKIP LOCKED in one short statement (so any number of server
 * processes can run it on one PostgreSQL without sending an attempt twice), sends them outside
 * any transaction, and records each outcome: success, a retry on WEBHOOK_RETRY_SCHEDULE (with a
 * little jitter) or, after the last one, failure; 410 disables the endpoint. Everything lives in
 * the database, so a restart loses nothing: an attempt whose process died is claimed again once
 * its lease expires (at-least-once, same delivery id).
 */
import type { FastifyBaseLogger } from 'fastify';
import type { ClaimedDelivery, DeliveriesRepository } from './deliveries-repository.ts';
import type { EventsRepository } from './events-repository.ts';
import { attemptOutcome, sendWebhook, type AttemptOutcome, type AttemptResult } from './sender.ts';
import { webhookBody, webhookHeaders } from './signing.ts';
import type { Resolver } from './ssrf.ts';

export interface WorkerOptions {
  timeoutMs: number;
  /** Seconds between attempts: attempt n+1 comes retryScheduleS[n-1] after attempt n fails. */
  retryScheduleS: readonly number[];
  allowPrivateNetworks: boolean;
  /** How often the outbox is polled when idle. */
  pollIntervalMs?: number;
  /** Attempts sent at the same time by this worker. */
  concurrency?: number;
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

/** How often retention is applied (events older than 30 days). */
const PRUNE_EVERY_MS = 60 * 60 * 1000;

export class DeliveryWorker {
  private timer: NodeJS.Timeout | undefined;
  /** The pass (claim) under way, if any. Passes never overlap. */
  private passing: Promise<void> | undefined;
  /** Attempts being sent; a slow endpoint holds one slot, never the whole worker. */
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = true;
  private again = false;
  private lastPrune = 0;
  /** When passes started failing (the database is down), or null: the outage is logged once. */
  private failingSince: number | null = null;
  private readonly pollIntervalMs: number;
  private readonly concurrency: number;
  /** A claim outlives the attempt: if the process dies, another worker takes over after it. */
  private readonly leaseMs: number;

  constructor(
    private readonly deliveries: DeliveriesRepository,
    private readonly events: EventsRepository,
    private readonly options: WorkerOptions,
  ) {
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.concurrency = options.concurrency ?? 10;
    this.leaseMs = options.timeoutMs + 60_000;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0);
  }

  /** Something may be due: look now instead of at the next poll. */
  nudge(): void {
    if (this.stopped) return;
    if (this.passing) this.again = true;
    else this.schedule(0);
  }

  /** Stops claiming; resolves once the attempts in flight are sent and their outcomes recorded. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.passing;
    await Promise.allSettled([...this.inFlight]);
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.passing = this.pass().then((waitMs) => {
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
        const claims = await this.deliveries.claim(free, this.leaseMs);
        for (const claim of claims) this.track(this.attempt(claim));
      }
      if (Date.now() - this.lastPrune > PRUNE_EVERY_MS && !this.stopped) {
        this.lastPrune = Date.now();
        await this.events.prune();
      }
      // a finishing attempt nudges sooner
      if (this.inFlight.size >= this.concurrency) return this.recovered(this.pollIntervalMs);
      const dueInMs = await this.deliveries.nextDueInMs();
      return this.recovered(
        Math.min(this.pollIntervalMs, Math.max(MIN_WAIT_MS, dueInMs ?? Infinity)),
      );
    } catch (err) {
      // The database may be briefly unavailable; the next poll tries again. Logged when the
      // passes start failing and when they work again, not at every poll of the outage.
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

  /** A pass worked: ends a logged outage. Returns `waitMs`. */
  private recovered(waitMs: number): number {
    if (this.failingSince !== null) {
      this.options.log?.info(
        { event: 'webhook_worker_up', downForMs: Date.now() - this.failingSince },
        'webhook worker: passes work again',
      );
      this.failingSince = null;
    }
    return waitMs;
  }

  private track(attempt: Promise<void>): void {
    const tracked = attempt
      .catch((err: unknown) => {
        // Not recorded (database trouble): the claim's lease expires and the attempt is made again.
        this.options.log?.error({ err }, 'webhook outcome not recorded');
      })
      .finally(() => {
        this.inFlight.delete(tracked);
        this.nudge();
      });
    this.inFlight.add(tracked);
  }

  private async attempt(claim: ClaimedDelivery): Promise<void> {
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
      secrets: [claim.secret],
      timestamp: Math.floor(Date.now() / 1000),
    });
    let result: AttemptResult;
    try {
      result = await sendWebhook(claim.url, body, headers, this.options);
    } catch (err) {
      result = {
        kind: 'failure',
        responseCode: null,
        error: `internal error: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
    this.options.onAttempt?.(attemptOutcome(result));
    const outcome = { responseCode: result.responseCode, error: result.error };
    if (result.kind === 'success') await this.deliveries.succeed(claim, outcome);
    else if (result.kind === 'gone') await this.deliveries.gone(claim, outcome);
    else await this.deliveries.fail(claim, outcome, this.retryDelayMs(claim.attempts));
    // The attempt's log context: the trace of the request that recorded the event, if any.
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
   * After failed attempt n: the schedule's n-th delay with jitter, or null when it is exhausted.
   */
  retryDelayMs(attempt: number): number | null {
    const seconds = this.options.retryScheduleS[attempt - 1];
    if (seconds === undefined) return null;
    return seconds * 1000 * (1 + Math.random() * (this.options.jitter ?? 0.1));
  }
}
