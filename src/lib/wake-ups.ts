/**
 * "Something is due: look now" for the background loops: the delivery worker (`deliveries`) and
 * the saved searches' matcher (`matching`). The one wake-up of the house: a write still inside
 * its transaction asks for `afterCommit` (the loop looks once its request is answered, when the
 * write is visible; src/lib/request-scope.ts afterAnswer), one already committed for `now`.
 * Each loop's plugin listens to its lane (src/webhooks/webhooks-plugin.ts,
 * src/saved-searches/matcher-plugin.ts); a lane without a loop in this process has no listener.
 * Polling is what guarantees the work (other processes' writes, a wake-up lost to a rollback);
 * a wake-up only makes it prompt.
 */
import { afterAnswer } from './request-scope.ts';

export type WakeUpLane = 'deliveries' | 'matching';

export class WakeUps {
  private readonly listeners: Record<WakeUpLane, (() => void)[]> = {
    deliveries: [],
    matching: [],
  };

  /** One function per lane, so a request that writes many times wakes each lane once. */
  private readonly wake: Record<WakeUpLane, () => void> = {
    deliveries: () => this.now('deliveries'),
    matching: () => this.now('matching'),
  };

  on(lane: WakeUpLane, listener: () => void): void {
    this.listeners[lane].push(listener);
  }

  /** What is due has committed: the lane's loop looks now. */
  now(lane: WakeUpLane): void {
    for (const listener of this.listeners[lane]) listener();
  }

  /** A write in its transaction made work for the lane: its loop looks once it has committed. */
  afterCommit(lane: WakeUpLane): void {
    afterAnswer(this.wake[lane]);
  }
}
