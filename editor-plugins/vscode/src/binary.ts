// Finds the `redraft` binary the way a shell would, so a missing one is reported with a clear
// message before the language client tries (and fails opaquely) to spawn it.
import * as fs from "node:fs";
import * as path from "node:path";

export type BinaryLookup = { found: true; path: string } | { found: false; reason: string };

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * `setting` is a path (anything with a slash) or a name looked up on `envPath`; empty, the
 * server packaged inside the extension (`bundled`, from `scripts/package-vscode`) where there is
 * one, else `redraft` on `envPath`.
 */
export function findBinary(setting: string, envPath: string = process.env.PATH ?? "", cwd?: string, bundled?: string): BinaryLookup {
  const name = setting.trim();
  if (!name && bundled !== undefined && isExecutable(bundled)) return { found: true, path: bundled };
  if (name.includes("/") || name.includes("\\")) {
    const file = path.resolve(cwd ?? process.cwd(), name.replace(/^~(?=\/)/, process.env.HOME ?? "~"));
    return isExecutable(file)
      ? { found: true, path: file }
      : { found: false, reason: `redraft binary not found or not executable: ${file} (setting redraft.path)` };
  }
  const command = name || "redraft";
  for (const dir of envPath.split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, command))) {
      return { found: true, path: path.join(dir, command) };
    }
  }
  return {
    found: false,
    reason: `\`${command}\` is not on PATH: install redraft (cargo install --path cli), set redraft.path, or install the extension with the server inside (scripts/package-vscode)`,
  };
}
