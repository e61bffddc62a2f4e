// Next edits in the editor, with the stable API only: asks `redraft lsp` for
// `textDocument/copilotInlineEdit` after an edit pause (`redraft.nextEdit.debounceMs`, the pause
// the server waits before it precomputes one), after an accepted edit and on the command; draws
// the answer with decorations (the replaced text struck through, the new text after it, a diff
// in the hover, a hint at the cursor when the edit is on other lines); accepts it with a
// WorkspaceEdit and then runs the edit's `command` on the server, whatever it is named.
// Multi-line and away-from-cursor edits need the proposed `isInlineEdit` API in VS Code's own
// inline-completion UI, and an extension using proposed APIs cannot be published: hence the
// decorations.
import * as vscode from "vscode";
import { ExecuteCommandRequest, LanguageClient } from "vscode-languageclient/node";
import { editView, endOfNewText, hiddenByInline, InlineEdit, InlineEditList, jumpHint, LineView, METHOD, Pos, SHOWN, usableEdit } from "./nextEdit";

/** The when-clause context key the accept / dismiss / jump keybindings depend on. */
export const VISIBLE_CONTEXT = "redraft.nextEditVisible";
/** The default keys (package.json), named in the hint. */
const KEYS = { jump: "Alt+N", accept: "Alt+Enter" };

export interface NextEditSwitch {
  enabled: boolean;
  debounceMs: number;
}

interface Shown {
  document: vscode.TextDocument;
  version: number;
  edit: InlineEdit;
}

/** What happened last (the log says it too). */
export type Outcome = "shown" | "no edit" | "stale" | "hidden" | "error";

function range(r: { start: Pos; end: Pos }): vscode.Range {
  return new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character);
}

/** What is drawn after a line for one of the view's lines. */
function lineText(line: LineView): string {
  if (line.kind === "changed") return ` → ${line.text}`;
  const more = line.more ? `  (+${line.more} more line${line.more === 1 ? "" : "s"})` : "";
  return ` + ${line.text}${more}${line.above ? "  (above)" : ""}`;
}

/** Decoration text keeps its spaces (CSS would collapse them). */
function visibleSpaces(text: string): string {
  return text.replace(/ /g, "\u00a0");
}

export class NextEdits implements vscode.Disposable {
  private readonly deletedType = vscode.window.createTextEditorDecorationType({
    backgroundColor: new vscode.ThemeColor("diffEditor.removedTextBackground"),
    textDecoration: "line-through",
  });
  private readonly addedType = vscode.window.createTextEditorDecorationType({
    after: {
      backgroundColor: new vscode.ThemeColor("diffEditor.insertedTextBackground"),
      color: new vscode.ThemeColor("editor.foreground"),
    },
  });
  private readonly hintType = vscode.window.createTextEditorDecorationType({
    after: {
      color: new vscode.ThemeColor("editorCodeLens.foreground"),
      fontStyle: "italic",
      margin: "0 0 0 2em",
    },
  });
  private shown?: Shown;
  private timer?: NodeJS.Timeout;
  private inFlight?: vscode.CancellationTokenSource;
  private applying = false;
  private inline?: { uri: string; version: number; line: number };
  private readonly disposables: vscode.Disposable[] = [];
  lastOutcome?: Outcome;

  constructor(
    private readonly client: () => LanguageClient | undefined,
    private readonly settings: () => NextEditSwitch,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.disposables.push(
      this.deletedType,
      this.addedType,
      this.hintType,
      vscode.workspace.onDidChangeTextDocument((event) => {
        if (event.contentChanges.length === 0 || this.applying) return;
        if (event.document !== vscode.window.activeTextEditor?.document) return;
        // What is shown was for the text before this change.
        this.cancel();
        this.clear();
        this.schedule();
      }),
      vscode.window.onDidChangeTextEditorSelection(() => this.render()),
      vscode.window.onDidChangeActiveTextEditor(() => {
        this.cancel();
        this.clear();
      }),
    );
  }

  /**
   * The inline-completion answer at `line` (undefined: none to show), for "who wins where": a
   * next edit already shown on that line gives way. (The stable API does not say when an inline
   * suggestion is dismissed, so the note lasts until the document changes or the next answer.)
   */
  noteInline(document: vscode.TextDocument, line: number | undefined): void {
    this.inline = line === undefined ? undefined : { uri: document.uri.toString(), version: document.version, line };
    const shown = this.shown;
    if (shown && shown.document === document && hiddenByInline(shown.edit, line)) {
      this.clear();
      this.outcome("hidden", "an inline completion arrived on a line it touches");
    }
  }

  private inlineLine(document: vscode.TextDocument): number | undefined {
    const note = this.inline;
    return note && note.uri === document.uri.toString() && note.version === document.version ? note.line : undefined;
  }

  private schedule(): void {
    this.stopTimer();
    const { enabled, debounceMs } = this.settings();
    if (!enabled || debounceMs <= 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.request("after an edit pause");
    }, debounceMs);
  }

  private stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private cancel(): void {
    this.stopTimer();
    this.inFlight?.cancel();
    this.inFlight?.dispose();
    this.inFlight = undefined;
  }

  private outcome(outcome: Outcome, detail: string): void {
    this.lastOutcome = outcome;
    this.log.debug(`next edit: ${outcome}${detail ? ` (${detail})` : ""}`);
  }

  /** Asks for a next edit at the active editor's cursor; false when nothing was asked. */
  async request(reason: string): Promise<boolean> {
    const editor = vscode.window.activeTextEditor;
    const lc = this.client();
    if (!editor || !lc?.isRunning() || !this.settings().enabled) return false;
    this.cancel();
    const document = editor.document;
    const source = new vscode.CancellationTokenSource();
    this.inFlight = source;
    const requested = document.version;
    const cursor = editor.selection.active;
    const uri = lc.code2ProtocolConverter.asUri(document.uri);
    const params = { textDocument: { uri, version: requested }, position: { line: cursor.line, character: cursor.character } };
    this.log.debug(`next edit: asked ${reason} at ${cursor.line + 1}:${cursor.character + 1}, version ${requested}`);
    let answer: InlineEditList | null;
    try {
      answer = await lc.sendRequest<InlineEditList | null>(METHOD, params, source.token);
    } catch (error) {
      if (!source.token.isCancellationRequested) this.outcome("error", String(error));
      return true;
    }
    if (this.inFlight !== source || source.token.isCancellationRequested) return true;
    this.inFlight = undefined;
    source.dispose();
    const count = answer?.edits?.length ?? 0;
    const edit = usableEdit(answer, { uri, requested, current: document.version });
    if (!edit) {
      this.outcome(count === 0 ? "no edit" : "stale", count === 0 ? "" : `for version ${requested}, the document is at ${document.version}`);
      return true;
    }
    if (vscode.window.activeTextEditor?.document !== document) {
      this.outcome("stale", "another editor is active");
      return true;
    }
    if (hiddenByInline(edit, this.inlineLine(document))) {
      this.outcome("hidden", "an inline completion is shown on a line it touches");
      return true;
    }
    this.shown = { document, version: requested, edit };
    this.render();
    void vscode.commands.executeCommand("setContext", VISIBLE_CONTEXT, true);
    void lc.sendNotification(SHOWN, { item: edit }).catch(() => undefined);
    this.outcome("shown", `lines ${edit.range.start.line + 1}-${edit.range.end.line + 1}`);
    return true;
  }

  /** Draws the shown edit in the editors of its document (the hint only at the active cursor). */
  private render(): void {
    const shown = this.shown;
    for (const editor of vscode.window.visibleTextEditors) {
      if (!shown || editor.document !== shown.document || shown.document.version !== shown.version) {
        editor.setDecorations(this.deletedType, []);
        editor.setDecorations(this.addedType, []);
        editor.setDecorations(this.hintType, []);
        continue;
      }
      const view = editView(shown.edit, (line) => shown.document.lineAt(Math.min(line, shown.document.lineCount - 1)).text);
      const hover = new vscode.MarkdownString(`${view.diff}\n\n**redraft next edit**: ${KEYS.accept} accept, ${KEYS.jump} jump, Esc dismiss`);
      const added: vscode.DecorationOptions[] = [];
      const after = (at: vscode.Position, text: string): vscode.DecorationOptions => ({
        range: new vscode.Range(at, at),
        hoverMessage: hover,
        renderOptions: { after: { contentText: visibleSpaces(text) } },
      });
      if (view.inline) added.push(after(new vscode.Position(view.inline.at.line, view.inline.at.character), view.inline.text));
      for (const line of view.lines ?? []) {
        added.push(after(shown.document.lineAt(line.line).range.end, lineText(line)));
      }
      editor.setDecorations(this.deletedType, view.deleted ? [{ range: range(view.deleted), hoverMessage: hover }] : []);
      editor.setDecorations(this.addedType, added);
      const active = vscode.window.activeTextEditor === editor;
      const cursor = editor.selection.active.line;
      const hint = active ? jumpHint(shown.edit, cursor, KEYS) : undefined;
      editor.setDecorations(
        this.hintType,
        hint
          ? [{ range: new vscode.Range(cursor, Number.MAX_SAFE_INTEGER, cursor, Number.MAX_SAFE_INTEGER), renderOptions: { after: { contentText: hint } } }]
          : [],
      );
    }
  }

  private clear(): void {
    if (!this.shown) return;
    this.shown = undefined;
    this.render();
    void vscode.commands.executeCommand("setContext", VISIBLE_CONTEXT, false);
  }

  /** The shown edit, if it is still for its document's current text. */
  private current(): Shown | undefined {
    const shown = this.shown;
    if (shown && shown.document.version !== shown.version) {
      this.clear();
      return undefined;
    }
    return shown;
  }

  /** Applies the shown edit, runs its command, and asks for the next one. */
  async accept(): Promise<boolean> {
    const shown = this.current();
    const lc = this.client();
    if (!shown || !lc) return false;
    this.cancel();
    this.clear();
    const { edit, document } = shown;
    const change = new vscode.WorkspaceEdit();
    change.replace(document.uri, range(edit.range), edit.text);
    this.applying = true;
    let applied: boolean;
    try {
      applied = await vscode.workspace.applyEdit(change);
    } finally {
      this.applying = false;
    }
    if (!applied) {
      this.log.warn("next edit: the editor refused the edit");
      return false;
    }
    const editor = vscode.window.activeTextEditor;
    if (editor?.document === document) {
      const end = endOfNewText(edit);
      const at = new vscode.Position(end.line, end.character);
      editor.selection = new vscode.Selection(at, at);
    }
    if (edit.command) {
      try {
        await lc.sendRequest(ExecuteCommandRequest.type, { command: edit.command.command, arguments: edit.command.arguments });
      } catch (error) {
        this.log.warn(`next edit: ${edit.command.command} failed: ${String(error)}`);
      }
    }
    await this.request("after an accepted edit");
    return true;
  }

  dismiss(): boolean {
    const had = this.shown !== undefined;
    this.cancel();
    this.clear();
    return had;
  }

  /** Moves the cursor to the start of the shown edit and brings it into view. */
  jump(): boolean {
    const shown = this.current();
    const editor = vscode.window.activeTextEditor;
    if (!shown || editor?.document !== shown.document) return false;
    const start = new vscode.Position(shown.edit.range.start.line, shown.edit.range.start.character);
    editor.selection = new vscode.Selection(start, start);
    editor.revealRange(range(shown.edit.range), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    return true;
  }

  dispose(): void {
    this.cancel();
    this.shown = undefined;
    for (const d of this.disposables) d.dispose();
  }
}
