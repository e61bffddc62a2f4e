"""The documented Helix and Emacs configurations parse, and the real server accepts their settings.

Both live as files (editor-plugins/helix/languages.toml, editor-plugins/emacs/redraft.el) and as
blocks in editor-plugins/README.md; the README's blocks must be the files, so the docs cannot
drift from what is tested. TOML is parsed with tomllib; Emacs Lisp is read form by form and then
loaded by a real `emacs --batch` (lsp-mode itself is not needed: its parts run after it loads).
"""

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parents[1]
HELIX = PLUGINS / "helix" / "languages.toml"
EMACS = PLUGINS / "emacs" / "redraft.el"
README = PLUGINS / "README.md"


def server_problems(settings):
    """What the real `redraft lsp` says about `settings` given as initializationOptions.

    The server reports every key it ignores on stderr while it answers `initialize` (before the
    response), so reading stderr after a clean shutdown sees all of them; no waiting involved.
    """
    binary = os.environ.get("REDRAFT_BIN")
    if not binary:
        pytest.fail("REDRAFT_BIN not set: run the editor tests through scripts/test-editors")

    def frame(message):
        body = json.dumps(message).encode()
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": settings},
    }
    rest = [
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None},
        {"jsonrpc": "2.0", "method": "exit", "params": None},
    ]
    server = subprocess.Popen([binary, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        server.stdin.write(frame(initialize))
        server.stdin.flush()
        # The rest only after the initialize response: the server may handle messages concurrently.
        length = None
        while (header := server.stdout.readline().strip()) != b"":
            if header.lower().startswith(b"content-length:"):
                length = int(header.split(b":")[1])
        assert length, "no initialize response"
        response = json.loads(server.stdout.read(length))
        assert "result" in response, response
        _, stderr = server.communicate(b"".join(frame(m) for m in rest), timeout=60)
    finally:
        server.kill()
    stderr = stderr.decode(errors="replace")
    assert server.returncode == 0, stderr
    return [line for line in stderr.splitlines() if "setting `" in line]


def test_the_server_check_catches_an_unknown_setting():
    problems = server_problems({"colour": "blue", "effort": "medium"})
    assert len(problems) == 1 and "`colour`" in problems[0], problems


def readme_blocks(language):
    text = README.read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


def emacs():
    path = os.environ.get("REDRAFT_EMACS") or shutil.which("emacs")
    if not path:
        pytest.fail("emacs not found: run scripts/setup-editors (it installs Debian's emacs-nox)")
    return path


def test_readme_shows_exactly_the_tested_files():
    assert readme_blocks("toml") == [HELIX.read_text()]
    assert readme_blocks("elisp") == [EMACS.read_text()]


# Helix 25.07's default `language-servers` (its languages.toml) for the languages the file names.
HELIX_DEFAULT_SERVERS = {
    "rust": ["rust-analyzer"],
    "python": ["ty", "ruff", "jedi", "pylsp"],
}


def test_helix_languages_toml_adds_redraft_next_to_each_languages_server():
    config = tomllib.loads(HELIX.read_text())
    server = config["language-server"]["redraft"]
    assert server["command"] == "redraft"
    assert server["args"] == ["lsp"]
    assert server.get("config"), "the documented configuration sets nothing"
    assert server_problems(server["config"]) == []
    assert config["language"], "no [[language]] entry"
    for language in config["language"]:
        servers = language["language-servers"]
        assert servers[-1] == "redraft", language
        # Helix replaces the default list with this one: it must be the default plus redraft.
        assert servers[:-1] == HELIX_DEFAULT_SERVERS[language["name"]], (
            f"{language['name']}: list Helix's own servers ({HELIX_DEFAULT_SERVERS[language['name']]}) before redraft"
        )


def run_emacs(*forms):
    args = [emacs(), "--batch", "-Q"]
    for form in forms:
        args += ["--eval", form]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout, result.stderr


def test_emacs_snippet_reads_as_balanced_forms():
    stdout, _ = run_emacs(
        f"""(with-temp-buffer
              (insert-file-contents {json.dumps(str(EMACS))})
              (emacs-lisp-mode)
              (check-parens)
              (goto-char (point-min))
              (let ((count 0))
                (condition-case nil
                    (while t (read (current-buffer)) (setq count (1+ count)))
                  (end-of-file nil))
                (princ (format "forms %d\\n" count))))"""
    )
    assert int(re.search(r"forms (\d+)", stdout).group(1)) >= 6, stdout


# Just enough of lsp-mode for the snippet's `with-eval-after-load' forms to run.
LSP_MODE_STUB = """(progn
  (defvar lsp-mode-map (make-sparse-keymap))
  (defun lsp-register-client (&rest _))
  (defun make-lsp-client (&rest _))
  (defun lsp-stdio-connection (&rest _))
  (provide 'lsp-mode))"""


# lsp-mode 10.0.0's overlay keymap (lsp-inline-completion.el), as far as the keys go: <tab>
# cycles, and its default binding cancels the suggestion on any other key (then runs it).
LSP_INLINE_COMPLETION_STUB = """(progn
  (defvar lsp-inline-completion-active-map
    (let ((map (make-sparse-keymap)))
      (define-key map (kbd "<tab>") #'lsp-inline-completion-next)
      (define-key map (kbd "C-g") #'lsp-inline-completion-cancel)
      (define-key map [t] #'lsp-inline-completion-cancel-with-input)
      map))
  (provide 'lsp-inline-completion))"""


def test_emacs_tab_accepts_in_a_graphical_and_a_terminal_emacs():
    # A graphical Emacs reads the Tab key as <tab>; a terminal sends TAB (C-i). Each is looked
    # up as the overlay's keymap would be while a suggestion is shown, default binding included.
    stdout, stderr = run_emacs(
        f"(load {json.dumps(str(EMACS))} nil t)",
        LSP_MODE_STUB,
        LSP_INLINE_COMPLETION_STUB,
        "(require 'json)",
        "(princ (json-encode (list"
        " :gui (lookup-key lsp-inline-completion-active-map [tab] t)"
        " :terminal (lookup-key lsp-inline-completion-active-map [?\\t] t)"
        " :next (lookup-key lsp-inline-completion-active-map (kbd \"M-]\") t)"
        " :other (lookup-key lsp-inline-completion-active-map (kbd \"a\") t))))",
    )
    keys = json.loads(stdout)
    assert keys["gui"] == "lsp-inline-completion-accept", (keys, stderr)
    assert keys["terminal"] == "lsp-inline-completion-accept", (keys, stderr)
    assert keys["next"] == "lsp-inline-completion-next", keys
    # Any other key still cancels, as lsp-mode has it.
    assert keys["other"] == "lsp-inline-completion-cancel-with-input", keys


def test_emacs_snippet_loads_and_its_settings_are_server_settings():
    stdout, stderr = run_emacs(
        f"(load {json.dumps(str(EMACS))} nil t)",
        LSP_MODE_STUB,
        "(require 'json)",
        "(princ (json-encode (list :feature (featurep 'redraft) :command redraft-command"
        " :settings redraft-settings :global (key-binding (kbd \"M-\\\\\"))"
        " :lsp (lookup-key lsp-mode-map (kbd \"M-\\\\\")))))",
    )
    loaded = json.loads(stdout)
    assert loaded["feature"] is True, stderr
    assert loaded["command"] == ["redraft", "lsp"]
    # Bound where lsp-mode is on; every other buffer keeps Emacs's own M-\.
    assert loaded["lsp"] == "lsp-inline-completion-display"
    assert loaded["global"] == "delete-horizontal-space"
    assert server_problems(loaded["settings"]) == []
