--- Ghost text with extmarks for Neovim 0.11, which has no `vim.lsp.inline_completion` (also used
--- on 0.12 with `native = false`). It asks `textDocument/inlineCompletion` after a debounce,
--- drops answers for a buffer state that has moved on, and shows the server's item unchanged:
--- the part already typed is skipped, the rest drawn after the cursor (a one-line rest without
--- the text after the cursor it replaces, so a closing bracket the item writes again shows
--- once: the cursor's line reads as accepting its first line leaves it). Each item's
--- range is anchored when the answer arrives (`redraft.partial`), so it follows later typing.
local partial = require('redraft.partial')

local M = {}
local api = vim.api

local METHOD = 'textDocument/inlineCompletion'
local AUTOMATIC = 2
local INVOKED = 1

M.namespace = api.nvim_create_namespace('redraft.ghost')
--- The items' anchored ranges.
local ANCHORS = api.nvim_create_namespace('redraft.ghost.anchors')

local config = { debounce_ms = 150 }
local enabled = true

--- Per buffer: { client_id, timer, request_id, items, anchors, index }.
local buffers = {}

local function cursor_key()
  local row, col = unpack(api.nvim_win_get_cursor(0))
  return row .. ':' .. col
end

local function hide(bufnr)
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, M.namespace, 0, -1)
  end
end

local cancel = require('redraft.pending').cancel

local function forget_items(bufnr, state)
  state.items, state.anchors, state.index = nil, nil, nil
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, ANCHORS, 0, -1)
  end
end

local function clear(bufnr)
  local state = buffers[bufnr]
  if state then
    cancel(state)
    forget_items(bufnr, state)
  end
  hide(bufnr)
end

local function item_text(item)
  local text = type(item.insertText) == 'string' and item.insertText or (item.insertText or {}).value
  return type(text) == 'string' and text or nil
end

--- The current item as text still to insert after the cursor, with the item, its text and
--- its range now; nil when the buffer no longer agrees with it.
local function current(bufnr)
  local state = buffers[bufnr]
  local item = state and state.items and state.items[state.index]
  local text = item and item_text(item)
  local range = text and partial.anchored(bufnr, ANCHORS, state.anchors[state.index])
  if not range then
    return nil
  end
  return partial.rest_at_cursor(bufnr, text, range[1], range[2]), item, text, range
end

local function show(bufnr)
  hide(bufnr)
  local rest, _, _, range = current(bufnr)
  if not rest or rest == '' then
    return
  end
  local state = buffers[bufnr]
  local lines = vim.split(rest, '\n', { plain = true })
  -- The text after the cursor that the item replaces stays on screen. The cursor's line is
  -- drawn as accepting its first line leaves it (`partial.accept`): when that is the whole rest
  -- of the item it replaces that text, so a rest that ends with it is drawn without it (the
  -- bracket shows once); a rest with more lines to come keeps it after its first line.
  local replaced = partial.replaced_after_cursor(bufnr, range)
  if #lines == 1 and replaced ~= '' and #lines[1] >= #replaced and lines[1]:sub(-#replaced) == replaced then
    lines[1] = lines[1]:sub(1, #lines[1] - #replaced)
  end
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { lines[i], 'Comment' } }
  end
  local virt_text = { { lines[1], 'Comment' } }
  if #state.items > 1 then
    local hint = { (' (%d/%d)'):format(state.index, #state.items), 'NonText' }
    local last = virt_lines[#virt_lines] or virt_text
    last[#last + 1] = hint
  end
  local row, col = unpack(api.nvim_win_get_cursor(0))
  api.nvim_buf_set_extmark(bufnr, M.namespace, row - 1, col, {
    virt_text = virt_text,
    virt_text_pos = 'inline',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    hl_mode = 'combine',
  })
end

local function request(bufnr, kind)
  local state = buffers[bufnr]
  if not state or not enabled then
    return
  end
  local client = vim.lsp.get_client_by_id(state.client_id)
  if not client then
    return
  end
  cancel(state)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = kind }
  local tick, where = api.nvim_buf_get_changedtick(bufnr), cursor_key()
  local ok, id
  ok, id = client:request(METHOD, params, function(err, result)
    if state.request_id == id then
      state.request_id = nil
    end
    -- An answer for text or a cursor that has since moved on is stale.
    if err or not result or api.nvim_buf_get_changedtick(bufnr) ~= tick or cursor_key() ~= where then
      return
    end
    if not api.nvim_get_mode().mode:match('^i') then
      return
    end
    forget_items(bufnr, state)
    state.items = result.items or result
    state.anchors = {}
    for i, item in ipairs(state.items) do
      state.anchors[i] = partial.anchor_lsp(bufnr, ANCHORS, item.range, client.offset_encoding)
    end
    state.index = 1
    show(bufnr)
  end, bufnr)
  if ok then
    state.request_id = id
  end
end

local function schedule_request(bufnr)
  local state = buffers[bufnr]
  if not state then
    return
  end
  cancel(state)
  state.timer = vim.defer_fn(function()
    state.timer = nil
    if api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr then
      request(bufnr, AUTOMATIC)
    end
  end, config.debounce_ms)
end

function M.setup(cfg)
  config.debounce_ms = cfg.debounce_ms or config.debounce_ms
end

function M.attach(client, bufnr)
  if buffers[bufnr] then
    buffers[bufnr].client_id = client.id
    return
  end
  buffers[bufnr] = { client_id = client.id }
  local group = api.nvim_create_augroup('redraft.ghost.' .. bufnr, { clear = true })
  api.nvim_create_autocmd({ 'InsertEnter', 'TextChangedI', 'CursorMovedI' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      -- Keep showing what still matches while the next answer is computed.
      show(bufnr)
      schedule_request(bufnr)
    end,
  })
  api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      clear(bufnr)
    end,
  })
  api.nvim_create_autocmd('LspDetach', {
    group = group,
    buffer = bufnr,
    callback = function(args)
      if args.data and args.data.client_id == client.id then
        clear(bufnr)
        buffers[bufnr] = nil
        api.nvim_del_augroup_by_id(group)
      end
    end,
  })
end

function M.enable(on)
  enabled = on
  if not on then
    for bufnr in pairs(buffers) do
      clear(bufnr)
    end
  end
end

function M.visible()
  local rest = current(api.nvim_get_current_buf())
  return rest ~= nil and rest ~= ''
end

local function apply(kind)
  local bufnr = api.nvim_get_current_buf()
  local rest, _, text, range = current(bufnr)
  if not rest or rest == '' then
    return false
  end
  clear(bufnr)
  return partial.accept(bufnr, text, range, kind)
end

function M.accept()
  return apply(nil)
end

function M.accept_partial(kind)
  return apply(kind)
end

function M.trigger()
  local bufnr = api.nvim_get_current_buf()
  if not buffers[bufnr] then
    return false
  end
  request(bufnr, INVOKED)
  return true
end

function M.select(count)
  local bufnr = api.nvim_get_current_buf()
  local state = buffers[bufnr]
  if not state or not state.items or #state.items <= 1 then
    return M.trigger()
  end
  state.index = (state.index - 1 + count) % #state.items + 1
  show(bufnr)
  return true
end

function M.dismiss()
  local bufnr = api.nvim_get_current_buf()
  local shown = M.visible()
  clear(bufnr)
  return shown
end

return M
