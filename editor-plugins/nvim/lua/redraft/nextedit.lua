--- Next-edit suggestions: Copilot's `textDocument/copilotInlineEdit`, answered by `redraft lsp`,
--- drawn as a diff in the buffer. The replaced text is highlighted, the new text follows it as
--- inline virtual text (one line) or as virtual lines below it (several), and a hint at the
--- cursor points at an edit on another line. Keys jump to it, accept it, dismiss it.
---
--- The server's edit is shown and applied unchanged (the virtual lines show the lines the edit
--- leaves, the text around the range included). An answer for a buffer state that has moved
--- on (`b:changedtick`, or the edit's `textDocument.version`) is never shown, and any change
--- to the buffer hides what is shown. Accepting applies the edit in the negotiated position
--- encoding, then runs the edit's `command` (whatever the server named it) through
--- `workspace/executeCommand`, then asks for the next one (the server precomputes it).
---
--- Next to inline completion: an inline completion at the cursor wins; a next edit touching the
--- cursor's line is not shown while one is visible, and one already shown there is hidden when
--- an inline completion arrives (the server applies the same rule to the line it answered an
--- inline completion on). Except the edit the user jumped to: the jump says which one they
--- want, so it stays (until accepted, dismissed or the buffer changes) and its key accepts it.
local M = {}
local api = vim.api
local pending = require('redraft.pending')

M.METHOD = 'textDocument/copilotInlineEdit'
M.SHOWN = 'textDocument/didShowInlineEdit'
M.namespace = api.nvim_create_namespace('redraft.nextedit')

--- The server's default pause before it precomputes a next edit; the plugin asks after the
--- same pause unless `settings.nextEdit.debounceMs` says otherwise.
local DEFAULT_DEBOUNCE_MS = 300
local METHOD_NOT_FOUND = -32601

local config = { keymaps = {} }

--- What the plugin last did and heard, for `:checkhealth redraft` and the tests.
--- `last_request`: { at, bufnr, line, version, reason }; `last_answer`: { at, outcome, edits,
--- message } where outcome is 'shown' | 'no edit' | 'stale' | 'hidden' | 'error';
--- `supported`: nil until the server answered, then whether it knows the method.
M.state = {
  last_request = nil,
  last_answer = nil,
  supported = nil,
  requests = 0,
  shown = 0,
  accepted = 0,
  stale = 0,
}

--- Per buffer: { client_id, timer, request_id, accepted_tick, shown = { edit, client_id, tick,
--- srow, scol, erow, ecol, jumped } }.
local buffers = {}

local function redraft()
  return require('redraft')
end

--- A `nextEdit` setting as the user gave it to the server (nested or dotted key).
local function setting(key)
  local settings = redraft().config.settings or {}
  local nested = settings.nextEdit
  if type(nested) == 'table' and nested[key] ~= nil then
    return nested[key]
  end
  if key == 'enabled' and type(nested) == 'boolean' then
    return nested
  end
  return settings['nextEdit.' .. key]
end

--- Whether next edits are asked for: the server's `nextEdit` setting and the plugin's switch.
function M.enabled()
  return redraft().state.enabled and setting('enabled') ~= false
end

--- The pause after an edit before the plugin asks; 0: only on the key and after an accept.
function M.debounce_ms()
  local ms = setting('debounceMs')
  return type(ms) == 'number' and ms or DEFAULT_DEBOUNCE_MS
end

local function hide(bufnr)
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, M.namespace, 0, -1)
  end
end

local stop_timer, cancel = pending.stop_timer, pending.cancel

--- Forgets the shown edit (if any) and takes it off the screen.
local function clear(bufnr)
  local state = buffers[bufnr]
  if state then
    state.shown = nil
  end
  hide(bufnr)
end

--- A 0-based byte position for an LSP position. Past the last line (LSP's position after the
--- file's final newline): the end of the last line, and `true`, since that newline is part of
--- what a range ending there covers.
local function byte_position(bufnr, position, encoding)
  local count = api.nvim_buf_line_count(bufnr)
  if position.line >= count then
    local last = api.nvim_buf_get_lines(bufnr, count - 1, count, true)[1]
    return count - 1, #last, true
  end
  local line = api.nvim_buf_get_lines(bufnr, position.line, position.line + 1, true)[1]
  local ok, col = pcall(vim.str_byteindex, line, encoding, position.character, false)
  return position.line, ok and col or #line, false
end

--- Where `edit` sits in the buffer (0-based rows, byte columns) and the lines it leaves there:
--- the text before its start, the new text, the text after its end.
---
--- An edit that starts after the file's final newline (line `line_count`) appends lines after
--- the last one: `append` is set, its rows are `line_count`, and its lines are its text less
--- one final newline (the buffer's last line already ends with one). A range that ends there
--- takes the final newline with it, so the text's own final newline replaces it.
function M.plan(bufnr, edit, encoding)
  local text = edit.text:gsub('\r\n?', '\n')
  local count = api.nvim_buf_line_count(bufnr)
  if edit.range.start.line >= count then
    return {
      srow = count,
      scol = 0,
      erow = count,
      ecol = 0,
      prefix = '',
      suffix = '',
      lines = text == '' and {} or vim.split((text:gsub('\n$', '')), '\n', { plain = true }),
      append = true,
    }
  end
  local srow, scol = byte_position(bufnr, edit.range.start, encoding)
  local erow, ecol, past_end = byte_position(bufnr, edit.range['end'], encoding)
  local first = api.nvim_buf_get_lines(bufnr, srow, srow + 1, true)[1]
  local last = api.nvim_buf_get_lines(bufnr, erow, erow + 1, true)[1]
  local lines = vim.split(text, '\n', { plain = true })
  if past_end and #lines > 1 and lines[#lines] == '' then
    lines[#lines] = nil
  end
  return {
    srow = srow,
    scol = scol,
    erow = erow,
    ecol = ecol,
    prefix = first:sub(1, scol),
    suffix = last:sub(ecol + 1),
    lines = lines,
  }
end

--- The lines the edit leaves in place of rows srow..erow, as virtual-line chunks: the kept text
--- around the range in the context colour, the new text in the added colour.
local function preview_lines(plan)
  local out = {}
  for i, line in ipairs(plan.lines) do
    local chunks = {}
    local function add(text, hl)
      if text ~= '' then
        chunks[#chunks + 1] = { text, hl }
      end
    end
    if i == 1 then
      add(plan.prefix, 'RedraftNextEditContext')
    end
    add(line, 'RedraftNextEditAdd')
    if i == #plan.lines then
      add(plan.suffix, 'RedraftNextEditContext')
    end
    if #chunks == 0 then
      chunks[1] = { '', 'RedraftNextEditAdd' }
    end
    out[#out + 1] = chunks
  end
  return out
end

local function key_names()
  local keys = config.keymaps or {}
  local parts = {}
  if keys.jump then
    parts[#parts + 1] = keys.jump .. ' jump'
  end
  if keys.accept then
    parts[#parts + 1] = keys.accept .. ' accept'
  end
  return table.concat(parts, ', ')
end

--- The hint at the cursor's line while the shown edit is on other lines (off-screen or not):
--- which way, which line, which keys.
local function update_hint(bufnr)
  local state = buffers[bufnr]
  local shown = state and state.shown
  if not shown then
    return
  end
  if shown.hint then
    pcall(api.nvim_buf_del_extmark, bufnr, M.namespace, shown.hint)
    shown.hint = nil
  end
  if api.nvim_get_current_buf() ~= bufnr then
    return
  end
  local row = api.nvim_win_get_cursor(0)[1] - 1
  if row >= shown.srow and row <= shown.erow then
    return
  end
  local arrow = shown.srow > row and '⇣' or '⇡'
  local keys = key_names()
  local label = ('%s next edit at line %d%s'):format(arrow, shown.srow + 1, keys ~= '' and (' (' .. keys .. ')') or '')
  shown.hint = api.nvim_buf_set_extmark(bufnr, M.namespace, row, 0, {
    virt_text = { { label, 'RedraftNextEditHint' } },
    virt_text_pos = 'eol',
    hl_mode = 'combine',
  })
end

--- Draws `edit` (already checked to be for this buffer state).
local function show(bufnr, client, edit)
  hide(bufnr)
  local plan = M.plan(bufnr, edit, client.offset_encoding)
  local shown = {
    edit = edit,
    client_id = client.id,
    tick = api.nvim_buf_get_changedtick(bufnr),
    srow = plan.srow,
    scol = plan.scol,
    erow = plan.erow,
    ecol = plan.ecol,
  }
  if plan.srow ~= plan.erow or plan.scol ~= plan.ecol then
    shown.delete = api.nvim_buf_set_extmark(bufnr, M.namespace, plan.srow, plan.scol, {
      end_row = plan.erow,
      end_col = plan.ecol,
      hl_group = 'RedraftNextEditDelete',
      hl_mode = 'combine',
      priority = 200,
    })
  end
  if plan.append then
    -- New lines after the last one: under it, all of them new.
    local added = {}
    for i, line in ipairs(plan.lines) do
      added[i] = { { line, 'RedraftNextEditAdd' } }
    end
    shown.text = api.nvim_buf_set_extmark(bufnr, M.namespace, plan.srow - 1, 0, { virt_lines = added })
  elseif #plan.lines == 1 and plan.srow == plan.erow then
    if plan.lines[1] ~= '' then
      shown.text = api.nvim_buf_set_extmark(bufnr, M.namespace, plan.erow, plan.ecol, {
        virt_text = { { plan.lines[1], 'RedraftNextEditAdd' } },
        virt_text_pos = 'inline',
        hl_mode = 'combine',
      })
    end
  else
    shown.text = api.nvim_buf_set_extmark(bufnr, M.namespace, plan.erow, 0, {
      virt_lines = preview_lines(plan),
    })
  end
  buffers[bufnr].shown = shown
  update_hint(bufnr)
end

local function record_answer(outcome, edits, message)
  M.state.last_answer = { at = vim.uv.now(), outcome = outcome, edits = edits, message = message }
  vim.api.nvim_exec_autocmds('User', { pattern = 'RedraftNextEdit', modeline = false, data = M.state.last_answer })
end

--- Whether an inline completion is visible at the cursor and `plan` touches the cursor's line.
local function hidden_by_inline(bufnr, plan)
  if api.nvim_get_current_buf() ~= bufnr or not redraft().inline_visible() then
    return false
  end
  local row = api.nvim_win_get_cursor(0)[1] - 1
  return row >= plan.srow and row <= plan.erow
end

--- The answer to a request made at `tick` (and `version`): the first edit for this buffer and
--- version is shown, unless the buffer moved on.
local function on_answer(bufnr, client, tick, version, err, result)
  if err then
    if err.code == METHOD_NOT_FOUND then
      M.state.supported = false
    end
    record_answer('error', 0, err.message)
    return
  end
  M.state.supported = true
  local edits = type(result) == 'table' and result.edits or {}
  if type(edits) ~= 'table' or #edits == 0 then
    record_answer('no edit', 0)
    return
  end
  local edit = edits[1]
  local uri = vim.uri_from_bufnr(bufnr)
  local doc = edit.textDocument or {}
  if
    not api.nvim_buf_is_valid(bufnr)
    or api.nvim_buf_get_changedtick(bufnr) ~= tick
    or (doc.version ~= nil and doc.version ~= version)
    or (doc.uri ~= nil and doc.uri ~= uri)
  then
    M.state.stale = M.state.stale + 1
    record_answer('stale', #edits, ('for version %s, the buffer is at %s'):format(tostring(doc.version), tostring(vim.lsp.util.buf_versions[bufnr])))
    return
  end
  local plan = M.plan(bufnr, edit, client.offset_encoding)
  if hidden_by_inline(bufnr, plan) then
    record_answer('hidden', #edits, 'an inline completion is shown on the line it touches')
    return
  end
  show(bufnr, client, edit)
  M.state.shown = M.state.shown + 1
  client:notify(M.SHOWN, { item = edit })
  record_answer('shown', #edits)
end

--- Asks the server for a next edit at the cursor of the current window (showing `bufnr`).
function M.request(bufnr, reason)
  bufnr = bufnr or api.nvim_get_current_buf()
  local state = buffers[bufnr]
  if not state or not M.enabled() or api.nvim_get_current_buf() ~= bufnr then
    return false
  end
  local client = vim.lsp.get_client_by_id(state.client_id)
  if not client then
    return false
  end
  cancel(state)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  local tick = api.nvim_buf_get_changedtick(bufnr)
  local version = vim.lsp.util.buf_versions[bufnr]
  params.textDocument.version = version
  M.state.requests = M.state.requests + 1
  M.state.last_request = {
    at = vim.uv.now(),
    bufnr = bufnr,
    line = params.position.line,
    version = version,
    reason = reason,
  }
  local ok, id
  ok, id = client:request(M.METHOD, params, function(err, result)
    if state.request_id ~= id then
      return -- superseded (its successor, or a change, cancelled it)
    end
    state.request_id = nil
    on_answer(bufnr, client, tick, version, err, result)
  end, bufnr)
  if ok then
    state.request_id = id
  end
  return ok
end

local function schedule_request(bufnr)
  local state = buffers[bufnr]
  local delay = M.debounce_ms()
  if not state or delay <= 0 or not M.enabled() then
    return
  end
  stop_timer(state)
  state.timer = vim.defer_fn(function()
    state.timer = nil
    if api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr then
      M.request(bufnr, 'after an edit pause')
    end
  end, delay)
end

function M.setup(cfg)
  config = vim.tbl_deep_extend('force', { keymaps = {} }, cfg or {})
  for name, link in pairs({
    RedraftNextEditDelete = 'DiffDelete',
    RedraftNextEditAdd = 'DiffAdd',
    RedraftNextEditContext = 'Comment',
    RedraftNextEditHint = 'DiagnosticVirtualTextHint',
  }) do
    api.nvim_set_hl(0, name, { link = link, default = true })
  end
end

function M.attach(client, bufnr)
  if buffers[bufnr] then
    buffers[bufnr].client_id = client.id
    return
  end
  buffers[bufnr] = { client_id = client.id }
  local group = api.nvim_create_augroup('redraft.nextedit.' .. bufnr, { clear = true })
  api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      local state = buffers[bufnr]
      if not state then
        return
      end
      -- The change that applied an accepted edit: its successor is already asked for.
      if state.accepted_tick == api.nvim_buf_get_changedtick(bufnr) then
        return
      end
      state.accepted_tick = nil
      -- What is shown was for the text before this change.
      cancel(state)
      clear(bufnr)
      schedule_request(bufnr)
    end,
  })
  -- An inline completion answered after the next edit was shown: it wins on its line.
  api.nvim_create_autocmd('LspRequest', {
    group = group,
    buffer = bufnr,
    callback = function(args)
      local request = args.data and args.data.request
      if request and request.type == 'complete' and request.method == 'textDocument/inlineCompletion' then
        -- After the handler has drawn it.
        vim.schedule(function()
          local shown = buffers[bufnr] and buffers[bufnr].shown
          if shown and not shown.jumped and hidden_by_inline(bufnr, shown) then
            clear(bufnr)
            record_answer('hidden', 1, 'an inline completion arrived on a line it touches')
          end
        end)
      end
    end,
  })
  api.nvim_create_autocmd({ 'CursorMoved', 'CursorMovedI', 'WinScrolled', 'BufEnter' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      update_hint(bufnr)
    end,
  })
  api.nvim_create_autocmd('LspDetach', {
    group = group,
    buffer = bufnr,
    callback = function(args)
      if args.data and args.data.client_id == client.id then
        local state = buffers[bufnr]
        if state then
          cancel(state)
        end
        clear(bufnr)
        buffers[bufnr] = nil
        api.nvim_del_augroup_by_id(group)
      end
    end,
  })
end

--- The edit shown in `bufnr` (the server's, as received), or nil.
function M.current(bufnr)
  local state = buffers[bufnr or api.nvim_get_current_buf()]
  return state and state.shown and state.shown.edit
end

function M.visible(bufnr)
  return M.current(bufnr) ~= nil
end

--- Applies the shown edit, runs its command, and asks for the next edit.
function M.accept()
  local bufnr = api.nvim_get_current_buf()
  local state = buffers[bufnr]
  local shown = state and state.shown
  if not shown then
    return false
  end
  local client = vim.lsp.get_client_by_id(shown.client_id)
  if not client or api.nvim_buf_get_changedtick(bufnr) ~= shown.tick then
    clear(bufnr)
    return false
  end
  cancel(state)
  clear(bufnr)
  local edit = shown.edit
  local plan = M.plan(bufnr, edit, client.offset_encoding)
  if plan.append then
    -- apply_text_edits would add the text's final newline as one more (empty) line.
    api.nvim_buf_set_lines(bufnr, plan.srow, plan.srow, true, plan.lines)
  else
    vim.lsp.util.apply_text_edits({ { range = edit.range, newText = edit.text } }, bufnr, client.offset_encoding)
  end
  state.accepted_tick = api.nvim_buf_get_changedtick(bufnr)
  M.state.accepted = M.state.accepted + 1
  -- The cursor goes to the end of the new text, where the next edit is likely to start.
  local last = plan.lines[#plan.lines] or ''
  local row = plan.srow + #plan.lines - 1
  local col = (#plan.lines == 1 and plan.scol or 0) + #last
  pcall(api.nvim_win_set_cursor, 0, { row + 1, col })
  local function next_one()
    if api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr then
      M.request(bufnr, 'after an accepted edit')
    end
  end
  if type(edit.command) == 'table' and edit.command.command then
    client:exec_cmd(edit.command, { bufnr = bufnr }, function()
      vim.schedule(next_one)
    end)
  else
    vim.schedule(next_one)
  end
  return true
end

--- Moves the cursor to the start of the shown edit (normal mode: through the jumplist, so
--- <C-o> goes back).
function M.jump()
  local bufnr = api.nvim_get_current_buf()
  local shown = buffers[bufnr] and buffers[bufnr].shown
  if not shown then
    return false
  end
  if not api.nvim_get_mode().mode:match('^i') then
    vim.cmd("normal! m'")
  end
  -- In insert mode the move asks for an inline completion at the edit; it must not hide it.
  shown.jumped = true
  local count = api.nvim_buf_line_count(bufnr)
  if shown.srow >= count then
    -- Lines appended after the last one: the end of the last line, where they go.
    local last = api.nvim_buf_get_lines(bufnr, count - 1, count, true)[1]
    api.nvim_win_set_cursor(0, { count, #last })
  else
    api.nvim_win_set_cursor(0, { shown.srow + 1, shown.scol })
  end
  update_hint(bufnr)
  return true
end

function M.dismiss()
  local bufnr = api.nvim_get_current_buf()
  local shown = M.visible(bufnr)
  local state = buffers[bufnr]
  if state then
    cancel(state)
  end
  clear(bufnr)
  return shown
end

function M.trigger()
  return M.request(api.nvim_get_current_buf(), 'asked for')
end

--- Whether the buffer has a redraft client the module is attached through.
function M.attached(bufnr)
  return buffers[bufnr or api.nvim_get_current_buf()] ~= nil
end

--- Hides and forgets everything (next edits turned off).
function M.clear_all()
  for bufnr, state in pairs(buffers) do
    cancel(state)
    clear(bufnr)
  end
end

return M
