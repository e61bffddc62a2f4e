"""The suggestion as completion items (`completionItems`, lsp-server/src/completion_items.rs) in
real headless Neovim 0.12's own LSP completion (`vim.lsp.completion`), against the real
`redraft lsp`: the user types the start of a statement, asks for completion with <C-x><C-o>,
sees redraft's items in the popup menu, accepts one with <C-y>, and the line is what the item's
text edit says.

The default model writes nonsense, so the expectations are the server's own items, as Neovim
received them (`user_data.nvim.lsp.completion_item`), never fixed text.
"""

import pytest

from test_nvim import SOURCE, SUGGESTION_TIMEOUT_MS, open_rust_file, server_log, start, type_in_insert_mode, wait_lua

# Typed on the empty line in `main` (after `let counts = word_counts("a b a");`), each ending
# inside a word, so the items start before the cursor, where that word starts. Nothing follows
# the cursor: Neovim's menu replaces from an item's start to the cursor, never past it, so an
# item whose range covers text after the cursor (a closing bracket the suggestion writes again)
# would leave that text twice. The model may suggest nothing Neovim inserts whole at one of them
# (see below): the next is tried.
PLACES = [
    ("let total = counts.va", "va"),
    ("for (word, n) in cou", "cou"),
    ('println!("{}", cou', "cou"),
]

# Records the buffer's changedtick when the plugin's ghost text (Neovim's inline completion)
# asks, counts the answers to textDocument/completion, and keeps what CompleteDone accepted. An
# answer's LspRequest runs, scheduled, before its handler (also scheduled), so a count scheduled
# from there goes up once the handler has filled the menu, or found nothing to show.
RECORD = """
_G.completion_answers = 0
vim.api.nvim_create_autocmd('LspRequest', { callback = function(event)
  local request = event.data.request
  if request.method == 'textDocument/inlineCompletion' and request.type == 'pending' then
    _G.inline_asked_at = vim.api.nvim_buf_get_changedtick(event.buf)
  elseif request.method == 'textDocument/completion' and request.type == 'complete' then
    vim.schedule(function() _G.completion_answers = _G.completion_answers + 1 end)
  end
end })
vim.api.nvim_create_autocmd('CompleteDone', { callback = function()
  _G.completed = { reason = vim.v.event.reason, item = vim.v.completed_item }
end })
"""


def wait_for_the_ghost_texts_request(nvim, client_id, typed):
    """Waits until the ghost text's request for what was typed is answered. Neovim's inline
    completion asks 200 ms after the last keystroke; the server runs it and a menu's request side
    by side (they once cancelled each other, and Neovim dropped the cancelled menu without a
    word: lsp-server's `a_menu_and_an_inline_request_run_side_by_side_...`), each with the model.
    The user here pauses first, so the menu is answered from the one computation the ghost text
    made, and the server's answer for the same state afterwards (its type-through cache) is the
    same one."""
    wait_lua(
        nvim,
        SUGGESTION_TIMEOUT_MS,
        """
        if _G.inline_asked_at ~= vim.api.nvim_buf_get_changedtick(0) then return false end
        for _, request in pairs(vim.lsp.get_client_by_id(args[1]).requests) do
          if request.method == 'textDocument/inlineCompletion' then return false end
        end
        return true
        """,
        f"the ghost text's request after typing {typed!r} to be answered",
        client_id,
    )


def ask_for_completion(nvim, client_id, typed):
    """<C-x><C-o> (omnifunc `vim.lsp.omnifunc`); returns the menu once Neovim filled it, and
    what the server answers for the same state (from its type-through cache)."""
    answers = nvim.exec_lua("return _G.completion_answers")
    nvim.input("<C-x><C-o>")
    wait_lua(
        nvim,
        SUGGESTION_TIMEOUT_MS,
        "return _G.completion_answers > args[1]",
        f"the answer to textDocument/completion after typing {typed!r}",
        answers,
    )
    menu = nvim.exec_lua("return vim.fn.complete_info({ 'pum_visible', 'items', 'selected' })")
    sent = nvim.exec_lua(
        """
        local client = vim.lsp.get_client_by_id(...)
        local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
        params.context = { triggerKind = 1 }
        local response = client:request_sync('textDocument/completion', params, 60000, 0)
        return response and response.result or vim.NIL
        """,
        client_id,
    )
    assert sent, f"no answer to textDocument/completion\n{server_log(nvim)}"
    return menu, sent["items"]


def test_neovims_lsp_completion_shows_redrafts_item_and_applies_its_edit(tmp_path):
    nvim = start(tmp_path, settings={"completionItems": True}, extra=RECORD)
    try:
        open_rust_file(nvim, tmp_path)
        client = nvim.exec_lua(
            """
            local c = vim.lsp.get_clients({ name = 'redraft', bufnr = 0 })[1]
            vim.lsp.completion.enable(true, c.id, 0)
            vim.bo.omnifunc = 'v:lua.vim.lsp.omnifunc'
            -- The menu even for one item, its first item selected, nothing inserted before <C-y>.
            vim.o.completeopt = 'menuone,noinsert'
            return { id = c.id, provider = c.server_capabilities.completionProvider or vim.NIL }
            """
        )
        assert client["provider"], f"no completionProvider with completionItems = true\n{server_log(nvim)}"
        line_number = SOURCE.splitlines().index('    let counts = word_counts("a b a");') + 2
        for typed, word in PLACES:
            type_in_insert_mode(nvim, line_number, typed)
            before = nvim.current.buffer[:]
            line = before[line_number - 1]
            assert line.isascii(), line  # columns are the same in every position encoding
            _, cursor = nvim.current.window.cursor
            word_start = cursor - len(word)
            assert line[word_start:cursor] == word
            wait_for_the_ghost_texts_request(nvim, client["id"], typed)

            menu, sent = ask_for_completion(nvim, client["id"], typed)
            # Every item the server has for this state is in the menu, in the server's order:
            # none filtered away by what was typed of the word.
            items = [entry["user_data"]["nvim"]["lsp"]["completion_item"] for entry in menu["items"]]
            assert items == sent, (
                f"the menu after {typed!r} is not the server's items for that state "
                f"(filtered away, or its request cancelled):\nmenu {menu}\nserver {sent}"
            )
            print(f"{typed!r}: " + ", ".join(repr(item["textEdit"]["newText"]) for item in items))
            if not items:
                nvim.input("<Esc>")
                continue
            assert menu["pum_visible"] == 1 and menu["selected"] == 0, menu
            for entry, item in zip(menu["items"], items):
                assert entry["user_data"]["nvim"]["lsp"]["client_id"] == client["id"], entry
                assert (entry["abbr"], entry["menu"], entry["kind"]) == (item["label"], "redraft", "Text"), entry
                edit = item["textEdit"]
                assert edit["range"] == {
                    "start": {"line": line_number - 1, "character": word_start},
                    "end": {"line": line_number - 1, "character": cursor},
                }, item
                assert edit["newText"].startswith(word), item
                # Neovim inserts the entry's `word`, which is the item's text up to its first
                # white space on this Neovim (0.12.0-dev-fbb1caf: `get_completion_word`), up to
                # its first line break on later ones (neovim/neovim#37949): a prefix of it.
                assert entry["word"] and edit["newText"].startswith(entry["word"]), entry
            whole = [i for i, entry in enumerate(menu["items"]) if entry["word"] == items[i]["textEdit"]["newText"]]
            if not whole:
                nvim.input("<C-e><Esc>")
                continue

            # The user picks the first item Neovim inserts whole, and accepts it.
            chosen = whole[0]
            nvim.input("<C-n>" * chosen)
            wait_lua(
                nvim,
                10_000,
                "return vim.fn.complete_info({ 'selected' }).selected == args[1]",
                f"menu item {chosen} to be selected",
                chosen,
            )
            nvim.exec_lua("_G.completed = nil")
            nvim.input("<C-y>")
            edit = items[chosen]["textEdit"]
            expected_line = line[:word_start] + edit["newText"] + line[cursor:]
            expected = before[: line_number - 1] + [expected_line] + before[line_number:]
            wait_lua(
                nvim,
                10_000,
                "return _G.completed ~= nil and vim.deep_equal(vim.api.nvim_buf_get_lines(0, 0, -1, true), args[1])",
                f"the accepted item to make line {line_number} {expected_line!r}",
                expected,
            )
            completed = nvim.exec_lua("return _G.completed")
            assert completed["reason"] == "accept", completed
            assert completed["item"]["user_data"]["nvim"]["lsp"]["completion_item"] == items[chosen], completed
            assert nvim.current.buffer[:] == expected
            assert tuple(nvim.current.window.cursor) == (line_number, word_start + len(edit["newText"]))
            assert nvim.api.get_mode()["mode"] == "i"
            nvim.input("<Esc>")
            return
        pytest.fail(f"no item Neovim inserts whole at any of {[p for p, _ in PLACES]}\n{server_log(nvim)}")
    finally:
        nvim.close()
