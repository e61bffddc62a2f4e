// Next edits as data: which answer may be shown (never a stale one), what is drawn for an edit,
// the jump hint, and which of inline completion and next edit wins on a line.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { editView, endOfNewText, hiddenByInline, InlineEdit, jumpHint, resultLines, sameUri, usableEdit } from "../../src/nextEdit";

const URI = "file:///w/src/lib.rs";
// The user renamed `width` in the signature; the edit carries it to the two uses below.
const LINES = ["fn area(breadth: u32, height: u32) -> u32 {", "    let doubled = width * 2;", "    doubled * height + width", "}"];
const lineAt = (n: number) => LINES[n];

function edit(over: Partial<InlineEdit> = {}): InlineEdit {
  return {
    text: "breadth * 2;\n    doubled * height + breadth",
    textDocument: { uri: URI, version: 7 },
    range: { start: { line: 1, character: 18 }, end: { line: 2, character: 28 } },
    command: { title: "Accept next edit", command: "redraft.didAcceptNextEdit", arguments: ["3"] },
    ...over,
  };
}

test("an answer for the version asked about, still current, is shown", () => {
  assert.deepEqual(usableEdit({ edits: [edit()] }, { uri: URI, requested: 7, current: 7 }), edit());
});

test("a stale answer is never shown", () => {
  // The document changed while the server computed.
  assert.equal(usableEdit({ edits: [edit()] }, { uri: URI, requested: 7, current: 8 }), undefined);
  // The edit says it is for another version, or another document.
  assert.equal(usableEdit({ edits: [edit({ textDocument: { uri: URI, version: 6 } })] }, { uri: URI, requested: 7, current: 7 }), undefined);
  assert.equal(
    usableEdit({ edits: [edit({ textDocument: { uri: "file:///w/src/main.rs", version: 7 } })] }, { uri: URI, requested: 7, current: 7 }),
    undefined,
  );
  // No edits, or no answer.
  assert.equal(usableEdit({ edits: [] }, { uri: URI, requested: 7, current: 7 }), undefined);
  assert.equal(usableEdit(null, { uri: URI, requested: 7, current: 7 }), undefined);
});

test("URIs match with or without percent-encoding", () => {
  assert.ok(sameUri("file:///c%3A/w/a%20b.rs", "file:///c:/w/a b.rs"));
  assert.ok(!sameUri("file:///w/A.rs", "file:///w/a.rs"));
});

test("a multi-line edit: the range struck through, each line's replacement after it", () => {
  const view = editView(edit(), lineAt);
  assert.deepEqual(view.deleted, edit().range);
  assert.equal(view.inline, undefined);
  // Less the indentation both lines share.
  assert.deepEqual(view.lines, [
    { line: 1, kind: "changed", text: "let doubled = breadth * 2;" },
    { line: 2, kind: "changed", text: "doubled * height + breadth" },
  ]);
  assert.equal(
    view.diff,
    [
      "```diff",
      "-     let doubled = width * 2;",
      "-     doubled * height + width",
      "+     let doubled = breadth * 2;",
      "+     doubled * height + breadth",
      "```",
    ].join("\n"),
  );
});

test("a one-line edit: the new text right after the replaced text", () => {
  const one = edit({ text: "breadth", range: { start: { line: 2, character: 23 }, end: { line: 2, character: 28 } } });
  const view = editView(one, lineAt);
  assert.deepEqual(view.deleted, one.range);
  assert.deepEqual(view.inline, { at: { line: 2, character: 28 }, text: "breadth" });
  assert.equal(view.lines, undefined);
});

test("lines inserted at the end of a line: nothing struck, the first added line after it, the others counted", () => {
  const insert = edit({ text: "\n    // checked\n    // twice", range: { start: { line: 1, character: 28 }, end: { line: 1, character: 28 } } });
  const view = editView(insert, lineAt);
  assert.equal(view.deleted, undefined);
  assert.deepEqual(view.lines, [{ line: 1, kind: "added", text: "// checked", more: 1 }]);
  assert.deepEqual(resultLines(insert, lineAt), ["    let doubled = width * 2;", "    // checked", "    // twice"]);
  assert.equal(view.diff, ["```diff", "      let doubled = width * 2;", "+     // checked", "+     // twice", "```"].join("\n"));
});

test("a line inserted between two: shown as added after the line above, the line below untouched", () => {
  // Before line 3 (0-based 2): the range is empty at its start, the text ends with a newline.
  const insert = edit({ text: "    // checked\n", range: { start: { line: 2, character: 0 }, end: { line: 2, character: 0 } } });
  const view = editView(insert, lineAt);
  assert.equal(view.deleted, undefined);
  assert.equal(view.inline, undefined);
  assert.deepEqual(view.lines, [{ line: 1, kind: "added", text: "// checked", more: 0 }]);
  assert.equal(view.diff, ["```diff", "+     // checked", "      doubled * height + width", "```"].join("\n"));
});

test("a deleted line: struck, and nothing drawn after it or after the line that follows", () => {
  const del = edit({ text: "", range: { start: { line: 1, character: 0 }, end: { line: 2, character: 0 } } });
  const view = editView(del, lineAt);
  assert.deepEqual(view.deleted, { start: { line: 1, character: 0 }, end: { line: 1, character: LINES[1].length } });
  assert.deepEqual(view.lines, []);
  assert.equal(view.diff, ["```diff", "-     let doubled = width * 2;", "      doubled * height + width", "```"].join("\n"));
});

test("a line appended at the end of the file: added after the last line", () => {
  // With a final newline VS Code's last line is empty, and the edit inserts before it.
  const withNewline = [...LINES, ""];
  const append = edit({ text: "fn main() {}\n", range: { start: { line: 4, character: 0 }, end: { line: 4, character: 0 } } });
  const view = editView(append, (n) => withNewline[n]);
  assert.equal(view.deleted, undefined);
  assert.deepEqual(view.lines, [{ line: 3, kind: "added", text: "fn main() {}", more: 0 }]);
  // Without one, the edit starts at the end of the last line.
  const after = edit({ text: "\nfn main() {}", range: { start: { line: 3, character: 1 }, end: { line: 3, character: 1 } } });
  assert.deepEqual(editView(after, lineAt).lines, [{ line: 3, kind: "added", text: "fn main() {}", more: 0 }]);
});

test("lines inserted at the top of the file: drawn after the first line, marked as above it", () => {
  const top = edit({ text: "use std::fmt;\n", range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } } });
  assert.deepEqual(editView(top, lineAt).lines, [{ line: 0, kind: "added", text: "use std::fmt;", more: 0, above: true }]);
});

test("a multi-line edit that changes one line: only that line struck, its replacement after it", () => {
  const one = edit({
    text: "    let doubled = width * 2;\n    doubled * height + breadth",
    range: { start: { line: 1, character: 0 }, end: { line: 2, character: 28 } },
  });
  const view = editView(one, lineAt);
  assert.deepEqual(view.deleted, { start: { line: 2, character: 0 }, end: { line: 2, character: 28 } });
  assert.deepEqual(view.lines, [{ line: 2, kind: "changed", text: "doubled * height + breadth" }]);
});

test("a changed indentation still shows", () => {
  const indent = edit({ text: "        let", range: { start: { line: 1, character: 0 }, end: { line: 2, character: 0 } } });
  // Lines 2-3 become one line: eight spaces and `let`, then all of line 3. Four of the eight
  // spaces are line 2's own indentation; the other four show. Line 3 goes (struck).
  const view = editView(indent, lineAt);
  assert.deepEqual(view.lines, [{ line: 1, kind: "changed", text: "    let    doubled * height + width" }]);
  assert.deepEqual(view.deleted, indent.range);
});

test("the jump hint points at an edit on other lines, and is gone on its lines", () => {
  const keys = { jump: "Alt+N", accept: "Alt+Enter" };
  assert.equal(jumpHint(edit(), 0, keys), "⇣ next edit at line 2 (Alt+N jump, Alt+Enter accept)");
  assert.equal(jumpHint(edit(), 3, keys), "⇡ next edit at line 2 (Alt+N jump, Alt+Enter accept)");
  assert.equal(jumpHint(edit(), 1, keys), undefined);
  assert.equal(jumpHint(edit(), 2, keys), undefined);
});

test("an inline completion wins on its line; elsewhere the next edit shows", () => {
  assert.equal(hiddenByInline(edit(), 1), true);
  assert.equal(hiddenByInline(edit(), 2), true);
  assert.equal(hiddenByInline(edit(), 0), false);
  assert.equal(hiddenByInline(edit(), undefined), false);
});

test("after accepting, the cursor goes to the end of the new text", () => {
  assert.deepEqual(endOfNewText(edit()), { line: 2, character: 30 });
  assert.deepEqual(endOfNewText(edit({ text: "breadth", range: { start: { line: 2, character: 23 }, end: { line: 2, character: 28 } } })), {
    line: 2,
    character: 30,
  });
});
