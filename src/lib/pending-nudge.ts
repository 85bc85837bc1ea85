/**
 * A nudge held until the response is sent. A write notes it inside its transaction, where a
 * look would not see the write yet; the server's onResponse hooks release it once the request,
 * and so its commit, is done (src/webhooks/webhooks-plugin.ts for the delivery worker,
 * src/saved-searches/matcher-plugin.ts for the saved searches' matcher: each has one). Their
 * polling is what guarantees the work, this only makes it prompt.
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
