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
    maxTokens: 32,
    contextTokens: null,
    languages: null,
    candidates: 3,
    logLevel: "info",
    streamSteps: false,
  });
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
      logLevel: "debug",
      streamSteps: true,
    }),
  );
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
  assert.equal(affectsServer((s) => s === "redraft.enable"), false);
  assert.equal(affectsServer((s) => s === "redraft.path"), false);
  assert.equal(affectsServer((s) => s === "editor.fontSize"), false);
});
