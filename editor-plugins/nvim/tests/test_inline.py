"""Inline completion in real headless Neovim 0.12 against the scripted fake server
(`editor-plugins/tests/fake_nextedit_lsp.py`), whose items and delays are known, for what the
real model cannot be made to do on cue: an item whose range reaches past the cursor, an answer
that arrives after the user typed on, text typed after the answer, keys pressed on another line.

Both displays (the native `vim.lsp.inline_completion` and the extmark fallback) must leave the
line exactly as the server's item says, or, once the buffer no longer agrees with the item,
drop it and let the key do what it did before.
"""

import json

import pytest

from test_nextedit import TIMEOUT_MS, fake, open_file, received, sent, set_script
from test_nvim import start, wait_lua

DISPLAYS = pytest.mark.parametrize("native", [True, False], ids=["native", "extmarks"])
# `call(a, |)`: the server's item writes the closing bracket again, so its range covers the `)`
# after the cursor (lsp-server/src/inline.rs `response`).
CALL = '    call(a, "😀", )'
CURSOR = len(CALL.encode()) - 1  # byte column of the cursor, before `)`
CHARACTER = len(CALL[:-1].encode("utf-16-le")) // 2  # the same, in the fake's UTF-16


def covering(text):
    """An item at the cursor whose range replaces the `)` after it."""
    return {"insertText": text, "range": {"start": {"line": 1, "character": CHARACTER}, "end": {"line": 1, "character": CHARACTER + 1}}}


def namespace(native):
    return "nvim.lsp.inline_completion" if native else "redraft.ghost"


def ghost(nvim, native):
    """[(row, col, first line of the ghost text)] drawn by the display."""
    marks = nvim.exec_lua(
        "return vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace(...), 0, -1, { details = true })",
        namespace(native),
    )
    return [(m[1], m[2], "".join(c[0] for c in m[3].get("virt_text", []))) for m in marks]


def wait_ghost(nvim, native):
    wait_lua(
        nvim,
        TIMEOUT_MS,
        "return #vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace(args[1]), 0, -1, {}) > 0",
        "the inline completion to be shown",
        namespace(native),
    )


def literal_tabs(nvim):
    """A Tab that goes through inserts a tab character (Rust's ftplugin would expand it)."""
    nvim.command("setlocal noexpandtab softtabstop=0")


def start_at_call(tmp_path, native, item, **script):
    """Neovim in insert mode before the `)` of CALL, the fake's `item` shown."""
    cmd, log = fake(tmp_path, edits=[], inline=[item], **script)
    nvim = start(tmp_path, native=native, cmd=cmd, settings={"nextEdit": False})
    open_file(nvim, tmp_path, source=f"fn main() {{\n{CALL}\n}}\n")
    literal_tabs(nvim)
    nvim.current.window.cursor = (2, CURSOR)
    # Insert mode at the cursor; the move asks for a completion.
    nvim.input("i<Left><Right>")
    wait_ghost(nvim, native)
    return nvim, log


def wait_line(nvim, row, expected, what):
    wait_lua(nvim, TIMEOUT_MS, "return vim.api.nvim_buf_get_lines(0, args[1], args[1] + 1, true)[1] == args[2]", what, row, expected)


def settle(nvim, ms=300):
    """Lets Neovim run its loop (deferred accepts, scheduled callbacks) for `ms`."""
    nvim.exec_lua(f"vim.wait({ms})")


@DISPLAYS
@pytest.mark.parametrize(
    ("keys", "line"),
    [
        # Typed a character the item does not start with: the Tab is a Tab.
        ("z<Tab>", CALL[:-1] + "z\t)"),
        # Left the line: the item is not applied on the line above.
        ("<Down><Tab>", CALL),
        # Moved past the `)` the item replaces.
        ("<End><Tab>", CALL + "\t"),
    ],
    ids=["typed-another-character", "another-line", "past-the-range"],
)
def test_tab_lets_the_key_through_once_the_buffer_no_longer_agrees(tmp_path, native, keys, line):
    nvim, _ = start_at_call(tmp_path, native, covering("b)"))
    try:
        # Later answers come too late to matter: the keys act on the item shown now.
        set_script(tmp_path, edits=[], inline=[covering("b)")], inline_delay_ms=5000)
        nvim.input(keys)
        wait_line(nvim, 1, line, f"{keys} to leave line 2 as {line!r}")
        settle(nvim)
        assert nvim.current.buffer[1] == line
        assert ghost(nvim, native) == []
        assert nvim.exec_lua("return require('redraft').inline_visible()") is False
    finally:
        nvim.close()


@DISPLAYS
def test_text_typed_after_the_answer_stays_inside_the_items_range(tmp_path, native):
    nvim, _ = start_at_call(tmp_path, native, covering("bc)"))
    try:
        set_script(tmp_path, edits=[], inline=[covering("bc)")], inline_delay_ms=5000)
        # `b` agrees with the item: it stays shown, and its range still ends after the `)`.
        nvim.input("b")
        wait_line(nvim, 1, CALL[:-1] + "b)", "the typed b")
        assert nvim.exec_lua("return require('redraft').inline_visible()") is True
        nvim.input("<Tab>")
        wait_line(nvim, 1, CALL[:-1] + "bc)", "the item accepted over the typed b and the `)`")
        settle(nvim)
        assert nvim.current.buffer[1] == CALL[:-1] + "bc)"
        assert nvim.current.window.cursor == (2, CURSOR + 3)
    finally:
        nvim.close()


@DISPLAYS
def test_an_answer_for_text_typed_over_is_never_accepted(tmp_path, native):
    # The request goes out at `pri`; the answer, for that text, comes after `ntl` was typed. Its
    # range (`pri`) no longer covers what it meant to replace: it must not be shown or accepted.
    item = {"insertText": 'println!("a");', "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 7}}}
    cmd, log = fake(tmp_path, edits=[], inline=[item], inline_delay_ms=1500)
    nvim = start(tmp_path, native=native, cmd=cmd, settings={"nextEdit": False})
    try:
        open_file(nvim, tmp_path, source="fn main() {\n    \n}\n")
        literal_tabs(nvim)
        nvim.current.window.cursor = (2, 4)
        nvim.input("Apri")
        for _ in range(TIMEOUT_MS // 50):
            if received(log, "textDocument/inlineCompletion"):
                break
            settle(nvim, 50)
        requests = received(log, "textDocument/inlineCompletion")
        assert requests and requests[0]["params"]["position"]["character"] == 7, requests
        # The answers to the requests the typing makes come too late to matter.
        set_script(tmp_path, edits=[], inline=[item], inline_delay_ms=10000)
        nvim.input("ntl")
        wait_line(nvim, 1, "    printl", "the typing")
        # The first answer arrives.
        for _ in range(TIMEOUT_MS // 50):
            if sent(log, "textDocument/inlineCompletion"):
                break
            settle(nvim, 50)
        settle(nvim, 200)
        assert ghost(nvim, native) == []
        nvim.input("<Tab>")
        wait_line(nvim, 1, "    printl\t", "the Tab to go through")
    finally:
        nvim.close()


@DISPLAYS
@pytest.mark.parametrize(
    ("text", "key", "drawn", "line"),
    [
        ("b)", "<Tab>", "b", CALL[:-1] + "b)"),
        # The first line is the whole item: it replaces the `)` as the whole item does.
        ("b)", "<M-C-Right>", "b", CALL[:-1] + "b)"),
        # The last word is the rest of the item: the same.
        (")", "<M-Right>", "", CALL),
        # A word that does not end the first line is inserted, the `)` kept for the rest.
        ("b)", "<M-Right>", "b", CALL[:-1] + "b)"),
    ],
    ids=["all", "line", "last-word", "first-word"],
)
def test_partial_accept_replaces_the_range_end_the_item_covers(tmp_path, native, text, key, drawn, line):
    nvim, _ = start_at_call(tmp_path, native, covering(text))
    try:
        if not native:
            # The display reads as the line will: the `)` is drawn once.
            assert [g[2] for g in ghost(nvim, native)] in ([drawn], []), ghost(nvim, native)
        set_script(tmp_path, edits=[], inline=[covering(text)], inline_delay_ms=5000)
        nvim.input(key)
        wait_line(nvim, 1, line, f"{key} to leave {line!r}")
        settle(nvim)
        assert nvim.current.buffer[1] == line
    finally:
        nvim.close()


@DISPLAYS
@pytest.mark.parametrize(
    "text",
    [
        # A call's arguments over two lines: the item writes the `)` again on its last line.
        "b,\n        c)",
        # Its first line ends with what the item replaces: still not the end of the item.
        "b(1)\n        + c)",
    ],
    ids=["first-line-without-the-bracket", "first-line-ending-with-a-bracket"],
)
def test_accept_line_of_a_multi_line_item_keeps_what_the_rest_replaces(tmp_path, native, text):
    first, second = text.split("\n")
    nvim, _ = start_at_call(tmp_path, native, covering(text))
    try:
        if not native:
            # The cursor's line is drawn as accepting its first line leaves it.
            assert ghost(nvim, native) == [(1, CURSOR, first)]
        set_script(tmp_path, edits=[], inline=[covering(text)], inline_delay_ms=5000)
        # The first line goes in at the cursor; the `)` the item replaces stays for the rest.
        nvim.input("<M-C-Right>")
        wait_line(nvim, 1, CALL[:-1] + first + ")", "the first line inserted before the `)`")
        settle(nvim)
        assert nvim.current.buffer[:] == ["fn main() {", CALL[:-1] + first + ")", "}"]
        # The rest, asked for where the cursor is now (the server answers what is left of its
        # suggestion): accepting it, the last of the item, replaces the `)`.
        column = CHARACTER + len(first.encode("utf-16-le")) // 2
        rest = {"insertText": "\n" + second, "range": {"start": {"line": 1, "character": column}, "end": {"line": 1, "character": column + 1}}}
        set_script(tmp_path, edits=[], inline=[rest])
        nvim.input("<M-\\>")
        wait_lua(nvim, TIMEOUT_MS, "return require('redraft').inline_visible()", "the rest to be shown")
        nvim.input("<M-C-Right>")
        wait_line(nvim, 2, second, "the rest accepted over the `)`")
        settle(nvim)
        assert nvim.current.buffer[:] == ["fn main() {", CALL[:-1] + first, second, "}"]
    finally:
        nvim.close()


@DISPLAYS
def test_accept_word_takes_a_word_with_non_ascii_letters_whole(tmp_path, native):
    nvim, _ = start_at_call(tmp_path, native, covering("größe + 1)"))
    try:
        set_script(tmp_path, edits=[], inline=[covering("größe + 1)")], inline_delay_ms=5000)
        nvim.input("<M-Right>")
        wait_line(nvim, 1, CALL[:-1] + "größe)", "the word größe accepted")
        settle(nvim)
        assert nvim.current.buffer[1] == CALL[:-1] + "größe)"
    finally:
        nvim.close()


def test_the_fallback_display_draws_a_replaced_bracket_once(tmp_path):
    nvim, _ = start_at_call(tmp_path, False, covering("b)"))
    try:
        assert ghost(nvim, False) == [(1, CURSOR, "b")]
    finally:
        nvim.close()


@pytest.mark.parametrize("setup_keymaps", ["", "keymaps = { accept = '<Tab>' },"], ids=["default", "explicit"])
def test_tab_with_nothing_shown_does_what_it_did_before(tmp_path, setup_keymaps):
    # Neovim's default <Tab> jumps to a snippet's next placeholder (LSP completions expand them).
    nvim = start(tmp_path, cmd=["true"], setup_extra=setup_keymaps)
    try:
        nvim.command("enew")
        nvim.input("i")
        nvim.exec_lua("vim.snippet.expand('foo($1, $2)')")
        nvim.input("x<Tab>y")
        settle(nvim, 100)
        assert nvim.current.line == "foo(x, y)"
        nvim.input("<Esc>")
        # Outside a snippet it is a Tab.
        nvim.command("enew!")
        nvim.input("ia<Tab>b<Esc>")
        settle(nvim, 100)
        assert nvim.current.line == "a\tb"
    finally:
        nvim.close()


def test_keys_fall_back_to_the_users_own_mappings_and_get_them_back(tmp_path):
    # The user's mappings made before redraft's setup(): a Lua callback on <C-]> and a recursive
    # one on <Tab> through <Plug>.
    before = """
vim.keymap.set('i', '<C-]>', function() vim.api.nvim_put({ 'dismissed' }, 'c', false, true) end)
vim.cmd('inoremap <Plug>(user-tab) TAB')
vim.cmd('imap <Tab> <Plug>(user-tab)')
"""
    nvim = start(tmp_path, cmd=["true"], extra="")
    try:
        nvim.exec_lua(before)
        nvim.exec_lua("require('redraft').setup({ cmd = { 'true' } })")
        assert nvim.exec_lua("return vim.fn.maparg('<Tab>', 'i', false, true).desc") == "redraft: accept suggestion"
        nvim.command("enew")
        nvim.input("i<Tab><C-]><Esc>")
        settle(nvim, 100)
        assert nvim.current.line == "TABdismissed"
        # Without redraft's keys, the user's are back.
        nvim.exec_lua("require('redraft').setup({ cmd = { 'true' }, keymaps = false, next_edit = false })")
        assert nvim.exec_lua("return vim.fn.maparg('<Tab>', 'i')") == "<Plug>(user-tab)"
        assert nvim.exec_lua("return vim.fn.maparg('<C-]>', 'i', false, true).callback ~= nil")
    finally:
        nvim.close()


def test_suggestions_off_turns_the_servers_next_edits_off_and_back(tmp_path):
    cmd, log = fake(tmp_path, edits=[])
    nvim = start(tmp_path, cmd=cmd, settings={"nextEdit": {"debounceMs": 50}})
    try:
        open_file(nvim, tmp_path)

        def last_settings():
            changes = received(log, "workspace/didChangeConfiguration")
            return changes[-1]["params"]["settings"]["redraft"] if changes else None

        nvim.command("Redraft disable")
        for _ in range(TIMEOUT_MS // 50):
            if (last_settings() or {}).get("nextEdit", {}).get("enabled") is False:
                break
            settle(nvim, 50)
        assert last_settings()["nextEdit"] == {"debounceMs": 50, "enabled": False}, last_settings()
        # The user's own settings are unchanged: :Redraft enable restores them.
        assert nvim.exec_lua("return require('redraft').config.settings.nextEdit") == {"debounceMs": 50}

        # A server started while suggestions are off starts with next edits off.
        nvim.command("Redraft restart")
        for _ in range(TIMEOUT_MS // 50):
            if len(received(log, "initialize")) >= 2:
                break
            settle(nvim, 50)
        options = received(log, "initialize")[-1]["params"]["initializationOptions"]
        assert options["nextEdit"] == {"debounceMs": 50, "enabled": False}, options
        # The plugin shows suggestions itself: no completion items unless the user sets them.
        assert options["completionItems"] is False, options

        wait_lua(
            nvim,
            TIMEOUT_MS,
            "local c = vim.lsp.get_clients({ name = 'redraft', bufnr = 0 })[1]; return c ~= nil and c.initialized == true",
            "the restarted client",
        )
        nvim.command("Redraft enable")
        for _ in range(TIMEOUT_MS // 50):
            if (last_settings() or {}).get("nextEdit", {}).get("enabled") is True:
                break
            settle(nvim, 50)
        assert last_settings()["nextEdit"] == {"debounceMs": 50, "enabled": True}, json.dumps(last_settings())
    finally:
        nvim.close()
