"""The Neovim plugin in real Neovim 0.12 (headless, driven over its RPC API) with the real
`redraft lsp`: type in insert mode, wait for the ghost text, accept it, check the buffer.

Run through `scripts/test-editors`, which sets REDRAFT_NVIM (from scripts/setup-editors) and
REDRAFT_BIN (the freshly built binary). Waits are `vim.wait` on the condition itself inside
Neovim, so they end as soon as the event happens; the timeouts are only there to turn a hang
into a clear failure.
"""

import json
import os
import re
import signal
import textwrap
from pathlib import Path

import pynvim
import pytest

PLUGIN = Path(__file__).resolve().parents[1]
NVIM = os.environ.get("REDRAFT_NVIM", "")
REDRAFT = os.environ.get("REDRAFT_BIN", "")

# The first request also loads the model; a cold 2-core machine under load needs headroom.
SUGGESTION_TIMEOUT_MS = 120_000
STARTUP_TIMEOUT_MS = 60_000

SOURCE = textwrap.dedent(
    """\
    use std::collections::HashMap;

    /// Counts how often each word occurs in `text`.
    fn word_counts(text: &str) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for word in text.split_whitespace() {
            *counts.entry(word.to_string()).or_insert(0) += 1;
        }
        counts
    }

    fn main() {
        let counts = word_counts("a b a");

    }
    """
)
# Typed on the empty line in `main` (Neovim's autoindent supplies the indent); the model has the
# whole file around it.
TYPED = "println!("
# For partial acceptance the suggestion must have more than one word: a method call the default
# model completes as `name();` (the test fails with a clear message if a retrained model does not).
TYPED_FOR_WORDS = "let n = counts."


def require_environment(binary=True):
    """Fails unless Neovim (and, with `binary`, the redraft binary) is there."""
    needed = [("REDRAFT_NVIM", NVIM)] + ([("REDRAFT_BIN", REDRAFT)] if binary else [])
    missing = [n for n, v in needed if not v]
    if missing:
        pytest.fail(f"{', '.join(missing)} not set: run the editor tests through scripts/test-editors")
    for _, path in needed:
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is not an executable: run scripts/setup-editors and build redraft")


def start(tmp_path, native=True, cmd=None, extra="", settings=None, setup_extra=""):
    """Neovim with the plugin set up; `cmd` other than the default (the redraft binary) needs
    no binary. `setup_extra` is Lua table fields added to the setup() call."""
    require_environment(binary=cmd is None or REDRAFT in cmd)
    cmd = cmd or [REDRAFT, "lsp"]
    # minConfidence 0: a shipped model's tuned inline bar is not what these tests are about.
    settings = {"logLevel": "debug", "minConfidence": 0, **(settings or {})}
    init = tmp_path / "init.lua"
    init.write_text(
        textwrap.dedent(
            f"""\
            vim.opt.runtimepath:prepend({str(PLUGIN)!r})
            vim.opt.swapfile = false
            vim.opt.shadafile = 'NONE'
            vim.cmd('filetype on')
            vim.lsp.log.set_level('info')
            require('redraft').setup({{
              cmd = vim.json.decode({json.dumps(cmd)!r}),
              native = {str(native).lower()},
              settings = vim.json.decode({json.dumps(settings)!r}),
              {setup_extra}
            }})
            {extra}
            """
        )
    )
    # A private home for Neovim's state and log, so runs never see each other's files.
    env = [f"{var}={tmp_path / var.lower()}" for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")]
    nvim = pynvim.attach(
        "child", argv=["env", *env, NVIM, "--embed", "--headless", "-n", "-i", "NONE", "-u", str(init)]
    )
    return nvim


def server_log(nvim):
    """The tail of Neovim's LSP log (server stderr included), for failure messages."""
    try:
        path = nvim.exec_lua("return vim.lsp.log.get_filename()")
        return "".join(Path(path).read_text(errors="replace").splitlines(True)[-40:])
    except Exception as error:  # the log is only a diagnostic aid
        return f"(no LSP log: {error})"


def wait_lua(nvim, timeout_ms, predicate, what, *args):
    """Waits inside Neovim (its event loop keeps running) until `predicate` (a Lua function body
    that sees the extra arguments as `args`) returns true."""
    ok = nvim.exec_lua(
        f"local args = {{...}}; return vim.wait({timeout_ms}, function() {predicate} end, 20)",
        *args,
    )
    if not ok:
        pytest.fail(f"timed out after {timeout_ms / 1000:.0f} s waiting for {what}\n{server_log(nvim)}")


def open_rust_file(nvim, tmp_path):
    path = tmp_path / "src" / "main.rs"
    path.parent.mkdir()
    path.write_text(SOURCE)
    nvim.command(f"edit {path}")
    assert nvim.current.buffer.options["filetype"] == "rust"
    wait_lua(
        nvim,
        STARTUP_TIMEOUT_MS,
        "local c = vim.lsp.get_clients({ name = 'redraft', bufnr = 0 })[1]; "
        "return c ~= nil and c.initialized == true",
        "the redraft client to initialize",
    )
    return path


def type_in_insert_mode(nvim, line_number, text):
    nvim.current.window.cursor = (line_number, 0)
    nvim.input("S")  # replace the (empty) line, as a user starting a new statement would
    nvim.input(text.replace("<", "<lt>"))
    # nvim_input only queues keys; a (non-fast) request is answered once they are processed.
    assert nvim.eval("mode(1)") == "i"
    assert nvim.current.line.strip() == text


def ghost_text(nvim, namespace):
    """The suggestion on screen: the extmark's inline text plus its virtual lines."""
    marks = nvim.exec_lua(
        "local ns = vim.api.nvim_create_namespace(...); "
        "return vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })",
        namespace,
    )
    assert len(marks) == 1, marks
    details = marks[0][3]
    first = "".join(chunk[0] for chunk in details.get("virt_text", []))
    rest = ["".join(chunk[0] for chunk in line) for line in details.get("virt_lines", [])]
    return "\n".join([first, *rest])


def check_suggestion_round_trip(nvim, tmp_path, namespace):
    open_rust_file(nvim, tmp_path)
    empty_line = SOURCE.splitlines().index("") + 1
    line_number = SOURCE.splitlines().index("    let counts = word_counts(\"a b a\");") + 2
    assert line_number > empty_line
    type_in_insert_mode(nvim, line_number, TYPED)

    wait_lua(
        nvim,
        SUGGESTION_TIMEOUT_MS,
        "return #vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace(args[1]), 0, -1, {}) > 0",
        "the inline suggestion to be displayed",
        namespace,
    )
    shown = ghost_text(nvim, namespace)
    assert shown.strip(), f"an empty suggestion was displayed: {shown!r}"
    before = nvim.current.buffer[:]
    row, col = nvim.current.window.cursor
    assert before[row - 1].strip() == TYPED

    # What the server says for this very state: the display must be exactly that.
    answer = nvim.exec_lua(
        """
        local client = vim.lsp.get_clients({ name = 'redraft', bufnr = 0 })[1]
        local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
        params.context = { triggerKind = 2 }
        local response = client:request_sync('textDocument/inlineCompletion', params, 60000, 0)
        local result = response and response.result
        return result and (result.items or result)[1] or vim.NIL
        """
    )
    assert answer, f"the server gave no item for the state shown\n{server_log(nvim)}"
    insert = answer["insertText"]
    start_col = answer["range"]["start"]["character"] if "range" in answer else col
    end_col = answer["range"]["end"]["character"] if "range" in answer else col
    already_typed = before[row - 1][start_col:col]
    assert insert.startswith(already_typed), (insert, already_typed)
    assert shown == insert[len(already_typed):], (
        f"displayed {shown!r} but the server's item says {insert!r}"
    )

    print(f"{namespace}: shown {shown!r}, server item {insert!r}")
    nvim.input("<Tab>")
    expected_line = before[row - 1][:start_col] + insert + before[row - 1][end_col:]
    expected = before[: row - 1] + expected_line.split("\n") + before[row:]
    wait_lua(
        nvim,
        10_000,
        "return vim.deep_equal(vim.api.nvim_buf_get_lines(0, 0, -1, true), args[1])",
        "the accepted suggestion to be in the buffer",
        expected,
    )
    assert nvim.current.buffer[:] == expected
    inserted = expected_line.split("\n")
    assert tuple(nvim.current.window.cursor) == (
        row + len(inserted) - 1,
        len(inserted[-1]) - len(before[row - 1][end_col:]),
    )
    assert nvim.api.get_mode()["mode"] == "i"
    nvim.input("<Esc>")
    return shown


def test_native_inline_completion_shows_and_accepts_the_servers_suggestion(tmp_path):
    nvim = start(tmp_path, native=True)
    try:
        assert nvim.exec_lua("return require('redraft').uses_native()")
        check_suggestion_round_trip(nvim, tmp_path, "nvim.lsp.inline_completion")
    finally:
        nvim.close()


def test_extmark_fallback_shows_and_accepts_the_servers_suggestion(tmp_path):
    # The renderer Neovim 0.11 gets, exercised here on 0.12 with the native one turned off.
    nvim = start(tmp_path, native=False)
    try:
        assert not nvim.exec_lua("return require('redraft').uses_native()")
        check_suggestion_round_trip(nvim, tmp_path, "redraft.ghost")
    finally:
        nvim.close()


@pytest.mark.parametrize("native", [True, False], ids=["native", "extmarks"])
def test_accept_word_then_the_rest(tmp_path, native):
    namespace = "nvim.lsp.inline_completion" if native else "redraft.ghost"
    nvim = start(tmp_path, native=native)
    try:
        open_rust_file(nvim, tmp_path)
        line_number = SOURCE.splitlines().index("    let counts = word_counts(\"a b a\");") + 2
        type_in_insert_mode(nvim, line_number, TYPED_FOR_WORDS)
        typed_line = nvim.current.line
        show = "return #vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace(args[1]), 0, -1, {}) > 0"
        wait_lua(nvim, SUGGESTION_TIMEOUT_MS, show, "the inline suggestion to be displayed", namespace)
        shown = ghost_text(nvim, namespace)
        word = nvim.exec_lua("return require('redraft.partial').piece(...)", shown, "word")
        assert word and word != shown, f"the suggestion {shown!r} has a single word; pick another fixture"

        nvim.input("<M-Right>")
        wait_lua(
            nvim,
            10_000,
            "return vim.api.nvim_get_current_line() == args[1]",
            "the first word to be accepted",
            typed_line + word,
        )
        # The rest is suggested again (the server answers from what it already computed).
        wait_lua(nvim, SUGGESTION_TIMEOUT_MS, show, "the rest of the suggestion to be displayed", namespace)
        rest = ghost_text(nvim, namespace)
        nvim.input("<Tab>")
        wait_lua(
            nvim,
            10_000,
            "return vim.api.nvim_get_current_line() == args[1]",
            "the rest to be accepted",
            typed_line + word + rest,
        )
        print(f"{namespace}: word {word!r}, then {rest!r}")
    finally:
        nvim.close()


def test_streamed_steps_are_drawn_then_give_way_to_the_suggestion(tmp_path):
    nvim = start(tmp_path, settings={"streamSteps": True})
    try:
        open_rust_file(nvim, tmp_path)
        line_number = SOURCE.splitlines().index("    let counts = word_counts(\"a b a\");") + 2
        type_in_insert_mode(nvim, line_number, TYPED)
        wait_lua(
            nvim,
            SUGGESTION_TIMEOUT_MS,
            "return require('redraft.steps').count > 0 and #vim.api.nvim_buf_get_extmarks(0, "
            "vim.api.nvim_create_namespace('nvim.lsp.inline_completion'), 0, -1, {}) > 0",
            "streamed steps and then the suggestion",
        )
        drafts = nvim.exec_lua(
            "return #vim.api.nvim_buf_get_extmarks(0, require('redraft.steps').namespace, 0, -1, {})"
        )
        assert drafts == 0, "the last step's draft must be gone once the suggestion is shown"
    finally:
        nvim.close()


def checkhealth(nvim):
    nvim.command("checkhealth redraft")
    return "\n".join(nvim.current.buffer[:])


def test_checkhealth_reports_binary_version_model_and_encoding(tmp_path):
    nvim = start(tmp_path)
    try:
        open_rust_file(nvim, tmp_path)
        wait_lua(
            nvim,
            SUGGESTION_TIMEOUT_MS,
            "return require('redraft').state.model ~= nil",
            "the server to report its model load",
        )
        report = checkhealth(nvim)
        version = nvim.exec_lua("return vim.fn.system({...})", REDRAFT, "--version").strip()
        assert f"OK redraft binary: {REDRAFT}" in report, report
        assert f"OK version: {version}" in report, report
        assert "OK server offers textDocument/inlineCompletion" in report, report
        assert "OK model loaded from" in report, report
        assert "position encoding: utf-" in report, report
        assert "ERROR" not in report, report
    finally:
        nvim.close()


def test_checkhealth_takes_a_model_name(tmp_path):
    nvim = start(tmp_path, settings={"model": "ollama:not-pulled"})
    try:
        report = checkhealth(nvim)
        assert "OK model by name: ollama:not-pulled" in report, report
    finally:
        nvim.close()


def test_checkhealth_explains_a_model_that_fails_to_load(tmp_path):
    missing_model = str(tmp_path / "no-such-model")
    nvim = start(tmp_path, settings={"model": missing_model})
    try:
        open_rust_file(nvim, tmp_path)
        wait_lua(
            nvim,
            SUGGESTION_TIMEOUT_MS,
            "local m = require('redraft').state.model; return m ~= nil and not m.loaded",
            "the server to report that the model did not load",
        )
        report = checkhealth(nvim)
        assert f"ERROR model path does not exist: {missing_model}" in report, report
        assert re.search(r"ERROR .*model.*" + re.escape(missing_model), report), report
        status = nvim.exec_lua("return require('redraft').status_line()")
        assert status.startswith("redraft: error ("), status
    finally:
        nvim.close()


def test_checkhealth_and_status_explain_a_missing_binary(tmp_path):
    missing = str(tmp_path / "no-such-redraft")
    nvim = start(tmp_path, cmd=[missing, "lsp"])
    try:
        status = nvim.exec_lua("return require('redraft').status_line()")
        assert status.startswith("redraft: error (`" + missing + "` not found"), status
        report = checkhealth(nvim)
        assert f"ERROR redraft binary not found: `{missing}`" in report, report
        assert "cargo install --path cli" in report, report
    finally:
        nvim.close()


def test_a_server_that_dies_is_reported(tmp_path):
    nvim = start(tmp_path, cmd=["sh", "-c", "exit 3"])
    try:
        path = tmp_path / "main.rs"
        path.write_text(SOURCE)
        nvim.command(f"edit {path}")
        wait_lua(
            nvim,
            STARTUP_TIMEOUT_MS,
            "return require('redraft').state.status == 'error'",
            "the plugin to notice the server exited",
        )
        assert "exited with code 3" in nvim.exec_lua("return require('redraft').status_line()")
    finally:
        nvim.close()


# Records every vim.notify message (and still shows it), so a test can check what the user saw.
RECORD_NOTIFICATIONS = """
_G.notified = {}
local notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(_G.notified, { msg = msg, level = level })
  return notify(msg, level, opts)
end
"""


def server_pids(nvim):
    """The pids of the running `redraft lsp` processes Neovim started (its direct children)."""
    nvim_pid = nvim.exec_lua("return vim.fn.getpid()")
    binary = os.path.realpath(REDRAFT)
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            # The command name is in parentheses and may hold spaces: the fields after it.
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == nvim_pid and state != "Z" and os.path.realpath(f"/proc/{entry}/exe") == binary:
                pids.add(int(entry))
        except (OSError, ValueError):
            continue  # the process ended while we looked
    return pids


def server_pid(nvim):
    """The pid of the running `redraft lsp` Neovim started (a direct child of Neovim)."""
    pids = server_pids(nvim)
    if not pids:
        pytest.fail(f"no running redraft lsp under Neovim\n{server_log(nvim)}")
    return min(pids)


def notifications(nvim):
    return nvim.exec_lua("return _G.notified")


def test_a_killed_server_is_reported_and_restarted_a_bounded_number_of_times(tmp_path):
    nvim = start(tmp_path, extra=RECORD_NOTIFICATIONS)
    try:
        open_rust_file(nvim, tmp_path)
        max_restarts = nvim.exec_lua("return require('redraft').config.max_restarts")
        assert max_restarts >= 1
        for attempt in range(1, max_restarts + 2):
            old_client = nvim.exec_lua("return vim.lsp.get_clients({ name = 'redraft', bufnr = 0 })[1].id")
            os.kill(server_pid(nvim), signal.SIGKILL)
            if attempt <= max_restarts:
                wait_lua(
                    nvim,
                    STARTUP_TIMEOUT_MS,
                    "local c = vim.lsp.get_clients({ name = 'redraft', bufnr = 0 })[1]; "
                    "return c ~= nil and c.id ~= args[1] and c.initialized == true "
                    "and require('redraft').state.status == 'ready'",
                    f"the server to be restarted after kill {attempt}",
                    old_client,
                )
                said = [n["msg"] for n in notifications(nvim)]
                expected = f"restarting it ({attempt} of {max_restarts})"
                assert any("exited with code 0, signal 9" in m and expected in m for m in said), said
            else:
                wait_lua(
                    nvim,
                    STARTUP_TIMEOUT_MS,
                    "return require('redraft').state.status == 'error' "
                    "and #vim.lsp.get_clients({ name = 'redraft' }) == 0",
                    "the plugin to give up after the last restart",
                )
                # It stays stopped, and said so as an error.
                assert not nvim.exec_lua(
                    "return vim.wait(2000, function() return #vim.lsp.get_clients({ name = 'redraft' }) > 0 end, 50)"
                )
                last = notifications(nvim)[-1]
                assert "not restarting it" in last["msg"], last
                assert last["level"] == nvim.exec_lua("return vim.log.levels.ERROR")
                assert "not restarting" in nvim.exec_lua("return require('redraft').status_line()")
        # :Redraft restart starts it again by hand.
        nvim.command("Redraft restart")
        wait_lua(
            nvim,
            STARTUP_TIMEOUT_MS,
            "local c = vim.lsp.get_clients({ name = 'redraft', bufnr = 0 })[1]; return c ~= nil and c.initialized == true",
            "a new client after :Redraft restart",
        )
    finally:
        nvim.close()


# Records every status the plugin sets (the RedraftStatus event), in order.
RECORD_STATUSES = """
_G.statuses = {}
vim.api.nvim_create_autocmd('User', { pattern = 'RedraftStatus', callback = function()
  table.insert(_G.statuses, require('redraft').state.status)
end })
"""


def open_in_project(nvim, project):
    """Opens `project`/main.rs (a project root: it has `.git`); returns its redraft client's id."""
    (project / ".git").mkdir(parents=True)
    path = project / "main.rs"
    path.write_text(SOURCE)
    nvim.command(f"edit {path}")
    wait_lua(
        nvim,
        STARTUP_TIMEOUT_MS,
        "local c = vim.lsp.get_clients({ name = 'redraft', bufnr = 0 })[1]; return c ~= nil and c.initialized == true",
        f"the redraft client for {project.name}",
    )
    return nvim.exec_lua("return vim.lsp.get_clients({ name = 'redraft', bufnr = 0 })[1].id"), nvim.current.buffer.number


def test_a_crashed_server_is_restarted_for_its_own_buffers_only(tmp_path):
    # One server per project root: killing one leaves the other running, untouched.
    nvim = start(tmp_path, extra=RECORD_NOTIFICATIONS + RECORD_STATUSES)
    try:
        first, first_buf = open_in_project(nvim, tmp_path / "one")
        (first_pid,) = server_pids(nvim)
        second, second_buf = open_in_project(nvim, tmp_path / "two")
        assert first != second
        (second_pid,) = server_pids(nvim) - {first_pid}
        nvim.exec_lua("_G.statuses = {}")
        os.kill(first_pid, signal.SIGKILL)
        wait_lua(
            nvim,
            STARTUP_TIMEOUT_MS,
            "local c = vim.lsp.get_clients({ name = 'redraft', bufnr = args[1] })[1]; "
            "return c ~= nil and c.id ~= args[2] and c.initialized == true",
            "a new client for the crashed server's buffer",
            first_buf,
            first,
        )
        # The other root's client is the same one, still running, still attached.
        assert nvim.exec_lua(
            "local c = vim.lsp.get_client_by_id(...); return c ~= nil and not c:is_stopped()", second
        ), server_log(nvim)
        assert nvim.exec_lua(
            "return vim.tbl_map(function(c) return c.id end, vim.lsp.get_clients({ name = 'redraft', bufnr = ... }))", second_buf
        ) == [second]
        assert second_pid in server_pids(nvim)
        assert nvim.exec_lua("return #vim.lsp.get_clients({ name = 'redraft' })") == 2
        # Nothing said the server stopped on purpose.
        assert "not started" not in nvim.exec_lua("return _G.statuses"), nvim.exec_lua("return _G.statuses")
        said = [n["msg"] for n in notifications(nvim)]
        assert sum("restarting it (1 of" in m for m in said) == 1, said
    finally:
        nvim.close()


def test_every_buffer_includes_files_without_a_filetype(tmp_path):
    # filetypes = nil is every file's buffer, including one Neovim gives no filetype.
    nvim = start(tmp_path, setup_extra="filetypes = { 'rust' },")
    attached = "return #vim.lsp.get_clients({ name = 'redraft', bufnr = 0 }) > 0"
    try:
        notes = tmp_path / "notes.zzz"
        notes.write_text("hello\n")
        nvim.command(f"edit {notes}")
        assert nvim.current.buffer.options["filetype"] == ""
        # With a list of filetypes, a buffer without one gets no server.
        assert not nvim.exec_lua(f"return vim.wait(1000, function() {attached} end, 20)")
        # setup() again with every buffer: the buffer already open gets one.
        nvim.exec_lua("require('redraft').setup({ cmd = { ... }, filetypes = nil })", REDRAFT, "lsp")
        wait_lua(nvim, STARTUP_TIMEOUT_MS, attached, "the server in the open buffer without a filetype")
        # And so does one opened after: a file that exists, and a new one.
        for name in ("more.zzz", "new.zzz"):
            if name == "more.zzz":
                (tmp_path / name).write_text("more\n")
            nvim.command(f"edit {tmp_path / name}")
            assert nvim.current.buffer.options["filetype"] == ""
            wait_lua(nvim, STARTUP_TIMEOUT_MS, attached, f"the server in {name}")
        # A buffer that is not a file's gets none.
        nvim.command("enew")
        nvim.command("setlocal buftype=nofile")
        nvim.command("doautocmd BufNewFile")
        assert not nvim.exec_lua(f"return vim.wait(500, function() {attached} end, 20)")
    finally:
        nvim.close()


def test_stopping_the_server_on_purpose_is_not_a_crash(tmp_path):
    nvim = start(tmp_path, extra=RECORD_NOTIFICATIONS)
    try:
        open_rust_file(nvim, tmp_path)
        nvim.exec_lua("for _, c in ipairs(vim.lsp.get_clients({ name = 'redraft' })) do c:stop() end")
        wait_lua(
            nvim,
            STARTUP_TIMEOUT_MS,
            "return #vim.lsp.get_clients({ name = 'redraft' }) == 0 and require('redraft').state.status == 'not started'",
            "the server to stop",
        )
        assert not any("restarting" in n["msg"] for n in notifications(nvim)), notifications(nvim)
    finally:
        nvim.close()


def test_redraft_command_changes_effort_and_toggles(tmp_path):
    nvim = start(tmp_path)
    try:
        open_rust_file(nvim, tmp_path)
        nvim.command("Redraft effort low")
        settings = nvim.exec_lua(
            "return vim.lsp.get_clients({ name = 'redraft' })[1].settings"
        )
        assert settings["redraft"]["effort"] == "low", settings
        assert "effort low" in nvim.exec_lua("return require('redraft').status_line()")
        nvim.command("Redraft toggle")
        assert "suggestions off" in nvim.exec_lua("return require('redraft').status_line()")
        assert not nvim.exec_lua("return vim.lsp.inline_completion.is_enabled({ bufnr = 0 })")
        nvim.command("Redraft toggle")
        assert nvim.exec_lua("return vim.lsp.inline_completion.is_enabled({ bufnr = 0 })")
        first = nvim.exec_lua("return vim.lsp.get_clients({ name = 'redraft' })[1].id")
        nvim.command("Redraft restart")
        wait_lua(
            nvim,
            STARTUP_TIMEOUT_MS,
            "local c = vim.lsp.get_clients({ name = 'redraft', bufnr = 0 })[1]; "
            "return c ~= nil and c.id ~= args[1] and c.initialized == true",
            "a new redraft client after :Redraft restart",
            first,
        )
        with pytest.raises(pynvim.NvimError):
            nvim.command("Redraft nonsense")
    finally:
        nvim.close()


def test_keymaps_are_overridable(tmp_path):
    nvim = start(
        tmp_path,
        extra="require('redraft').setup({ cmd = { 'true' }, keymaps = { accept = '<C-l>', next = false } })",
    )
    try:
        maps = nvim.exec_lua(
            "local out = {}; for _, m in ipairs(vim.api.nvim_get_keymap('i')) do "
            "if (m.desc or ''):match('^redraft') then out[m.lhs] = m.desc end end; return out"
        )
        assert maps.get("<C-L>") == "redraft: accept suggestion", maps
        assert "redraft: next candidate" not in maps.values(), maps
        assert maps.get("<M-[>") == "redraft: previous candidate", maps
    finally:
        nvim.close()


@pytest.mark.parametrize(
    ("text", "kind", "piece"),
    [
        ("foo(bar)", "word", "foo"),
        ("  .iter()", "word", "  ."),
        # A letter outside ASCII is a word character, whatever its bytes.
        ("größe + 1", "word", "größe"),
        ("  für_ñ(x)", "word", "  für_ñ"),
        ("(größe)", "word", "("),
        ("(a, b);\nnext", "line", "(a, b);"),
        ("\n    x += 1;\n}", "line", "\n    x += 1;"),
        ("", "word", ""),
    ],
)
def test_partial_accept_takes_one_word_or_line(tmp_path, text, kind, piece):
    nvim = start(tmp_path, cmd=["true"])
    try:
        assert nvim.exec_lua("return require('redraft.partial').piece(...)", text, kind) == piece
    finally:
        nvim.close()
