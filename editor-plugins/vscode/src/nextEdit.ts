// Next edits (Copilot's `textDocument/copilotInlineEdit`) as plain data: which edit of an answer
// may be shown, and what to draw for it. No `vscode` import, so it is unit-tested under Node;
// `nextEdits.ts` turns these into decorations and commands.

export const METHOD = "textDocument/copilotInlineEdit";
export const SHOWN = "textDocument/didShowInlineEdit";

export interface Pos {
  line: number;
  character: number;
}

export interface WireRange {
  start: Pos;
  end: Pos;
}

export interface WireCommand {
  title?: string;
  command: string;
  arguments?: unknown[];
}

/** One edit of the answer, as the server sent it (positions in UTF-16, VS Code's encoding). */
export interface InlineEdit {
  text: string;
  textDocument: { uri: string; version: number };
  range: WireRange;
  command?: WireCommand;
}

export interface InlineEditList {
  edits?: InlineEdit[];
}

/** What the request was for and where the document is now. */
export interface Asked {
  uri: string;
  /** The version the request carried. */
  requested: number;
  /** The document's version when the answer arrived. */
  current: number;
}

/**
 * The edit to show: the answer's first edit, but only while the document is still at the
 * version that was asked about and the edit says it is for that document and version. A
 * stale answer shows nothing.
 */
export function usableEdit(answer: InlineEditList | null | undefined, asked: Asked): InlineEdit | undefined {
  const edit = answer?.edits?.[0];
  if (!edit || asked.current !== asked.requested) return undefined;
  const doc = edit.textDocument;
  if (doc && (doc.version !== asked.requested || !sameUri(doc.uri, asked.uri))) return undefined;
  return edit;
}

/** URIs compared as VS Code writes them and as a server may (with or without percent-encoding). */
export function sameUri(a: string, b: string): boolean {
  const decoded = (u: string) => {
    try {
      return decodeURIComponent(u);
    } catch {
      return u;
    }
  };
  return a === b || decoded(a) === decoded(b);
}

/** Whether the edit's range covers any of `line` (its first to its last line). */
export function touchesLine(edit: InlineEdit, line: number): boolean {
  return edit.range.start.line <= line && line <= edit.range.end.line;
}

/**
 * An inline completion at the cursor wins: a next edit touching the line an inline completion
 * is showing on is not shown while it is (the server applies the same rule).
 */
export function hiddenByInline(edit: InlineEdit, inlineLine: number | undefined): boolean {
  return inlineLine !== undefined && touchesLine(edit, inlineLine);
}

/**
 * A line of new text drawn after the end of a document line: `changed`, the line that replaces
 * it; `added`, the first of the lines the edit inserts after it (`above`: before it, for lines
 * inserted at the top of the file), `more` counting the others.
 */
export interface LineView {
  line: number;
  kind: "changed" | "added";
  text: string;
  more?: number;
  above?: boolean;
}

/** What to draw for an edit, in document positions. */
export interface EditView {
  /** The replaced text (struck through); absent when no line loses anything. */
  deleted?: WireRange;
  /** A one-line edit: its new text, drawn right after the replaced text. */
  inline?: { at: Pos; text: string };
  /**
   * A multi-line edit, with the old and new lines aligned (the lines both start and end with
   * are unchanged): after each changed line the line that replaces it, after the line above
   * inserted lines the first of them; deleted lines are struck and nothing follows them. Each
   * text less the indentation it shares with the line it is drawn after (it says nothing; a
   * changed indentation still shows).
   */
  lines?: LineView[];
  /** The edit as a diff of whole lines (markdown), for the hover. */
  diff: string;
}

/** The lines `edit` leaves in place of its range's lines, kept text around the range included. */
export function resultLines(edit: InlineEdit, lineAt: (line: number) => string): string[] {
  const first = lineAt(edit.range.start.line);
  const last = lineAt(edit.range.end.line);
  const text = edit.text.replace(/\r\n?/g, "\n");
  return (first.slice(0, edit.range.start.character) + text + last.slice(edit.range.end.character)).split("\n");
}

/**
 * How many lines `a` and `b` start with in common (`same`), and then end with in common
 * (`after`, not overlapping those).
 */
function commonLines(a: string[], b: string[]): { same: number; after: number } {
  let same = 0;
  while (same < a.length && same < b.length && a[same] === b[same]) same++;
  let after = 0;
  while (after < a.length - same && after < b.length - same && a[a.length - 1 - after] === b[b.length - 1 - after]) after++;
  return { same, after };
}

/** The view of `edit` over a document whose lines `lineAt` returns. */
export function editView(edit: InlineEdit, lineAt: (line: number) => string): EditView {
  const { start, end } = edit.range;
  const empty = start.line === end.line && start.character === end.character;
  const text = edit.text.replace(/\r\n?/g, "\n");
  const oldLines: string[] = [];
  for (let line = start.line; line <= end.line; line++) oldLines.push(lineAt(line));
  const newLines = resultLines(edit, lineAt);
  const { same, after } = commonLines(oldLines, newLines);
  const removed = oldLines.slice(same, oldLines.length - after);
  const added = newLines.slice(same, newLines.length - after);
  const diff = [
    "```diff",
    ...oldLines.slice(0, same).map((l) => `  ${l}`),
    ...removed.map((l) => `- ${l}`),
    ...added.map((l) => `+ ${l}`),
    ...oldLines.slice(oldLines.length - after).map((l) => `  ${l}`),
    "```",
  ].join("\n");
  const view: EditView = { diff };
  if (start.line === end.line && !text.includes("\n")) {
    if (!empty) view.deleted = { start, end };
    if (text !== "") view.inline = { at: end, text };
    return view;
  }
  // The old lines that change, each struck from where the range starts on it to where it ends.
  const first = start.line + same;
  if (removed.length > 0) {
    const last = first + removed.length - 1;
    view.deleted = {
      start: { line: first, character: same === 0 ? start.character : 0 },
      end: { line: last, character: after === 0 ? end.character : lineAt(last).length },
    };
  }
  // Old and new lines in order: a changed line shows its replacement; the old lines left over
  // are deleted (struck, nothing after them), the new ones left over inserted after the last
  // old line before them.
  const paired = Math.min(removed.length, added.length);
  view.lines = added.slice(0, paired).map((t, i) => ({ line: first + i, kind: "changed", text: t.slice(sharedIndent(t, removed[i])) }));
  if (added.length > paired) {
    const inserted = added.slice(paired);
    const above = first + paired === 0;
    const anchor = above ? 0 : first + paired - 1;
    const anchorText = lineAt(anchor);
    view.lines.push({
      line: anchor,
      kind: "added",
      text: inserted[0].slice(sharedIndent(inserted[0], anchorText)),
      more: inserted.length - 1,
      ...(above ? { above } : {}),
    });
  }
  return view;
}

/** The length of the leading whitespace `a` and `b` have in common. */
function sharedIndent(a: string, b: string): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n] && (a[n] === " " || a[n] === "\t")) n++;
  return n;
}

/** The hint at the cursor while the edit is on other lines (or off-screen). */
export function jumpHint(edit: InlineEdit, cursorLine: number, keys: { jump: string; accept: string }): string | undefined {
  if (touchesLine(edit, cursorLine)) return undefined;
  const arrow = edit.range.start.line > cursorLine ? "⇣" : "⇡";
  return `${arrow} next edit at line ${edit.range.start.line + 1} (${keys.jump} jump, ${keys.accept} accept)`;
}

/** Where the cursor goes after accepting: the end of the new text. */
export function endOfNewText(edit: InlineEdit): Pos {
  const lines = edit.text.replace(/\r\n?/g, "\n").split("\n");
  const last = lines[lines.length - 1];
  return lines.length === 1
    ? { line: edit.range.start.line, character: edit.range.start.character + last.length }
    : { line: edit.range.start.line + lines.length - 1, character: last.length };
}
