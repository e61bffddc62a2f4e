// How often a server that stopped unexpectedly is restarted; no `vscode` import (unit-tested).

/**
 * At most `max` restarts within `windowMs`: a server that keeps crashing is left stopped, with
 * the reason shown, instead of being restarted forever.
 */
export class RestartBudget {
  private restarts: number[] = [];

  constructor(
    readonly max = 3,
    readonly windowMs = 180_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records an unexpected stop: the restart's number (1 to `max`), or undefined when none is left. */
  take(): number | undefined {
    const now = this.now();
    this.restarts = this.restarts.filter((at) => now - at < this.windowMs);
    if (this.restarts.length >= this.max) return undefined;
    this.restarts.push(now);
    return this.restarts.length;
  }

  /** A restart by hand starts the count again. */
  reset(): void {
    this.restarts = [];
  }
}
