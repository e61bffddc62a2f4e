"""The settings the editors document and send are the server's: every server setting the VS
Code extension contributes (package.json) is in the README's settings table and back, and the
real `redraft lsp` accepts all of them at their defaults (next edits' `nextEdit.*` included, as
the nested object the extension sends), so a renamed setting on either side fails here.
"""

import json
import re
from pathlib import Path

from test_snippets import README, server_problems

PACKAGE = Path(__file__).resolve().parents[1] / "vscode" / "package.json"
# The extension's own settings, never sent to the server.
CLIENT_ONLY = {"path", "enable"}


def vscode_server_settings():
    """{key: default} for every `redraft.<key>` the server gets ("nextEdit.debounceMs" dotted)."""
    properties = json.loads(PACKAGE.read_text())["contributes"]["configuration"]["properties"]
    settings = {}
    for name, spec in properties.items():
        key = name.removeprefix("redraft.")
        if key not in CLIENT_ONLY:
            settings[key] = spec.get("default")
    return settings


def readme_settings():
    """The keys in the first column of the README's settings table."""
    table = README.read_text().split("## Settings (every editor)", 1)[1].split("\n## ", 1)[0]
    keys = set()
    for row in table.splitlines():
        if row.startswith("| `"):
            keys.update(re.findall(r"`([A-Za-z.]+)`", row.split("|")[1]))
    return keys


def nested(settings):
    """The object the extension sends (src/settings.ts): dotted keys as nested objects."""
    out = {}
    for key, value in settings.items():
        head, _, rest = key.partition(".")
        if rest:
            out.setdefault(head, {})[rest] = value
        else:
            out[key] = value
    return out


def test_readme_table_and_vscode_settings_name_the_same_server_settings():
    documented = readme_settings()
    contributed = set(vscode_server_settings())
    # The table also names the `nextEdit` object itself, and `completionItems`, which VS Code
    # has no setting for: it shows the suggestion as ghost text, and the server's "auto" leaves
    # the menu to clients without inline completions.
    assert documented - {"nextEdit", "completionItems"} == contributed


def test_the_server_accepts_every_vscode_setting_at_its_default():
    settings = nested(vscode_server_settings())
    assert "nextEdit" in settings and settings["nextEdit"]["enabled"] is True
    # null means "the server's default" for these (the extension sends null as given).
    assert server_problems(settings) == []


def test_the_server_accepts_the_next_edit_values_the_docs_suggest():
    # No limit on the change (the real-editor tests' setting), asked for only by key, or off.
    assert server_problems({"nextEdit": {"maxChange": None, "debounceMs": 0}}) == []
    assert server_problems({"nextEdit": {"maxChange": 1.0}}) == []
    assert server_problems({"nextEdit": False}) == []
    assert server_problems({"nextEdit.debounceMs": 500}) == []
