// Finding the redraft binary, and the message when it is missing.
import { after, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { findBinary } from "../../src/binary";

// Every directory a test made, removed when the file's tests are done.
const made: string[] = [];
after(() => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

function tempDirWithBinary(executable: boolean): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "redraft-bin-"));
  made.push(dir);
  fs.writeFileSync(path.join(dir, "redraft"), "#!/bin/sh\n", { mode: executable ? 0o755 : 0o644 });
  return dir;
}

test("a name is looked up on PATH", () => {
  const dir = tempDirWithBinary(true);
  assert.deepEqual(findBinary("redraft", `/nonexistent${path.delimiter}${dir}`), {
    found: true,
    path: path.join(dir, "redraft"),
  });
});

test("a missing name says how to install or configure it", () => {
  const result = findBinary("redraft", "/nonexistent");
  assert.equal(result.found, false);
  assert.match(result.found ? "" : result.reason, /not on PATH.*cargo install --path cli.*redraft\.path/);
});

test("a path must be an executable file", () => {
  const dir = tempDirWithBinary(false);
  const result = findBinary(path.join(dir, "redraft"), "");
  assert.equal(result.found, false);
  assert.match(result.found ? "" : result.reason, /not executable/);
  assert.equal(findBinary(dir, "").found, false, "a directory is not a binary");
});

test("a relative path resolves against the workspace folder", () => {
  const dir = tempDirWithBinary(true);
  assert.deepEqual(findBinary("./redraft", "", dir), { found: true, path: path.join(dir, "redraft") });
});

test("empty, the server packaged inside the extension comes first, then PATH", () => {
  const onPath = tempDirWithBinary(true);
  const inside = tempDirWithBinary(true);
  const bundled = path.join(inside, "redraft");
  assert.deepEqual(findBinary("", onPath, undefined, bundled), { found: true, path: bundled });
  assert.deepEqual(findBinary("  ", onPath, undefined, bundled), { found: true, path: bundled });
  // An extension without one (or one not executable) looks on PATH.
  const missing = path.join(inside, "nothing-here");
  assert.deepEqual(findBinary("", onPath, undefined, missing), { found: true, path: path.join(onPath, "redraft") });
  const notExecutable = path.join(tempDirWithBinary(false), "redraft");
  assert.deepEqual(findBinary("", onPath, undefined, notExecutable), { found: true, path: path.join(onPath, "redraft") });
  // A name or a path set by the user wins over it.
  assert.deepEqual(findBinary("redraft", onPath, undefined, bundled), { found: true, path: path.join(onPath, "redraft") });
  assert.deepEqual(findBinary(path.join(onPath, "redraft"), "", undefined, bundled), { found: true, path: path.join(onPath, "redraft") });
  const none = findBinary("", "/nonexistent", undefined, missing);
  assert.match(none.found ? "" : none.reason, /`redraft` is not on PATH.*scripts\/package-vscode/);
});
