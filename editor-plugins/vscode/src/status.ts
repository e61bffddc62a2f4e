// The status bar item's states and how each reads; no `vscode` import (unit-tested).

export type ServerState =
  | { kind: "stopped" }
  | { kind: "loading"; detail?: string }
  | { kind: "ready" }
  | { kind: "busy"; step?: string }
  | { kind: "error"; reason: string };

export interface StatusView {
  text: string;
  tooltip: string;
  error: boolean;
}

/** What the status bar shows for a state, with suggestions turned on or off. */
export function statusView(state: ServerState, enabled: boolean, effort: string): StatusView {
  const off = enabled ? "" : " (off)";
  switch (state.kind) {
    case "stopped":
      return { text: "$(circle-slash) redraft", tooltip: "redraft: server not running", error: false };
    case "loading":
      return {
        text: "$(sync~spin) redraft",
        tooltip: `redraft: loading${state.detail ? `: ${state.detail}` : ""}`,
        error: false,
      };
    case "ready":
      return {
        text: `$(sparkle) redraft${off}`,
        tooltip: `redraft: ready, effort ${effort}${enabled ? "" : ", suggestions off"} (click to toggle)`,
        error: false,
      };
    case "busy":
      return {
        text: `$(loading~spin) redraft${off}`,
        tooltip: `redraft: computing a suggestion (effort ${effort}${state.step ? `, ${state.step}` : ""})`,
        error: false,
      };
    case "error":
      return { text: "$(error) redraft", tooltip: `redraft: ${state.reason} (click to show the log)`, error: true };
  }
}

/**
 * Counts requests in flight so overlapping suggestions (a newer keystroke's request starts
 * before the older one is cancelled) leave the status busy until the last one ends.
 */
export class BusyCounter {
  private inFlight = 0;
  constructor(private readonly onChange: (busy: boolean) => void) {}

  async around<T>(work: () => Promise<T>): Promise<T> {
    if (this.inFlight++ === 0) this.onChange(true);
    try {
      return await work();
    } finally {
      if (--this.inFlight === 0) this.onChange(false);
    }
  }

  get busy(): boolean {
    return this.inFlight > 0;
  }
}
