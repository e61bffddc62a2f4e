// The server's settings from the extension's: the one place that knows how `redraft.*` in VS Code
// maps to the `initializationOptions` / `workspace/didChangeConfiguration` object of `redraft lsp`.
// No `vscode` import, so it is unit-tested under plain Node.

/** What `redraft lsp` accepts (camelCase keys; see the README's configuration section). */
export interface ServerSettings {
  model: string | null;
  device: string;
  effort: "low" | "medium" | "high";
  /** Tokens recomputed on each side of an edit when the kept cache is reused, or "off". */
  editReuse: number | "off";
  maxTokens: number;
  contextTokens: number | null;
  languages: string[] | null;
  candidates: number;
  /** An inline completion the model is less sure of (0 to 1) is not shown; null: the model's own bar. */
  minConfidence: number | null;
  logLevel: "error" | "warn" | "info" | "debug";
  streamSteps: boolean;
  /** A served model for inline completions: a URL or an object of `backend.*` keys; null: local. */
  backend: string | Record<string, unknown> | null;
  nextEdit: NextEditSettings;
}

/** The server's `nextEdit` object (`textDocument/copilotInlineEdit`). */
export interface NextEditSettings {
  enabled: boolean;
  /** The pause after an edit before a next edit is computed (and asked for); 0: only on request. */
  debounceMs: number;
  /** The editable region's lines above and below the cursor's line. */
  linesAbove: number;
  linesBelow: number;
  /** A rewrite changing more than this share of the region is no suggestion; null: no limit. */
  maxChange: number | null;
  /** A rewrite the model is less sure of (0 to 1) is no suggestion; null: the model's own bar. */
  minConfidence: number | null;
}

/** Reads one setting; `vscode.WorkspaceConfiguration` fits, and so does a plain map in tests. */
export interface SettingsSource {
  get<T>(key: string): T | undefined;
}

export const EFFORTS = ["low", "medium", "high"] as const;

/**
 * Builds the object sent to the server. Values are passed through as the user set them: the
 * server validates and reports bad ones (`window/showMessage`), so the rules live in one place.
 * Empty strings and empty lists mean "the default", as the settings UI cannot express null.
 * With suggestions off (`redraft.enable` false) next edits are off too, so the server does not
 * compute next edits nobody is shown; back on, the user's `nextEdit.enabled` is sent again.
 */
export function serverSettings(config: SettingsSource): ServerSettings {
  const model = config.get<string | null>("model");
  const languages = config.get<string[] | null>("languages");
  const maxChange = config.get<number | null>("nextEdit.maxChange");
  const backend = config.get<ServerSettings["backend"]>("backend");
  const suggestionsOn = config.get<boolean>("enable") ?? true;
  return {
    model: model ? model : null,
    device: config.get<string>("device") || "auto",
    effort: config.get<ServerSettings["effort"]>("effort") ?? "medium",
    editReuse: config.get<ServerSettings["editReuse"]>("editReuse") ?? 8,
    maxTokens: config.get<number>("maxTokens") ?? 64,
    contextTokens: config.get<number | null>("contextTokens") ?? null,
    languages: languages && languages.length > 0 ? languages : null,
    candidates: config.get<number>("candidates") ?? 3,
    minConfidence: config.get<number | null>("minConfidence") ?? null,
    logLevel: config.get<ServerSettings["logLevel"]>("logLevel") ?? "info",
    streamSteps: config.get<boolean>("streamSteps") ?? false,
    backend: backend ? backend : null,
    nextEdit: {
      enabled: suggestionsOn && (config.get<boolean>("nextEdit.enabled") ?? true),
      debounceMs: config.get<number>("nextEdit.debounceMs") ?? 300,
      linesAbove: config.get<number>("nextEdit.linesAbove") ?? 3,
      linesBelow: config.get<number>("nextEdit.linesBelow") ?? 10,
      // null is the user's "no limit" (the server's own meaning): only a missing value falls
      // back to the default.
      maxChange: maxChange === undefined ? 0.5 : maxChange,
      minConfidence: config.get<number | null>("nextEdit.minConfidence") ?? null,
    },
  };
}

/** Whether a change to `redraft.<key>` must be sent to the server (`enable` turns its next
 * edits on and off). */
export function affectsServer(changed: (section: string) => boolean): boolean {
  return [
    "enable",
    "model",
    "device",
    "effort",
    "editReuse",
    "maxTokens",
    "contextTokens",
    "languages",
    "candidates",
    "minConfidence",
    "streamSteps",
    "logLevel",
    "backend",
    "nextEdit",
  ].some((key) => changed(`redraft.${key}`));
}
