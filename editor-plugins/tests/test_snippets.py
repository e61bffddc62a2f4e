"""The documented Helix and Emacs configurations parse, and name only settings the server knows.

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
REPO = PLUGINS.parent
HELIX = PLUGINS / "helix" / "languages.toml"
EMACS = PLUGINS / "emacs" / "redraft.el"
README = PLUGINS / "README.md"
SERVER_CONFIG = REPO / "lsp-server" / "src" / "lsp" / "config.rs"


def server_setting_keys():
    """The keys `redraft lsp` accepts, read from its settings code (the `match key` arms)."""
    source = SERVER_CONFIG.read_text()
    body = source[source.index("match key {") :]
    keys = set(re.findall(r'^\s*"([A-Za-z]+)" =>', body, re.MULTILINE))
    assert {"model", "effort", "maxTokens", "languages"} <= keys, keys
    return keys


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


def test_helix_languages_toml_adds_redraft_next_to_each_languages_server():
    config = tomllib.loads(HELIX.read_text())
    server = config["language-server"]["redraft"]
    assert server["command"] == "redraft"
    assert server["args"] == ["lsp"]
    unknown = set(server.get("config", {})) - server_setting_keys()
    assert not unknown, f"settings redraft lsp does not know: {unknown}"
    assert config["language"], "no [[language]] entry"
    for language in config["language"]:
        servers = language["language-servers"]
        assert servers[-1] == "redraft", language
        assert len(servers) >= 2, f"{language['name']}: redraft must not replace the language's own server"


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


def test_emacs_snippet_loads_and_its_settings_are_server_settings():
    stdout, stderr = run_emacs(
        f"(load {json.dumps(str(EMACS))} nil t)",
        "(require 'json)",
        "(princ (json-encode (list :feature (featurep 'redraft) :command redraft-command"
        " :settings redraft-settings :key (key-binding (kbd \"M-\\\\\")))))",
    )
    loaded = json.loads(stdout)
    assert loaded["feature"] is True, stderr
    assert loaded["command"] == ["redraft", "lsp"]
    assert loaded["key"] == "lsp-inline-completion-display"
    unknown = set(loaded["settings"]) - server_setting_keys()
    assert not unknown, f"settings redraft lsp does not know: {unknown}"
