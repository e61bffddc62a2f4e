// redraft for VS Code: starts `redraft lsp` with vscode-languageclient, whose inline-completion
// feature turns the server's `textDocument/inlineCompletion` items into ghost text unchanged.
// This file adds what users expect around it: settings, a status bar item, commands, and the
// next edits of `nextEdits.ts`.
import * as path from "node:path";
import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  LanguageClientOptions,
  MessageType,
  ServerOptions,
  ShowMessageNotification,
  State,
  TransportKind,
  WorkDoneProgress,
  WorkDoneProgressCreateRequest,
} from "vscode-languageclient/node";
import { findBinary } from "./binary";
import { CurrentClient, Disposable, ProgressHandlers } from "./currentClient";
import { NextEdits, VISIBLE_CONTEXT } from "./nextEdits";
import { RestartBudget } from "./restart";
import { affectsServer, EFFORTS, serverSettings } from "./settings";
import { BusyCounter, ServerState, statusView } from "./status";

const clients = new CurrentClient<LanguageClient>();
let log: vscode.LogOutputChannel;
let statusItem: vscode.StatusBarItem;
let state: ServerState = { kind: "stopped" };
let nextEdits: NextEdits | undefined;
/** Where a server packaged inside the extension would be (`scripts/package-vscode`). */
let bundled: string | undefined;
const restarts = new RestartBudget();

function config(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration("redraft");
}

function enabled(): boolean {
  return config().get<boolean>("enable") ?? true;
}

function setState(next: ServerState): void {
  state = next;
  const view = statusView(state, enabled(), config().get<string>("effort") ?? "medium");
  statusItem.text = view.text;
  statusItem.tooltip = view.tooltip;
  // Screen readers (and the end-to-end test) read the state from the label.
  statusItem.accessibilityInformation = { label: view.tooltip };
  statusItem.backgroundColor = view.error ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
  statusItem.command = view.error ? "redraft.showLog" : "redraft.toggle";
  statusItem.show();
}

// The server reports model loading as work-done progress; shown in the status bar instead of a
// notification popup, since it happens on every start. Returns the handlers, disposed with the
// client; each token's progress handler goes when its progress ends (a model load each).
function watchProgress(lc: LanguageClient): Disposable[] {
  const progress = new ProgressHandlers();
  const onCreate = lc.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => {
    const handler = lc.onProgress(WorkDoneProgress.type, token, (value) => {
      if (value.kind === "begin") {
        setState({ kind: "loading", detail: value.title + (value.message ? `: ${value.message}` : "") });
      } else if (value.kind === "report" && state.kind === "loading") {
        const percent = value.percentage !== undefined ? ` ${value.percentage}%` : "";
        setState({ kind: "loading", detail: (value.message ?? "") + percent });
      } else if (value.kind === "end") {
        progress.end(token);
        if (state.kind === "loading") setState({ kind: "ready" });
      }
    });
    progress.add(token, handler);
  });
  // `redraft/draftStep` (sent when redraft.streamSteps is on): the step being computed.
  const onStep = lc.onNotification("redraft/draftStep", (params: { step?: number; masked?: number }) => {
    if (state.kind === "busy" && typeof params.step === "number") {
      setState({ kind: "busy", step: `step ${params.step + 1}, ${params.masked ?? 0} masked` });
    }
  });
  const onMessage = lc.onNotification(ShowMessageNotification.type, ({ type, message }) => {
    log.appendLine(`server: ${message}`);
    if (type === MessageType.Error) {
      setState({ kind: "error", reason: message });
      void vscode.window.showErrorMessage(`redraft: ${message}`, "Show Log").then((choice) => {
        if (choice) log.show();
      });
    } else if (type === MessageType.Warning) {
      void vscode.window.showWarningMessage(`redraft: ${message}`);
    }
  });
  return [progress, onCreate, onStep, onMessage];
}

/** Starts the server in place of the running one (which is stopped first, even while starting). */
async function start(): Promise<void> {
  await stop();
  const binary = findBinary(config().get<string>("path") ?? "", process.env.PATH, vscode.workspace.workspaceFolders?.[0]?.uri.fsPath, bundled);
  if (!binary.found) {
    setState({ kind: "error", reason: binary.reason });
    log.error(binary.reason);
    const choice = await vscode.window.showErrorMessage(`redraft: ${binary.reason}`, "Open Settings");
    if (choice) await vscode.commands.executeCommand("workbench.action.openSettings", "redraft.path");
    return;
  }
  log.info(`starting ${binary.path} lsp`);
  const serverOptions: ServerOptions = {
    command: binary.path,
    args: ["lsp"],
    transport: TransportKind.stdio,
  };
  const busy = new BusyCounter((isBusy) => {
    if (state.kind === "ready" || state.kind === "busy") setState({ kind: isBusy ? "busy" : "ready" });
  });
  const clientOptions: LanguageClientOptions = {
    // Notebook cells too: the server takes notebooks (LSP 3.17's notebook sync), and reads a
    // cell among the others around it.
    documentSelector: [{ scheme: "file" }, { scheme: "untitled" }, { scheme: "vscode-notebook-cell" }],
    initializationOptions: serverSettings(config()),
    outputChannel: log,
    // A server that stops without being asked to (a crash, a kill) is restarted, and the user
    // is told; one that keeps stopping is left stopped with the reason shown. (`closed` is not
    // called for a stop the extension asked for.)
    errorHandler: {
      error: () => ({ action: ErrorAction.Continue }),
      closed: () => {
        const attempt = restarts.take();
        if (attempt === undefined) {
          const reason =
            `the server stopped unexpectedly ${restarts.max + 1} times within ${restarts.windowMs / 60_000} minutes; ` +
            `not restarting it (see the log, then run "redraft: Restart Server")`;
          log.error(reason);
          setState({ kind: "error", reason });
          void vscode.window.showErrorMessage(`redraft: ${reason}`, "Show Log").then((choice) => {
            if (choice) log.show();
          });
          return { action: CloseAction.DoNotRestart, handled: true };
        }
        const reason = `the server stopped unexpectedly; restarting it (${attempt} of ${restarts.max})`;
        log.warn(reason);
        setState({ kind: "loading", detail: reason });
        void vscode.window.showWarningMessage(`redraft: ${reason}`);
        return { action: CloseAction.Restart, handled: true };
      },
    },
    middleware: {
      provideInlineCompletionItems: (document, position, ctx, token, next) => {
        if (!enabled()) return undefined;
        return busy.around(async () => {
          const result = await next(document, position, ctx, token);
          const items = Array.isArray(result) ? result : result?.items;
          // An inline completion at the cursor wins over a next edit on its line.
          nextEdits?.noteInline(document, items && items.length > 0 ? position.line : undefined);
          return result;
        });
      },
    },
  };
  const lc = new LanguageClient("redraft", "redraft", serverOptions, clientOptions);
  const onState = lc.onDidChangeState(({ newState }) => {
    if (newState === State.Starting) setState({ kind: "loading", detail: "starting the server" });
    else if (newState === State.Running && state.kind === "loading" && state.detail === "starting the server") {
      setState({ kind: "ready" });
    } else if (newState === State.Stopped && state.kind !== "error") setState({ kind: "stopped" });
  });
  let inUse: boolean;
  try {
    inUse = await clients.start(lc, [onState, ...watchProgress(lc)]);
  } catch (error) {
    const reason = `could not start ${binary.path} lsp: ${error instanceof Error ? error.message : String(error)}`;
    setState({ kind: "error", reason });
    log.error(reason);
    return;
  }
  // Stopped or replaced (a restart) while it started: the state is the newer start's.
  if (!inUse) return;
  if (!lc.initializeResult?.capabilities.inlineCompletionProvider) {
    setState({ kind: "error", reason: "this redraft does not offer inline completion; update it" });
  }
}

/** Stops the server and disposes its client, one still starting included (once started). */
async function stop(): Promise<void> {
  await clients.stop();
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  bundled = context.asAbsolutePath(path.join("server", process.platform === "win32" ? "redraft.exe" : "redraft"));
  log = vscode.window.createOutputChannel("redraft", { log: true });
  statusItem = vscode.window.createStatusBarItem("redraft.status", vscode.StatusBarAlignment.Right, 100);
  statusItem.name = "redraft";
  context.subscriptions.push(log, statusItem);
  // The running client goes with the extension (deactivate stops it too).
  context.subscriptions.push({ dispose: () => void stop() });
  nextEdits = new NextEdits(
    () => clients.client,
    () => {
      // `enabled` already folds in `redraft.enable`.
      const settings = serverSettings(config()).nextEdit;
      return { enabled: settings.enabled, debounceMs: settings.debounceMs };
    },
    log,
  );
  context.subscriptions.push(nextEdits);
  void vscode.commands.executeCommand("setContext", VISIBLE_CONTEXT, false);

  context.subscriptions.push(
    vscode.commands.registerCommand("redraft.trigger", () =>
      vscode.commands.executeCommand("editor.action.inlineSuggest.trigger"),
    ),
    vscode.commands.registerCommand("redraft.toggle", async () => {
      await config().update("enable", !enabled(), vscode.ConfigurationTarget.Global);
    }),
    vscode.commands.registerCommand("redraft.chooseEffort", async () => {
      const current = config().get<string>("effort") ?? "medium";
      const choice = await vscode.window.showQuickPick(
        EFFORTS.map((effort) => ({
          label: effort,
          description: effort === current ? "current" : undefined,
        })),
        { placeHolder: "redraft effort: low is fastest, high is best" },
      );
      if (choice) await config().update("effort", choice.label, vscode.ConfigurationTarget.Global);
    }),
    vscode.commands.registerCommand("redraft.showLog", () => log.show()),
    vscode.commands.registerCommand("redraft.suggestNextEdit", () => nextEdits?.request("asked for")),
    vscode.commands.registerCommand("redraft.acceptNextEdit", () => nextEdits?.accept()),
    vscode.commands.registerCommand("redraft.dismissNextEdit", () => nextEdits?.dismiss()),
    vscode.commands.registerCommand("redraft.jumpToNextEdit", () => nextEdits?.jump()),
    vscode.commands.registerCommand("redraft.restart", async () => {
      restarts.reset();
      await start();
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (event.affectsConfiguration("redraft.path")) {
        await start();
        return;
      }
      if (event.affectsConfiguration("redraft.enable") || event.affectsConfiguration("redraft.nextEdit.enabled")) {
        if (!serverSettings(config()).nextEdit.enabled) nextEdits?.dismiss();
      }
      const client = clients.client;
      if (affectsServer((section) => event.affectsConfiguration(section)) && client?.isRunning()) {
        await client.sendNotification("workspace/didChangeConfiguration", {
          settings: { redraft: serverSettings(config()) },
        });
      }
      setState(state);
    }),
  );
  setState({ kind: "stopped" });
  await start();
}

export async function deactivate(): Promise<void> {
  await stop();
}
