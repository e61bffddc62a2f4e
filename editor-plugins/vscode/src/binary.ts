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

/** `setting` is a path (anything with a slash) or a name looked up on `envPath`. */
export function findBinary(setting: string, envPath: string = process.env.PATH ?? "", cwd?: string): BinaryLookup {
  const name = setting.trim() || "redraft";
  if (name.includes("/") || name.includes("\\")) {
    const file = path.resolve(cwd ?? process.cwd(), name.replace(/^~(?=\/)/, process.env.HOME ?? "~"));
    return isExecutable(file)
      ? { found: true, path: file }
      : { found: false, reason: `redraft binary not found or not executable: ${file} (setting redraft.path)` };
  }
  for (const dir of envPath.split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, name))) {
      return { found: true, path: path.join(dir, name) };
    }
  }
  return {
    found: false,
    reason: `\`${name}\` is not on PATH: install redraft (cargo install --path cli) or set redraft.path`,
  };
}
