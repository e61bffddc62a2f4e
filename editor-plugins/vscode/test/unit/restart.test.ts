// The bound on restarts after unexpected stops.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { RestartBudget } from "../../src/restart";

test("a crashing server is restarted at most max times within the window", () => {
  let now = 0;
  const budget = new RestartBudget(3, 60_000, () => now);
  const taken = [];
  for (const at of [0, 10_000, 20_000]) {
    now = at;
    taken.push(budget.take());
  }
  assert.deepEqual(taken, [1, 2, 3]);
  now = 59_999;
  assert.equal(budget.take(), undefined);
  // Once the first restart is older than the window, one more is allowed.
  now = 60_000;
  assert.equal(budget.take(), 3);
  assert.equal(budget.take(), undefined);
  budget.reset();
  assert.equal(budget.take(), 1);
});
