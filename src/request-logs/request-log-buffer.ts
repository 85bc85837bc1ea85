/**
 * The request log's buffer: requests are recorded in memory and written in batches, off the
 * request's path. Bounded: when `capacity` entries wait, new ones are dropped and counted per
 * app and environment (the counts are written with the next batch and shown in the portal). A
 * failed write is logged without its data and its entries counted as dropped: the log never
 * slows, fails or holds up a request.
 */
import type { FastifyBaseLogger } from 'fastify';
import { isDataException } from '../db/errors.ts';
import { storableText } from '../lib/redact.ts';
import { outsideRequestScope } from '../lib/request-scope.ts';
import {
  RollupNotWrittenError,
  type RequestLogEntry,
  type RequestLogsRepository,
} from './request-logs-repository.ts';
import { isLongPoll, rollUp } from './usage.ts';

export interface BufferOptions {
  /** Entries waiting at most (REQUEST_LOG_BUFFER). */
  capacity: number;
  /** Written at least this often while entries wait. */
  flushIntervalMs: number;
  /** Written at once when this many wait; also the largest statement. */
  batchSize: number;
  log?: FastifyBaseLogger | undefined;
  /** Counts each dropped entry (a metric). */
  onDrop?: ((count: number) => void) | undefined;
}

export class RequestLogBuffer {
  /**
   * Each entry as its JSON text, made when recorded: one short string per request lives until the
   * batch is written (less heap than the object, and nothing to serialize at write time), and
   * what the usage rollup sums (usage.ts).
   */
  private entries: {
    json: string;
    app_id: string;
    environment: string;
    created_at: string;
    status: number;
    latency_ms: number;
    long_poll: boolean;
  }[] = [];
  /** Dropped entries not yet written, by `${app_id} ${environment}`. */
  private dropped = new Map<string, number>();
  private flushing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private lastFailureLog = 0;

  constructor(
    private readonly repository: RequestLogsRepository,
    private readonly options: BufferOptions,
  ) {}

  /** Entries waiting to be written. */
  get size(): number {
    return this.entries.length;
  }

  /** Records one request; never throws, never waits. */
  record(entry: RequestLogEntry): void {
    if (this.entries.length >= this.options.capacity) {
      this.drop(entry.app_id, entry.environment, 1);
      return;
    }
    this.entries.push({
      // Every text as it can be stored: no client input can fail the batch (redact.ts).
      json: JSON.stringify(entry, (_name, value: unknown) =>
        typeof value === 'string' ? storableText(value) : value,
      ),
      app_id: entry.app_id,
      environment: entry.environment,
      created_at: entry.created_at,
      status: entry.status,
      latency_ms: entry.latency_ms,
      long_poll: isLongPoll(entry),
    });
    if (this.entries.length >= this.options.batchSize) this.schedule(0);
    else this.schedule(this.options.flushIntervalMs);
  }

  /** Writes everything recorded so far (and the drop counts); resolves when written. */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (this.flushing) await this.flushing;
    if (this.entries.length === 0 && this.dropped.size === 0) return;
    this.flushing = this.write().finally(() => (this.flushing = null));
    await this.flushing;
    if (this.entries.length > 0) await this.flush();
  }

  /** Stops the timer; what is recorded is written (graceful close). */
  async close(): Promise<void> {
    await this.flush();
  }

  private schedule(delayMs: number): void {
    if (this.timer && delayMs > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void outsideRequestScope(() => this.flush());
    }, delayMs);
    this.timer.unref();
  }

  private drop(appId: string, environment: string, count: number): void {
    const key = `${appId} ${environment}`;
    this.dropped.set(key, (this.dropped.get(key) ?? 0) + count);
    this.options.onDrop?.(count);
  }

  private async write(): Promise<void> {
    const batch = this.entries.splice(0, this.options.batchSize);
    const drops = [...this.dropped].map(([key, dropped]) => {
      const [app_id, environment] = key.split(' ') as [string, string];
      return { app_id, environment, dropped };
    });
    this.dropped = new Map();
    await this.insert(batch);
    try {
      await this.repository.addDrops(drops);
    } catch (err) {
      // Counted again next time.
      for (const d of drops) {
        const key = `${d.app_id} ${d.environment}`;
        this.dropped.set(key, (this.dropped.get(key) ?? 0) + d.dropped);
      }
      this.failed(err, 0);
    }
  }

  /**
   * The batch and its sums per app, environment, hour and outcome: one statement (two with the
   * log on a database of its own). A batch a value of failed (a data exception: every text is
   * made storable when recorded, so none is expected) is written again entry by entry, so that
   * one entry cannot take the others with it.
   */
  private async insert(batch: RequestLogBuffer['entries']): Promise<void> {
    try {
      await this.repository.insertMany(
        `[${batch.map((entry) => entry.json).join(',')}]`,
        JSON.stringify(rollUp(batch)),
      );
    } catch (err) {
      // Logged, only the chart misses them: not dropped from the log.
      if (err instanceof RollupNotWrittenError) this.failed(err.cause, 0);
      else if (batch.length > 1 && isDataException(err)) {
        for (const entry of batch) await this.insert([entry]);
      } else {
        for (const entry of batch) this.drop(entry.app_id, entry.environment, 1);
        this.failed(err, batch.length);
      }
    }
  }

  /** At most one log line a minute: a database outage must not flood the log. */
  private failed(err: unknown, entries: number): void {
    if (Date.now() - this.lastFailureLog < 60_000) return;
    this.lastFailureLog = Date.now();
    this.options.log?.warn(
      { err: err instanceof Error ? { message: err.message } : String(err), entries },
      'request log batch not written',
    );
  }
}
