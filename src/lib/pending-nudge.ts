/**
 * A nudge held until the response is sent. A write notes it inside its transaction, where a
 * look would not see the write yet; the server's onResponse hook (src/webhooks/webhooks-plugin.ts)
 * releases it once the request, and so its commit, is done. The delivery worker and the saved
 * searches' matcher each have one; their polling is what guarantees the work, this only makes it
 * prompt.
 */
export class PendingNudge {
  private pending = false;

  constructor(private readonly nudge: () => void) {}

  note(): void {
    this.pending = true;
  }

  release(): void {
    if (!this.pending) return;
    this.pending = false;
    this.nudge();
  }
}
