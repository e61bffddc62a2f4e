--- Neovim 0.12+'s own inline completion (`vim.lsp.inline_completion`) as redraft's display.
---
--- The native module has no public "invoke now" or "dismiss"; both reach its per-buffer
--- completor through `vim.lsp._capability`, guarded so that a change there degrades to a
--- no-op instead of an error.
---
--- The native completor shows an answer whatever happened since it was asked for, and accepts
--- the shown item into its range as it was when the answer came. So the completor's handler is
--- wrapped (per buffer, guarded the same way): an answer for an older version of the buffer is
--- dropped (a newer request is on its way: the change moved the cursor), and each item's range
--- is anchored in the buffer (`redraft.partial`) so it follows what is typed after. The item
--- is shown and accepted only while the buffer agrees with it (the cursor on its line, the text
--- typed since its start a prefix of it); otherwise it is dismissed and the key goes through.
local partial = require('redraft.partial')

local M = {}
local api = vim.api

local enabled = true

--- The items' anchored ranges.
local ANCHORS = api.nvim_create_namespace('redraft.native.anchors')
--- Per buffer: the server's items of the last answer (the completor's own tables) -> anchor.
local anchors = {}

local function item_text(insert_text)
  if type(insert_text) == 'string' then
    return insert_text
  end
  return type(insert_text) == 'table' and tostring(insert_text.value) or nil
end

--- Wraps the completor's handler (once per completor): drops stale answers, anchors items.
local function instrument(c)
  if c.redraft_instrumented or type(c.handler) ~= 'function' then
    return
  end
  c.redraft_instrumented = true
  local handler = c.handler
  c.handler = function(self, err, result, ctx)
    local bufnr = self.bufnr
    if type(ctx) == 'table' and ctx.version ~= nil and ctx.version ~= vim.lsp.util.buf_versions[bufnr] then
      return
    end
    local client = ctx and vim.lsp.get_client_by_id(ctx.client_id)
    if not err and result and client and api.nvim_buf_is_valid(bufnr) then
      api.nvim_buf_clear_namespace(bufnr, ANCHORS, 0, -1)
      anchors[bufnr] = setmetatable({}, { __mode = 'k' })
      for _, item in ipairs(result.items or result) do
        anchors[bufnr][item] = partial.anchor_lsp(bufnr, ANCHORS, item.range, client.offset_encoding)
      end
    end
    return handler(self, err, result, ctx)
  end
end

local function completor(bufnr)
  local ok, capability = pcall(require, 'vim.lsp._capability')
  local class = ok and type(capability.all) == 'table' and capability.all.inline_completion
  if not class or type(class.active) ~= 'table' then
    return nil
  end
  local c = class.active[bufnr or api.nvim_get_current_buf()]
  if c then
    instrument(c)
  end
  return c
end

--- The shown item's server table, text and range now ({ srow, scol, erow, ecol }): anchored
--- when its answer came, else the completor's own (an answer from before the wrapper).
local function shown_item(c)
  local item = c.current
  local text = item and item_text(item.insert_text)
  if not text then
    return nil
  end
  local raw
  if type(c.get_item) == 'function' and item._index then
    local ok, _, found = pcall(c.get_item, c, item._index)
    raw = ok and found or nil
  end
  local anchor = raw and anchors[c.bufnr] and anchors[c.bufnr][raw]
  local range = partial.anchored(c.bufnr, ANCHORS, anchor)
  if not range and item.range then
    local s, e = item.range.start, item.range.end_
    range = { s.row, s.col, e.row, e.col }
  end
  return raw, text, range
end

--- Takes the shown item off the screen without cancelling the request in flight (it is for
--- where the cursor is now).
local function drop(c)
  c.current = nil
  if type(c.hide) == 'function' then
    c:hide()
  end
end

function M.setup(_) end

function M.attach(_, bufnr)
  if enabled then
    vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
    completor(bufnr)
  end
  local group = api.nvim_create_augroup('redraft.native.' .. bufnr, { clear = true })
  -- After the completor's own autocommands (which show the item again): take it off the
  -- screen once the cursor or the text no longer agrees with it.
  api.nvim_create_autocmd({ 'InsertEnter', 'CursorMovedI', 'TextChangedI' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.visible()
    end,
  })
end

local function redraft_buffers()
  local seen = {}
  for _, client in ipairs(require('redraft').clients()) do
    for _, bufnr in ipairs(vim.lsp.get_buffers_by_client_id(client.id)) do
      seen[bufnr] = true
    end
  end
  return vim.tbl_keys(seen)
end

function M.enable(on)
  enabled = on
  for _, bufnr in ipairs(redraft_buffers()) do
    vim.lsp.inline_completion.enable(on, { bufnr = bufnr })
  end
end

--- Whether a suggestion is on screen in the current buffer and the buffer still agrees with it;
--- one that does not is dismissed.
function M.visible()
  local c = completor()
  if not c or not c.current then
    return false
  end
  local _, text, range = shown_item(c)
  if not range then
    return true -- an item without a range goes at the cursor, wherever that is
  end
  local rest = partial.rest_at_cursor(c.bufnr, text, range[1], range[2])
  if rest and rest ~= '' then
    return true
  end
  drop(c)
  return false
end

--- Accepts the shown item, all of it (`kind` nil) or a word or line of it, into its anchored
--- range; false (and the item dismissed) when there is none the buffer agrees with.
local function accept(kind)
  if not M.visible() then
    return false
  end
  local c = completor()
  local bufnr = c.bufnr
  local _, text, range = shown_item(c)
  if not kind and type(c.current.insert_text) ~= 'string' then
    return vim.lsp.inline_completion.get() -- a snippet: the completor expands it
  end
  if not range then
    -- No range: the protocol inserts it at the cursor.
    local row, col = unpack(api.nvim_win_get_cursor(0))
    range = { row - 1, col, row - 1, col }
  end
  local item = c.current
  -- As the completor's own accept does: its item and requests go, then the text goes in.
  if type(c.abort) == 'function' then
    c:abort()
  else
    drop(c)
  end
  if not partial.accept(bufnr, text, range, kind) then
    return false
  end
  if not kind and item.command then
    local client = vim.lsp.get_client_by_id(item.client_id)
    if client then
      client:exec_cmd(item.command, { bufnr = bufnr })
    end
  end
  return true
end

function M.accept()
  return accept(nil)
end

function M.accept_partial(kind)
  return accept(kind)
end

--- Asks the server now, as an explicit invocation (several candidates).
function M.trigger()
  local c = completor()
  if c and type(c.request) == 'function' then
    c:request(vim.lsp.protocol.InlineCompletionTriggerKind.Invoked)
    return true
  end
  return false
end

function M.select(count)
  local c = completor()
  if not c or not c.current then
    return M.trigger()
  end
  if type(c.count_items) == 'function' and c:count_items() <= 1 then
    -- One automatic candidate: ask for the several an invocation computes.
    return M.trigger()
  end
  vim.lsp.inline_completion.select({ count = count })
  return true
end

function M.dismiss()
  local c = completor()
  if c and c.current and type(c.abort) == 'function' then
    c:abort()
    return true
  end
  return false
end

--- The namespace the native display draws in (tests read the ghost text from it).
M.namespace = api.nvim_create_namespace('nvim.lsp.inline_completion')

return M
