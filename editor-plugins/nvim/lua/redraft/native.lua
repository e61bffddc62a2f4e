--- Neovim 0.12+'s own inline completion (`vim.lsp.inline_completion`) as redraft's display.
---
--- The native module has no public "invoke now" or "dismiss"; both reach its per-buffer
--- completor through `vim.lsp._capability`, guarded so that a change there degrades to a
--- no-op instead of an error.
local partial = require('redraft.partial')

local M = {}
local api = vim.api

local enabled = true

local function completor(bufnr)
  local ok, capability = pcall(require, 'vim.lsp._capability')
  local class = ok and type(capability.all) == 'table' and capability.all.inline_completion
  if not class or type(class.active) ~= 'table' then
    return nil
  end
  return class.active[bufnr or api.nvim_get_current_buf()]
end

function M.setup(_) end

function M.attach(_, bufnr)
  if enabled then
    vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
  end
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

--- Whether a suggestion is on screen in the current buffer.
function M.visible()
  local c = completor()
  return c ~= nil and c.current ~= nil
end

function M.accept()
  return vim.lsp.inline_completion.get()
end

function M.accept_partial(kind)
  return vim.lsp.inline_completion.get({
    on_accept = function(item)
      local text = item.insert_text
      if type(text) ~= 'string' then
        text = tostring(text.value)
      end
      local bufnr = api.nvim_get_current_buf()
      local rest = text
      if item.range then
        local typed = partial.typed_since(bufnr, item.range.start.row, item.range.start.col)
        rest = typed and partial.remaining(text, typed)
      end
      if rest and rest ~= '' then
        partial.insert_at_cursor(bufnr, partial.piece(rest, kind))
      end
    end,
  })
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
