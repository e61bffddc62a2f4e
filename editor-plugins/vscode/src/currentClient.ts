// The language client the extension runs, one at a time, and what belongs to it: a restart (the
// command, a changed `redraft.path`) stops the old server even while it is still starting,
// disposes the old client and the handlers registered on it, and a progress token's handler
// goes when its progress ends. No `vscode` import (unit-tested with a fake client).

export interface Disposable {
  dispose(): unknown;
}

/** What of vscode-languageclient's `LanguageClient` this needs. */
export interface StartableClient {
  start(): Promise<void>;
  /** Stops the server (it must be running) and disposes the client. */
  dispose(timeout?: number): Promise<void>;
}

interface Entry<C> {
  client: C;
  owned: Disposable[];
  starting?: Promise<void>;
}

/**
 * The client in use. A LanguageClient cannot be stopped while it starts (`stop()` throws until
 * its `initialize` is answered), so one stopped then is disposed once its start settles; the
 * next start waits for that at most `waitMs` (a server that never answers must not block a
 * restart), and the old client is still disposed if it starts later.
 */
export class CurrentClient<C extends StartableClient> {
  private current?: Entry<C>;

  constructor(private readonly waitMs = 10_000) {}

  /** The client in use (starting or running), if any. */
  get client(): C | undefined {
    return this.current?.client;
  }

  /**
   * Stops the client in use, then starts `client` in its place; `owned` (handlers registered on
   * it) are disposed with it. Resolves to whether it is still the client in use once started
   * (false: stopped or replaced meanwhile); rejects as its start does, while it is in use.
   */
  async start(client: C, owned: Disposable[] = []): Promise<boolean> {
    await this.stop();
    const entry: Entry<C> = { client, owned };
    this.current = entry;
    const starting = client.start();
    entry.starting = starting;
    try {
      await starting;
    } catch (error) {
      if (this.current !== entry) return false;
      throw error;
    } finally {
      entry.starting = undefined;
    }
    return this.current === entry;
  }

  /** Stops and disposes the client in use and what it owns (nothing in use: nothing to do). */
  async stop(): Promise<void> {
    const entry = this.current;
    this.current = undefined;
    if (!entry) return;
    for (const handler of entry.owned) handler.dispose();
    // A client whose start failed has no server to stop: its dispose rejects, which says nothing.
    const disposed = (entry.starting ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => entry.client.dispose())
      .catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.waitMs)));
    try {
      await Promise.race([disposed, bound]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * The handlers of the server's work-done progress tokens (one per model load): each is disposed
 * when its progress ends, and all of them with the client.
 */
export class ProgressHandlers implements Disposable {
  private readonly handlers = new Map<string | number, Disposable>();

  add(token: string | number, handler: Disposable): void {
    this.handlers.get(token)?.dispose();
    this.handlers.set(token, handler);
  }

  end(token: string | number): void {
    this.handlers.get(token)?.dispose();
    this.handlers.delete(token);
  }

  /** How many tokens have a handler. */
  get size(): number {
    return this.handlers.size;
  }

  dispose(): void {
    for (const handler of this.handlers.values()) handler.dispose();
    this.handlers.clear();
  }
}
