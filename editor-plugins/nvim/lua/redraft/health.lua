--- `:checkhealth redraft`: is the binary there, which version, did the model load, which
--- position encoding the server chose.
local M = {}

local health = vim.health

local function binary()
  local redraft = require('redraft')
  local cmd = redraft.config.cmd
  if type(cmd) == 'string' then
    cmd = { cmd }
  end
  return cmd[1]
end

function M.check()
  local redraft = require('redraft')
  health.start('redraft')

  if vim.fn.has('nvim-0.12') == 1 and vim.lsp.inline_completion then
    health.ok('Neovim ' .. tostring(vim.version()) .. ': native inline completion available')
  elseif vim.fn.has('nvim-0.11') == 1 then
    health.warn('Neovim ' .. tostring(vim.version()) .. ': no native inline completion, using the extmark display', {
      'Neovim 0.12 or newer shows suggestions with vim.lsp.inline_completion',
    })
  else
    health.error('Neovim 0.11 or newer is required')
  end
  health.info('display: ' .. (redraft.uses_native() and 'native (vim.lsp.inline_completion)' or 'extmarks (redraft.ghost)'))

  local bin = binary()
  local path = vim.fn.exepath(bin)
  if path == '' then
    health.error(('redraft binary not found: `%s`'):format(bin), {
      'install it with `cargo install --path lsp-server` from the redraft checkout',
      "or point setup() at it: require('redraft').setup({ cmd = { '/path/to/redraft', 'lsp' } })",
    })
  else
    health.ok('redraft binary: ' .. path)
    local result = vim.system({ path, '--version' }, { text = true }):wait(10000)
    if result.code == 0 then
      health.ok('version: ' .. vim.trim(result.stdout))
    else
      health.error(('`%s --version` failed (exit %s): %s'):format(path, tostring(result.code), vim.trim(result.stderr or '')))
    end
  end

  local settings = redraft.config.settings or {}
  if settings.model and settings.model ~= vim.NIL and settings.model ~= '' then
    local model = vim.fn.expand(settings.model)
    if vim.fn.isdirectory(model) == 1 then
      health.ok('model directory: ' .. model)
    else
      health.error('model directory does not exist: ' .. model, { 'fix settings.model, or remove it to use the built-in model' })
    end
  else
    health.info('model: the one built into the binary')
  end

  local clients = redraft.clients()
  if #clients == 0 then
    health.warn('no redraft server running', {
      'open a file (the server starts with the first buffer) and run :checkhealth redraft again',
    })
    return
  end
  for _, client in ipairs(clients) do
    health.ok(('server running (client %d, root %s)'):format(client.id, client.root_dir or 'none'))
    health.info('position encoding: ' .. tostring(client.offset_encoding))
    local inline = client.server_capabilities and client.server_capabilities.inlineCompletionProvider
    if inline then
      health.ok('server offers textDocument/inlineCompletion')
    else
      health.error('server does not offer textDocument/inlineCompletion', { 'update redraft' })
    end
  end
  local model = redraft.state.model
  if model and model.loaded then
    health.ok(model.message)
  elseif model then
    health.error(model.message, {
      'fix settings.model (a model directory), or remove it to use the built-in model',
      ':Redraft log shows the server log',
    })
  elseif redraft.state.status == 'error' then
    health.error('server error: ' .. (redraft.state.reason or 'no reason given'), { ':Redraft log shows the server log' })
  else
    health.info('model: no report from the server yet (' .. redraft.state.status .. '); run :checkhealth redraft again in a moment')
  end
end

return M
