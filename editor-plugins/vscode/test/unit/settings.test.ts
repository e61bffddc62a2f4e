// The mapping from VS Code settings to the server's configuration object.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { affectsServer, serverSettings, SettingsSource } from "../../src/settings";

function source(values: Record<string, unknown>): SettingsSource {
  return { get: <T>(key: string) => values[key] as T | undefined };
}

test("defaults match the server's own defaults", () => {
  assert.deepEqual(serverSettings(source({})), {
    model: null,
    device: "auto",
    effort: "medium",
    editReuse: 8,
    maxTokens: 64,
    contextTokens: null,
    languages: null,
    candidates: 3,
    minConfidence: null,
    logLevel: "info",
    streamSteps: false,
    backend: null,
    nextEdit: { enabled: true, debounceMs: 300, linesAbove: 3, linesBelow: 10, maxChange: 0.5, minConfidence: null },
  });
});

test("next-edit settings pass through, null maxChange (no limit) included", () => {
  const settings = serverSettings(
    source({
      "nextEdit.enabled": false,
      "nextEdit.debounceMs": 0,
      "nextEdit.linesAbove": 1,
      "nextEdit.linesBelow": 40,
      "nextEdit.maxChange": null,
    }),
  );
  assert.deepEqual(settings.nextEdit, { enabled: false, debounceMs: 0, linesAbove: 1, linesBelow: 40, maxChange: null, minConfidence: null });
  assert.equal(serverSettings(source({ "nextEdit.maxChange": 1.0 })).nextEdit.maxChange, 1.0);
  assert.equal(serverSettings(source({ "nextEdit.minConfidence": 0.4 })).nextEdit.minConfidence, 0.4);
});

test("user values pass through unchanged, for the server to validate", () => {
  const settings = serverSettings(
    source({
      model: "/models/dream",
      device: "cuda:1",
      effort: "high",
      maxTokens: 4096,
      contextTokens: 512,
      languages: ["rust", "python"],
      candidates: 5,
      minConfidence: 0.3,
      logLevel: "debug",
      streamSteps: true,
    }),
  );
  assert.equal(settings.minConfidence, 0.3);
  assert.equal(settings.model, "/models/dream");
  assert.equal(settings.device, "cuda:1");
  assert.equal(settings.effort, "high");
  // Out of the server's range on purpose: the server, not the extension, reports it.
  assert.equal(settings.maxTokens, 4096);
  assert.equal(settings.contextTokens, 512);
  assert.deepEqual(settings.languages, ["rust", "python"]);
  assert.equal(settings.candidates, 5);
  assert.equal(settings.logLevel, "debug");
  assert.equal(settings.streamSteps, true);
});

test("empty model, device and language list mean the defaults", () => {
  const settings = serverSettings(source({ model: "", device: "", languages: [] }));
  assert.equal(settings.model, null);
  assert.equal(settings.device, "auto");
  assert.equal(settings.languages, null);
});

test("only server settings trigger didChangeConfiguration", () => {
  assert.equal(affectsServer((s) => s === "redraft.effort"), true);
  assert.equal(affectsServer((s) => s === "redraft.device"), true);
  assert.equal(affectsServer((s) => s === "redraft.languages"), true);
  assert.equal(affectsServer((s) => s === "redraft.streamSteps"), true);
  assert.equal(affectsServer((s) => s === "redraft.nextEdit"), true);
  assert.equal(affectsServer((s) => s === "redraft.minConfidence"), true);
  assert.equal(affectsServer((s) => s === "redraft.editReuse"), true);
  assert.equal(affectsServer((s) => s === "redraft.backend"), true);
  assert.equal(affectsServer((s) => s === "redraft.path"), false);
  assert.equal(affectsServer((s) => s === "editor.fontSize"), false);
});

test("suggestions off turn the server's next edits off, and back on restore the user's value", () => {
  assert.equal(serverSettings(source({ enable: false })).nextEdit.enabled, false);
  assert.equal(serverSettings(source({ enable: false, "nextEdit.enabled": true })).nextEdit.enabled, false);
  assert.equal(serverSettings(source({ enable: true })).nextEdit.enabled, true);
  assert.equal(serverSettings(source({ enable: true, "nextEdit.enabled": false })).nextEdit.enabled, false);
  // Toggling suggestions is a server setting: the server is told.
  assert.equal(affectsServer((s) => s === "redraft.enable"), true);
});

test("backend and editReuse pass through", () => {
  assert.equal(serverSettings(source({ editReuse: "off" })).editReuse, "off");
  assert.equal(serverSettings(source({ editReuse: 0 })).editReuse, 0);
  assert.equal(serverSettings(source({ backend: "http://gpu-box:8000/v1" })).backend, "http://gpu-box:8000/v1");
  const backend = { url: "http://gpu-box:8000/v1", model: "Qwen/Qwen2.5-Coder-7B", apiKey: "k" };
  assert.deepEqual(serverSettings(source({ backend })).backend, backend);
  // An empty URL (the settings UI's "unset") is the local model.
  assert.equal(serverSettings(source({ backend: "" })).backend, null);
});
