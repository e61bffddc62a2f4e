--- `:checkhealth redraft`: is the binary there, which version, did the model load, which
--- position encoding the server chose, and how next edits stand.
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

local function ago(at)
  return ('%.1f s ago'):format((vim.uv.now() - at) / 1000)
end

--- Asks `client` for a next edit of a document version that cannot be current (-1): a server
--- that knows the method answers at once with no edits, one that does not says so.
local function probe(client, nextedit)
  local bufnr = vim.lsp.get_buffers_by_client_id(client.id)[1]
  if not bufnr then
    return nil, 'no buffer attached to ask about'
  end
  local response, err = client:request_sync(nextedit.METHOD, {
    textDocument = { uri = vim.uri_from_bufnr(bufnr), version = -1 },
    position = { line = 0, character = 0 },
  }, 5000, bufnr)
  if not response then
    return nil, err or 'no answer within 5 s'
  end
  if response.err then
    return response.err.code ~= -32601, response.err.message
  end
  return true
end

local function next_edits(redraft, clients)
  local nextedit = require('redraft.nextedit')
  health.start('redraft: next edits')
  if nextedit.enabled() then
    local delay = nextedit.debounce_ms()
    health.ok(('next edits on: asked for %s'):format(
      delay > 0 and ('after a %d ms pause, on the trigger key and after an accept'):format(delay)
        or 'on the trigger key and after an accept (nextEdit.debounceMs is 0)'
    ))
  elseif not redraft.state.enabled then
    health.info('next edits off (suggestions are off: :Redraft enable)')
  else
    health.info('next edits off (settings.nextEdit; :Redraft nextedit on)')
  end
  local keys = (redraft.config.next_edit or {}).keymaps or {}
  local names = {}
  for _, action in ipairs({ 'accept', 'jump', 'dismiss', 'trigger' }) do
    names[#names + 1] = ('%s %s'):format(action, keys[action] or '(unmapped)')
  end
  health.info('keys (normal and insert mode): ' .. table.concat(names, ', '))
  for _, client in ipairs(clients) do
    local ok, why = probe(client, nextedit)
    if ok then
      health.ok(('server answers %s (client %d)'):format(nextedit.METHOD, client.id))
    elseif ok == false then
      health.error(('server does not answer %s: %s'):format(nextedit.METHOD, why or ''), { 'update redraft' })
    else
      health.warn(('could not ask the server about %s: %s'):format(nextedit.METHOD, why or ''))
    end
    local provider = client.server_capabilities and client.server_capabilities.executeCommandProvider
    local commands = type(provider) == 'table' and provider.commands or {}
    health.info('accept command(s) the server runs: ' .. (#commands > 0 and table.concat(commands, ', ') or 'none listed'))
  end
  local state = nextedit.state
  local request = state.last_request
  if request then
    health.info(('last request %s: buffer %d, line %d, version %s (%s)'):format(
      ago(request.at), request.bufnr, request.line + 1, tostring(request.version), request.reason or ''
    ))
  else
    health.info('no next edit asked for yet')
  end
  local answer = state.last_answer
  if answer then
    health.info(('last answer %s: %s%s'):format(ago(answer.at), answer.outcome, answer.message and (' (' .. answer.message .. ')') or ''))
  end
  health.info(('since start-up: %d asked, %d shown, %d accepted, %d stale answers dropped'):format(
    state.requests, state.shown, state.accepted, state.stale
  ))
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
      'install it with `cargo install --path cli` from the redraft checkout',
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
    local name = settings.model
    if name:lower():match('^hf:') or name:lower():match('^ollama:') then
      health.ok('model by name: ' .. name .. ' (the server finds it in the Hugging Face or Ollama cache, downloading what the Hugging Face cache lacks)')
    else
      local model = vim.fn.expand(name)
      if vim.fn.isdirectory(model) == 1 then
        health.ok('model directory: ' .. model)
      elseif vim.fn.filereadable(model) == 1 then
        health.ok('model file: ' .. model)
      else
        health.error('model path does not exist: ' .. model, { 'fix settings.model (a name such as hf:ORG/REPO:Q4_K_M, a model directory or a GGUF file), or remove it to use the built-in model' })
      end
    end
  else
    health.info('model: the one built into the binary')
  end

  local clients = redraft.clients()
  if #clients == 0 then
    health.warn('no redraft server running', {
      'open a file (the server starts with the first buffer) and run :checkhealth redraft again',
    })
    next_edits(redraft, clients)
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
      'fix settings.model (a name such as hf:ORG/REPO:Q4_K_M, a model directory or a GGUF file), or remove it to use the built-in model',
      ':Redraft log shows the server log',
    })
  elseif redraft.state.status == 'error' then
    health.error('server error: ' .. (redraft.state.reason or 'no reason given'), { ':Redraft log shows the server log' })
  else
    health.info('model: no report from the server yet (' .. redraft.state.status .. '); run :checkhealth redraft again in a moment')
  end
  next_edits(redraft, clients)
end

return M
