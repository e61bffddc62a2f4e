// The status bar's text per state, and the in-flight counter behind "busy".
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { BusyCounter, statusView } from "../../src/status";

test("each state reads as the user expects", () => {
  assert.match(statusView({ kind: "loading", detail: "loading model 40%" }, true, "medium").tooltip, /loading model 40%/);
  const ready = statusView({ kind: "ready" }, true, "low");
  assert.equal(ready.text, "$(sparkle) redraft");
  assert.match(ready.tooltip, /effort low/);
  assert.equal(statusView({ kind: "ready" }, false, "low").text, "$(sparkle) redraft (off)");
  assert.match(statusView({ kind: "busy" }, true, "high").text, /spin/);
  assert.match(statusView({ kind: "busy", step: "step 2, 5 masked" }, true, "high").tooltip, /step 2, 5 masked/);
  const error = statusView({ kind: "error", reason: "model failed to load: no config.json" }, true, "medium");
  assert.equal(error.error, true);
  assert.match(error.tooltip, /no config\.json/);
  assert.equal(statusView({ kind: "stopped" }, true, "medium").error, false);
});

test("busy lasts until the last overlapping request ends, even when one fails", async () => {
  const changes: boolean[] = [];
  const counter = new BusyCounter((busy) => changes.push(busy));
  let releaseFirst!: () => void;
  const first = counter.around(() => new Promise<void>((resolve) => (releaseFirst = resolve)));
  const second = counter.around(async () => {
    throw new Error("cancelled");
  });
  await assert.rejects(second, /cancelled/);
  assert.equal(counter.busy, true);
  releaseFirst();
  await first;
  assert.equal(counter.busy, false);
  assert.deepEqual(changes, [true, false]);
});
