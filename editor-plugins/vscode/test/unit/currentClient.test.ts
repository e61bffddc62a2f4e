// The client in use and what belongs to it: a restart never leaves a server running (one still
// starting included), every old client and its handlers are disposed, and each progress token's
// handler goes when its progress ends.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { CurrentClient, Disposable, ProgressHandlers, StartableClient } from "../../src/currentClient";

/**
 * A LanguageClient as far as its life goes: `start()` settles when the test says, and, as the
 * real one, a client can be stopped only while running (`dispose()` rejects while starting).
 */
class FakeClient implements StartableClient {
  state: "initial" | "starting" | "running" | "stopped" | "failed" = "initial";
  disposed = 0;
  private settle?: (ok: boolean) => void;

  start(): Promise<void> {
    this.state = "starting";
    return new Promise((resolve, reject) => {
      this.settle = (ok) => {
        this.state = ok ? "running" : "failed";
        if (ok) resolve();
        else reject(new Error("the server did not start"));
      };
    });
  }

  started(ok = true): void {
    this.settle?.(ok);
  }

  isRunning(): boolean {
    return this.state === "running";
  }

  async stop(): Promise<void> {
    if (this.state !== "running") throw new Error(`Client is not running and can't be stopped. It's current state is: ${this.state}`);
    this.state = "stopped";
  }

  async dispose(): Promise<void> {
    this.disposed++;
    await this.stop();
  }
}

/** Lets the promises settled so far run their continuations (a start begins after a stop). */
function tick(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function handler(): Disposable & { disposed: number } {
  return {
    disposed: 0,
    dispose() {
      this.disposed++;
    },
  };
}

test("a restart stops and disposes the running client and its handlers; the new one is in use", async () => {
  const clients = new CurrentClient<FakeClient>();
  const old = new FakeClient();
  const onProgress = handler();
  const starting = clients.start(old, [onProgress]);
  await tick();
  old.started();
  assert.equal(await starting, true);
  assert.equal(clients.client, old);

  const next = new FakeClient();
  const restarted = clients.start(next);
  // The old one is gone before the new one starts.
  await tick();
  assert.equal(old.state, "stopped");
  assert.equal(old.disposed, 1);
  assert.equal(onProgress.disposed, 1);
  assert.equal(next.state, "starting");
  next.started();
  assert.equal(await restarted, true);
  assert.equal(clients.client, next);
});

test("a client stopped while it is still starting is stopped once started, not left running", async () => {
  const clients = new CurrentClient<FakeClient>();
  const starting = new FakeClient();
  const started = clients.start(starting);
  await tick();
  const stopped = clients.stop();
  assert.equal(clients.client, undefined);
  starting.started();
  // Its start resolves, but it is no longer the one in use.
  assert.equal(await started, false);
  await stopped;
  assert.equal(starting.state, "stopped");
  assert.equal(starting.disposed, 1);
});

test("a restart while starting: the old client is stopped, the new one in use, the old start says so", async () => {
  const clients = new CurrentClient<FakeClient>();
  const first = new FakeClient();
  const firstStart = clients.start(first);
  await tick();
  const second = new FakeClient();
  const secondStart = clients.start(second);
  first.started();
  assert.equal(await firstStart, false);
  await tick();
  second.started();
  assert.equal(await secondStart, true);
  assert.equal(first.state, "stopped");
  assert.equal(second.state, "running");
  assert.equal(clients.client, second);
});

test("a client whose start failed is disposed on stop, quietly", async () => {
  const clients = new CurrentClient<FakeClient>();
  const failing = new FakeClient();
  const started = clients.start(failing);
  await tick();
  failing.started(false);
  await assert.rejects(started, /did not start/);
  await clients.stop();
  assert.equal(failing.disposed, 1);
  assert.equal(clients.client, undefined);
  // A failed start that was already replaced does not reject: the newer start is in charge.
  const replaced = new FakeClient();
  const replacedStart = clients.start(replaced);
  await tick();
  const stopping = clients.stop();
  replaced.started(false);
  assert.equal(await replacedStart, false);
  await stopping;
});

test("a start that never settles holds a restart up for the bound only; it is stopped if it ever starts", async () => {
  const clients = new CurrentClient<FakeClient>(20);
  const hung = new FakeClient();
  void clients.start(hung);
  await tick();
  const next = new FakeClient();
  const restarted = clients.start(next);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(next.state, "starting");
  next.started();
  assert.equal(await restarted, true);
  hung.started();
  await tick();
  assert.equal(hung.state, "stopped");
  assert.equal(clients.client, next);
});

test("a progress handler goes when its progress ends; the rest with the client", () => {
  const progress = new ProgressHandlers();
  const [load, reload, again] = [handler(), handler(), handler()];
  progress.add("load-1", load);
  progress.add("load-2", reload);
  progress.end("load-1");
  assert.equal(load.disposed, 1);
  assert.equal(progress.size, 1);
  // A token used again replaces its handler.
  progress.add("load-2", again);
  assert.equal(reload.disposed, 1);
  progress.dispose();
  assert.equal(again.disposed, 1);
  assert.equal(progress.size, 0);
  assert.equal(load.disposed + reload.disposed + again.disposed, 3);
});
