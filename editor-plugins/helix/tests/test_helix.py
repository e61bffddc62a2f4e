"""Helix itself, in a terminal, against the real `redraft lsp` configured by the shipped
`editor-plugins/helix/languages.toml`: the user types the start of a statement, Helix asks
redraft for completions (it has no inline completions), shows redraft's item in its menu, Tab
selects it and Enter accepts it, and the saved file holds what the item's text edit says.

Helix comes from no package registry, so this runs only where `REDRAFT_HELIX` names an `hx`
(`scripts/test-helix` builds one from a Helix source tree); scripts/test-editors does not run it.
The default model writes nonsense, so the expectations are the server's own items, as a recorder
between Helix and the server saw them (`editor-plugins/tests/lsp_recorder.py`), never fixed text.
"""

import codecs
import json
import os
import pty
import select
import shutil
import signal
import struct
import sys
import termios
import threading
import time
import tomllib
import fcntl
from pathlib import Path

import pytest

pyte = pytest.importorskip("pyte", reason="pyte draws Helix's screen: scripts/test-helix installs it")

HERE = Path(__file__).resolve().parent
LANGUAGES = HERE.parent / "languages.toml"
RECORDER = HERE.parents[1] / "tests" / "lsp_recorder.py"
sys.path.insert(0, str(HERE.parents[1] / "nvim" / "tests"))
from test_nvim import SOURCE  # noqa: E402  (the same file the Neovim tests complete in)

HX = os.environ.get("REDRAFT_HELIX", "")
REDRAFT = os.environ.get("REDRAFT_BIN", "")
ROWS, COLUMNS = 40, 120
TIMEOUT_S = 120
# Typed on the empty line in `main`, each ending inside a word (the menu filters on it); the
# model may suggest nothing at one, and then the next is tried.
PLACES = ["    let total = counts.va", "    for (word, n) in cou", '    println!("{}", cou']
LINE = SOURCE.splitlines().index('    let counts = word_counts("a b a");') + 1  # 0-based: the next


class Terminal(pyte.Screen):
    """pyte's screen, answering what Helix asks the terminal (its cursor position, the device's
    attributes) through the pseudo-terminal as a terminal would."""

    def __init__(self, columns, rows, answer):
        super().__init__(columns, rows)
        self.answer = answer

    def write_process_input(self, data):
        self.answer(data)

    def report_device_status(self, mode, **kwargs):
        # `CSI ? 6 n` (pyte reads the `?` as `private`) asks the same as `CSI 6 n`.
        super().report_device_status(mode)


class Helix:
    """`hx` on a pseudo-terminal, its screen drawn by pyte as it paints."""

    def __init__(self, tmp_path, path, servers_for_rust=("redraft",)):
        servers_for_rust = list(servers_for_rust)
        config = tmp_path / "config" / "helix"
        config.mkdir(parents=True)
        self.log = tmp_path / "lsp.jsonl"
        # The shipped file, with the server started through the recorder.
        languages = LANGUAGES.read_text()
        recorded = json.dumps([str(RECORDER), "--log", str(self.log), "--", REDRAFT, "lsp"])
        languages = languages.replace('command = "redraft"\nargs = ["lsp"]', f"command = {json.dumps(sys.executable)}\nargs = {recorded}")
        assert str(RECORDER) in languages, "the shipped languages.toml no longer starts `redraft lsp`"
        # The servers asked for, whatever others this machine has; no formatting on save, so the
        # file holds the item's text as accepted.
        servers = 'language-servers = ["rust-analyzer", "redraft"]'
        assert servers in languages, "the shipped languages.toml no longer adds redraft for Rust"
        languages = languages.replace(
            servers, f"language-servers = {json.dumps(servers_for_rust)}\nauto-format = false"
        )
        (config / "languages.toml").write_text(languages)
        # Only the servers' items in the menu (no word completion), asked for at once, the line
        # as typed (no auto-pairs after the cursor), and, in a Helix with workspace trust (after
        # 25.07.1; a release rejects the table), no trust prompt for the temporary workspace
        # (language servers start in it either way).
        trust = "[editor.workspace-trust]\nprompt = false\n" if has_workspace_trust() else ""
        (config / "config.toml").write_text(
            "[editor]\ncompletion-timeout = 5\nauto-pairs = false\n"
            "[editor.word-completion]\nenable = false\n" + trust
        )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "TERM": "xterm-256color",
            "COLORTERM": "truecolor",
        }
        if os.environ.get("HELIX_RUNTIME"):
            env["HELIX_RUNTIME"] = os.environ["HELIX_RUNTIME"]
        self.screen = Terminal(COLUMNS, ROWS, lambda data: os.write(self.fd, data.encode()))
        self.stream = pyte.Stream(self.screen)
        self.lock = threading.Lock()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.chdir(path.parent)
                os.execve(HX, [HX, str(path)], env)
            finally:
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while True:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.5)
                if not ready:
                    continue
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.stream.feed(decoder.decode(data))

    def text(self):
        with self.lock:
            return "\n".join(self.screen.display)

    def keys(self, keys, pause=0.15):
        os.write(self.fd, keys.encode())
        time.sleep(pause)

    def wait_screen(self, what, predicate, timeout=TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.text()):
                return
            time.sleep(0.05)
        pytest.fail(f"timed out waiting for {what}; the screen:\n{self.text()}\n{self.log_tail()}")

    def messages(self):
        if not self.log.exists():
            return []
        # The recorder may be writing the last line: only whole lines are read.
        lines = self.log.read_text().split("\n")[:-1]
        return [json.loads(line) for line in lines if line.strip()]

    def log_tail(self):
        return "the last messages:\n" + "\n".join(json.dumps(m)[:300] for m in self.messages()[-8:])

    def wait_messages(self, what, predicate, timeout=TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = predicate(self.messages())
            if found is not None:
                return found
            time.sleep(0.05)
        pytest.fail(f"timed out waiting for {what}; the screen:\n{self.text()}\n{self.log_tail()}")

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        # The reader ends at the closed terminal; joined before the descriptor can be reused.
        self.reader.join(timeout=5)
        os.close(self.fd)


def answer_at(messages, character):
    """The server's answer to the last textDocument/completion asked at `character` of the line,
    once it came; its items."""
    asked = [
        m["to_server"]["id"]
        for m in messages
        if m.get("to_server", {}).get("method") == "textDocument/completion"
        and m["to_server"]["params"]["position"] == {"line": LINE, "character": character}
    ]
    if not asked:
        return None
    for m in messages:
        reply = m.get("from_server", {})
        if reply.get("id") == asked[-1] and "method" not in reply:
            if "error" in reply:
                pytest.fail(f"textDocument/completion at character {character} failed: {reply}")
            result = reply.get("result") or {}
            return result.get("items", []) if isinstance(result, dict) else result
    return None


def applied(typed, item):
    """The file after `item`'s text edit on the line where `typed` was typed."""
    edit = item["textEdit"]
    assert edit["range"]["start"]["line"] == LINE and edit["range"]["end"]["line"] == LINE, edit
    start, end = edit["range"]["start"]["character"], edit["range"]["end"]["character"]
    lines = SOURCE.split("\n")
    lines[LINE] = typed[:start] + edit["newText"] + typed[end:]
    return "\n".join(lines)


# The kinds Helix writes at the end of a menu row (an LSP CompletionItemKind, lowercased).
KINDS = {
    "text", "method", "function", "constructor", "field", "variable", "class", "interface",
    "module", "property", "unit", "value", "enum", "keyword", "snippet", "color", "file",
    "reference", "folder", "enum_member", "constant", "struct", "event", "operator", "type_param",
}


def kind(row):
    """The kind a menu row ends with (redraft's items are `text`), or `None` for another row."""
    words = row.split()
    return words[-1] if words and words[-1] in KINDS else None


def has_workspace_trust():
    """Whether this hx knows `[editor.workspace-trust]` (Helix after 25.07.1)."""
    with open(HX, "rb") as binary:
        return b"workspace-trust" in binary.read()


def menu_rows(screen, rows=12):
    """The screen's rows under the typed line: Helix draws its menu there, over the file's."""
    return [row.strip() for row in screen.splitlines()[LINE + 1 : LINE + 1 + rows]]


@pytest.mark.parametrize("beside", [None, "rust-analyzer"], ids=["alone", "beside-rust-analyzer"])
def test_helix_shows_redrafts_item_first_in_its_menu_and_applies_its_edit(tmp_path, beside):
    if not HX or not REDRAFT:
        pytest.skip("REDRAFT_HELIX and REDRAFT_BIN name hx and redraft: run scripts/test-helix")
    if beside and not shutil.which(beside):
        pytest.skip(f"no {beside} on PATH (scripts/test-helix puts the toolchain's there)")
    with LANGUAGES.open("rb") as file:
        assert tomllib.load(file)["language-server"]["redraft"]["args"] == ["lsp"]
    for n, typed in enumerate(PLACES):
        project = tmp_path / f"place{n}"
        (project / "src").mkdir(parents=True)
        # A crate, so rust-analyzer has a workspace to load.
        (project / "Cargo.toml").write_text('[package]\nname = "place"\nversion = "0.1.0"\nedition = "2021"\n')
        path = project / "src" / "main.rs"
        path.write_text(SOURCE)
        helix = Helix(project, path, servers_for_rust=[beside, "redraft"] if beside else ["redraft"])
        try:
            helix.wait_messages(
                "redraft to be initialized",
                lambda ms: True if any(m.get("to_server", {}).get("method") == "initialized" for m in ms) else None,
            )
            helix.wait_screen("the file to be shown", lambda screen: "fn word_counts" in screen)
            if beside:
                # Its diagnostic on the unused `counts` says it has loaded the crate.
                helix.wait_screen(f"{beside} to have loaded the crate", lambda screen: "unused variable" in screen)
            helix.keys(f":{LINE + 1}\r")
            helix.keys("i")
            helix.keys(typed, pause=0.5)
            items = helix.wait_messages(f"the answer for {typed!r}", lambda ms: answer_at(ms, len(typed)))
            print(f"{typed!r}: " + ", ".join(repr(item["textEdit"]["newText"]) for item in items))
            if not items:
                continue
            for rank, item in enumerate(items):
                assert (item["detail"], item["sortText"], item.get("preselect")) == ("redraft", f"!{rank}", rank == 0), item
            # Every item is in the menu, shown by its label (its first line, up to 60 characters),
            # beside rust-analyzer's methods where it runs.
            labels = [item["label"] for item in items]
            helix.wait_screen(
                f"the menu to show {labels}" + (f" and {beside}'s methods" if beside else ""),
                lambda screen: all(label in screen for label in labels)
                and (not beside or any(kind(row) not in (None, "text") for row in menu_rows(screen))),
            )
            # The model's first suggestion heads the menu (it is preselected), whatever matches
            # what was typed better; Tab selects it, Enter accepts it.
            rows = menu_rows(helix.text())
            assert labels[0] in rows[0] and kind(rows[0]) == "text", f"the menu's first row is not redraft's first item {labels[0]!r}:\n" + "\n".join(rows)
            helix.keys("\t")
            helix.keys("\r", pause=0.3)
            helix.keys("\x1b", pause=0.3)
            helix.keys(":w\r")
            expected = applied(typed, items[0])
            deadline = time.monotonic() + 10
            while path.read_text() != expected and time.monotonic() < deadline:
                time.sleep(0.05)
            assert path.read_text() == expected, f"the file after accepting {items[0]}:\n{path.read_text()}"
            return
        finally:
            helix.close()
    pytest.fail(f"the model suggested nothing Helix could show at any of {PLACES}")
