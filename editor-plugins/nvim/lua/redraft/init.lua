--- redraft for Neovim: starts `redraft lsp` and shows its inline completions as ghost text and
--- its next edits (`redraft.nextedit`) as a diff in the buffer.
---
--- The plugin is thin on purpose: the server computes every suggestion and the plugin shows
--- it unchanged. On Neovim 0.12+ the display is the native `vim.lsp.inline_completion`; on 0.11
--- (or with `native = false`) the small extmark renderer in `redraft.ghost` stands in.
local M = {}

--- Defaults; `setup()` merges the user's table over them.
M.defaults = {
  --- The `redraft` binary: a path or a name looked up on `PATH`.
  cmd = { 'redraft', 'lsp' },
  --- Filetypes to attach to; nil: every buffer with a file (one without a filetype too).
  filetypes = nil,
  --- Sent as `initializationOptions` and in `workspace/didChangeConfiguration`, as given
  --- (camelCase keys, see the README): model, device, effort, maxTokens, contextTokens, languages,
  --- candidates, streamSteps, logLevel. The server validates them and reports bad values.
  --- `streamSteps = true` also draws each denoising step's draft while a suggestion is computed.
  settings = {},
  --- Use Neovim's own inline completion when it has one (0.12+).
  native = true,
  --- Insert-mode keys; set one to false to leave that key alone.
  keymaps = {
    accept = '<Tab>',
    accept_word = '<M-Right>',
    accept_line = '<M-C-Right>',
    next = '<M-]>',
    prev = '<M-[>',
    dismiss = '<C-]>',
    trigger = '<M-\\>',
  },
  --- Next edits (`textDocument/copilotInlineEdit`): keys in normal and insert mode, each
  --- overridable or false. Whether they are asked for, and after which pause, are the server's
  --- settings `nextEdit` / `nextEdit.debounceMs` (in `settings`), which the plugin follows.
  next_edit = {
    keymaps = {
      accept = '<M-CR>',
      jump = '<M-n>',
      dismiss = '<M-BS>',
      trigger = '<M-|>',
    },
  },
  --- Debounce for automatic requests in the fallback renderer (the native one has its own).
  debounce_ms = 150,
  --- A server that exits unexpectedly is restarted, at most this many times within
  --- `restart_window_s` seconds; then it stays stopped (`:Redraft restart` starts it again).
  max_restarts = 3,
  restart_window_s = 180,
}

M.config = vim.deepcopy(M.defaults)

--- What the server told us about itself; read by `:Redraft status` and `:checkhealth`.
M.state = {
  --- 'not started' | 'starting' | 'loading model' | 'ready' | 'error'
  status = 'not started',
  reason = nil,
  server_version = nil,
  --- What the server last said about its model: { loaded = bool, message = string }, or nil
  --- before it said anything (it loads the model right after start-up).
  model = nil,
  enabled = true,
}

local CLIENT_NAME = 'redraft'

local function has_native()
  return vim.lsp.inline_completion ~= nil and vim.lsp.inline_completion.enable ~= nil
end

--- Whether the native renderer is the one in use.
function M.uses_native()
  return M.config.native and has_native()
end

local function renderer()
  if M.uses_native() then
    return require('redraft.native')
  end
  return require('redraft.ghost')
end

--- Whether an inline completion is on screen in the current buffer (a next edit on its line
--- gives way to it).
function M.inline_visible()
  return renderer().visible()
end

--- The running redraft clients (one per root, usually one).
function M.clients(bufnr)
  return vim.lsp.get_clients({ name = CLIENT_NAME, bufnr = bufnr })
end

local function set_status(status, reason)
  M.state.status = status
  M.state.reason = reason
  local function announce()
    vim.api.nvim_exec_autocmds('User', { pattern = 'RedraftStatus', modeline = false })
  end
  -- on_exit runs in a fast event, where autocommands may not run yet.
  if vim.in_fast_event() then
    vim.schedule(announce)
  else
    announce()
  end
end

-- Keep the default behaviour of each handler and note what it says about the server's state.
local function wrap_handler(method, on_message)
  local default = vim.lsp.handlers[method]
  return function(err, result, ctx, config)
    if result then
      on_message(result)
    end
    if default then
      return default(err, result, ctx, config)
    end
  end
end

local function handlers()
  local steps = require('redraft.steps')
  return {
    [steps.METHOD] = steps.handler,
    ['window/showMessage'] = wrap_handler('window/showMessage', function(result)
      if result.type == vim.lsp.protocol.MessageType.Error then
        if result.message:match('model') then
          M.state.model = { loaded = false, message = result.message }
        end
        set_status('error', result.message)
      end
    end),
    -- redraft reports its model load as work-done progress: a begin, then an end whose message
    -- says "model loaded from ..." or "model not loaded: <reason>".
    ['$/progress'] = wrap_handler('$/progress', function(result)
      local value = result.value or {}
      if value.kind == 'begin' then
        M.state.model = nil
        set_status('loading model', value.title)
      elseif value.kind == 'end' and M.state.status == 'loading model' then
        local message = value.message or 'model loaded'
        local failed = message:match('^model not loaded') ~= nil
        M.state.model = { loaded = not failed, message = message }
        set_status(failed and 'error' or 'ready', message)
      end
    end),
  }
end

--- When the server was restarted after unexpected exits (`vim.uv.now()` milliseconds), for the
--- bound on restarts.
local restarts = {}

--- Stops every redraft client and starts the server again for every buffer (`:Redraft restart`).
local function enable_again()
  vim.lsp.enable(CLIENT_NAME, false)
  vim.lsp.enable(CLIENT_NAME)
end

--- Starts (or reuses) the redraft client for `bufnr` as `vim.lsp.enable` does on `FileType`:
--- a file's buffer, a filetype the config takes, the root found from its markers.
local function start_in(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= '' then
    return
  end
  local config = vim.lsp.config[CLIENT_NAME]
  if not config or (type(config.filetypes) == 'table' and not vim.tbl_contains(config.filetypes, vim.bo[bufnr].filetype)) then
    return
  end
  config = vim.deepcopy(config)
  if not config.root_dir and config.root_markers then
    config.root_dir = vim.fs.root(bufnr, config.root_markers)
  end
  vim.lsp.start(config, { bufnr = bufnr })
end

--- A server that was not asked to stop has crashed or was killed: say so (a status line nobody
--- looks at would leave the user without suggestions and without knowing) and start it again
--- for the buffers it served (`bufnrs`), unless it already needed `max_restarts` restarts within
--- `restart_window_s`. The other roots' servers keep running.
local function on_unexpected_exit(code, signal, bufnrs)
  local how = ('redraft lsp exited with code %d, signal %d'):format(code, signal)
  local now = vim.uv.now()
  local window_ms = (M.config.restart_window_s or 180) * 1000
  restarts = vim.tbl_filter(function(at)
    return now - at < window_ms
  end, restarts)
  local max = M.config.max_restarts or 3
  if #restarts >= max then
    local reason = ('%s; not restarting it after %d restarts within %d s (see :Redraft log, then :Redraft restart)'):format(
      how,
      #restarts,
      window_ms / 1000
    )
    set_status('error', reason)
    vim.schedule(function()
      vim.notify('redraft: ' .. reason, vim.log.levels.ERROR)
    end)
    return
  end
  restarts[#restarts + 1] = now
  local reason = ('%s; restarting it (%d of %d)'):format(how, #restarts, max)
  set_status('error', reason)
  -- Scheduled after Neovim's own clean-up of the exited client, which it schedules first.
  vim.schedule(function()
    vim.notify('redraft: ' .. reason, vim.log.levels.WARN)
    for _, bufnr in ipairs(bufnrs) do
      start_in(bufnr)
    end
  end)
end

local function resolve_cmd(cmd)
  if type(cmd) == 'string' then
    cmd = { cmd, 'lsp' }
  end
  return cmd
end

--- The settings the server gets: the user's (`config.settings`), with next edits off while
--- suggestions are off, so the server does not compute next edits nobody is shown. The switch
--- is always sent (as `nextEdit.enabled`, or `nextEdit` when that is not a table), since the
--- server keeps the value of a key it is not sent: coming back on restores the user's value.
--- No completion items unless the user asks for them: the plugin shows the suggestion itself,
--- and Neovim 0.11 announces no inline completions, so the server would also offer each
--- suggestion to a completion menu (nvim-cmp, blink.cmp): the same suggestion twice on screen
--- (computed once: the server shares a job, or its type-through cache, between the two).
function M.server_settings()
  local settings = vim.deepcopy(M.config.settings or {})
  if settings.completionItems == nil then
    settings.completionItems = false
  end
  local nested = settings.nextEdit
  local wanted
  if type(nested) == 'table' and nested.enabled ~= nil then
    wanted = nested.enabled
  elseif type(nested) == 'boolean' then
    wanted = nested
  else
    wanted = settings['nextEdit.enabled']
  end
  local on = M.state.enabled and wanted ~= false
  settings['nextEdit.enabled'] = nil
  if type(nested) == 'table' then
    nested.enabled = on
  else
    settings.nextEdit = on
  end
  return settings
end

local function lsp_config()
  local settings = M.server_settings()
  return {
    cmd = resolve_cmd(M.config.cmd),
    filetypes = M.config.filetypes,
    root_markers = { '.git' },
    workspace_required = false,
    init_options = settings,
    settings = { redraft = settings },
    -- A server started while suggestions are off (a restart) starts with next edits off.
    before_init = function(params, config)
      params.initializationOptions = M.server_settings()
      config.settings = { redraft = M.server_settings() }
    end,
    handlers = handlers(),
    on_init = function(client, result)
      M.state.server_version = result.serverInfo and result.serverInfo.version
      if M.state.status ~= 'loading model' and M.state.status ~= 'error' then
        set_status('ready')
      end
      return client
    end,
    on_exit = function(code, signal, client_id)
      -- The client still exists while on_exit runs; it knows whether a stop was asked for
      -- (`:Redraft restart`, `:LspStop`, quitting Neovim).
      local client = vim.lsp.get_client_by_id(client_id)
      if client and client._is_stopping then
        -- Another root's server still running keeps the status it set.
        if #vim.tbl_filter(function(other)
          return other.id ~= client_id and not other:is_stopped()
        end, M.clients()) == 0 then
          set_status('not started')
        end
      else
        on_unexpected_exit(code, signal, client and vim.tbl_keys(client.attached_buffers) or {})
      end
    end,
    on_attach = function(client, bufnr)
      renderer().attach(client, bufnr)
      require('redraft.nextedit').attach(client, bufnr)
    end,
  }
end

--- Sends the current settings (`M.server_settings()`) to running servers
--- (`workspace/didChangeConfiguration`).
function M.push_settings()
  for _, client in ipairs(M.clients()) do
    client.settings = { redraft = M.server_settings() }
    client:notify('workspace/didChangeConfiguration', { settings = client.settings })
  end
end

--- Keys mapped by the last setup(), removed when setup() runs again so a changed or disabled
--- key does not linger.
local mapped = {}

--- What each key mapped before redraft mapped it (`maparg()`'s dict, by mode and key): put back
--- when redraft unmaps the key, and done when the key has nothing of redraft's to act on.
local previous = {}

--- Neovim's own default for a key it maps (`:h default-mappings`), for when no mapping was
--- there before redraft's (a user may have removed it; then the key does what the default did).
local function neovim_default(key)
  local termcodes = vim.api.nvim_replace_termcodes
  for lhs, direction in pairs({ ['<Tab>'] = 1, ['<S-Tab>'] = -1 }) do
    if termcodes(key, true, false, true) == termcodes(lhs, true, false, true) then
      return function()
        if vim.snippet and vim.snippet.active({ direction = direction }) then
          return ('<Cmd>lua vim.snippet.jump(%d)<CR>'):format(direction), false
        end
        return key, false
      end
    end
  end
end

--- Lua mappings that are not <expr>, replayed through <Cmd> (fed keys can only name them), by
--- mode and key.
M._previous_callbacks = {}

--- The keys that do what `key` did before redraft mapped it in `mode`, and whether they are
--- to be remapped (a mapping that was not `noremap`).
local function previous_keys(mode, key)
  local before = previous[mode .. key]
  if not before then
    local default = neovim_default(key)
    if default then
      return default()
    end
    return key, false
  end
  local remap = before.noremap == 0
  local keys
  if before.callback then
    if before.expr == 1 then
      keys = before.callback() or ''
      if before.replace_keycodes ~= 1 then
        return keys, remap, true
      end
    else
      -- Named without `<`, so that replacing key codes leaves the name alone.
      local id = (mode .. key):gsub('[^%w]', '_')
      M._previous_callbacks[id] = before.callback
      return ('<Cmd>lua require("redraft")._previous_callbacks[%q]()<CR>'):format(id), false
    end
  else
    local rhs = (before.rhs or ''):gsub('<[Ss][Ii][Dd]>', ('<SNR>%d_'):format(before.sid or 0))
    keys = before.expr == 1 and vim.fn.eval(rhs) or rhs
  end
  return keys, remap
end

--- `previous_keys` as raw keys (termcodes replaced unless they already are).
local function previous_raw(mode, key)
  local keys, remap, raw = previous_keys(mode, key)
  if not raw then
    keys = vim.api.nvim_replace_termcodes(keys, true, false, true)
  end
  return keys, remap
end

--- For a mapping that is not <expr>: does what `key` did before (next, ahead of keys typed
--- after it).
local function fall_through(mode, key)
  local keys, remap = previous_raw(mode, key)
  vim.api.nvim_feedkeys(keys, remap and 'im' or 'in', false)
end

local function unmap_all()
  for _, entry in ipairs(mapped) do
    local mode, key = entry[1], entry[2]
    -- Only while it is still redraft's: a mapping the user made since stays.
    if (vim.fn.maparg(key, mode, false, true).desc or ''):match('^redraft:') then
      pcall(vim.keymap.del, mode, key)
      local before = previous[mode .. key]
      if before then
        pcall(vim.fn.mapset, mode, false, before)
      end
    end
  end
  mapped, previous = {}, {}
  M._previous_callbacks = {}
end

local function map(key, rhs, desc, opts, modes)
  if key and key ~= '' then
    for _, mode in ipairs(modes or { 'i' }) do
      local before = vim.fn.maparg(key, mode, false, true)
      -- Not redraft's own (left by a setup() from before the module was reloaded).
      if before.lhs and before.buffer == 0 and not (before.desc or ''):match('^redraft:') then
        previous[mode .. key] = before
      end
      local action = rhs
      if type(rhs) == 'function' then
        action = function()
          return rhs(mode)
        end
      end
      vim.keymap.set(mode, key, action, vim.tbl_extend('force', { desc = desc, silent = true }, opts or {}))
      mapped[#mapped + 1] = { mode, key }
    end
  end
end

--- Runs `action`; when it had nothing to act on, the key does what it did before.
local function or_key(key, action)
  return function(mode)
    if not action() then
      fall_through(mode, key)
    end
  end
end

local function set_next_edit_keymaps()
  local nextedit = require('redraft.nextedit')
  local keys = (M.config.next_edit or {}).keymaps or {}
  local modes = { 'n', 'i' }
  map(keys.accept, or_key(keys.accept, nextedit.accept), 'redraft: accept next edit', nil, modes)
  map(keys.jump, or_key(keys.jump, nextedit.jump), 'redraft: jump to next edit', nil, modes)
  map(keys.dismiss, or_key(keys.dismiss, nextedit.dismiss), 'redraft: dismiss next edit', nil, modes)
  map(keys.trigger, function()
    nextedit.trigger()
  end, 'redraft: suggest a next edit now', nil, modes)
end

local function set_keymaps()
  unmap_all()
  set_next_edit_keymaps()
  local keys = M.config.keymaps or {}
  -- Accept falls through to what the key did before when there is nothing to accept, so <Tab>
  -- still indents, or jumps to a snippet's next placeholder (Neovim's default <Tab>). Not an
  -- <expr> mapping: Neovim may evaluate those while it looks ahead in typed keys, before the
  -- keys typed ahead of this one are in the buffer.
  map(keys.accept, or_key(keys.accept, function()
    return M.state.enabled and renderer().accept()
  end), 'redraft: accept suggestion')
  map(keys.accept_word, function()
    renderer().accept_partial('word')
  end, 'redraft: accept next word')
  map(keys.accept_line, function()
    renderer().accept_partial('line')
  end, 'redraft: accept first line')
  map(keys.next, function()
    renderer().select(1)
  end, 'redraft: next candidate')
  map(keys.prev, function()
    renderer().select(-1)
  end, 'redraft: previous candidate')
  -- Nothing shown: the key does what it did before.
  map(keys.dismiss, or_key(keys.dismiss, function()
    return renderer().dismiss()
  end), 'redraft: dismiss suggestion')
  map(keys.trigger, function()
    renderer().trigger()
  end, 'redraft: suggest now (several candidates)')
end

--- Turns suggestions on or off everywhere. The server keeps running, with next edits off
--- while suggestions are (`M.server_settings()`).
function M.toggle(on)
  if on == nil then
    on = not M.state.enabled
  end
  M.state.enabled = on
  renderer().enable(on)
  if not on then
    require('redraft.nextedit').clear_all()
  end
  M.push_settings()
  vim.notify('redraft: suggestions ' .. (on and 'on' or 'off'))
end

--- Turns next edits on or off: the server's `nextEdit` setting, sent to running servers.
function M.set_next_edit(on)
  local settings = M.config.settings
  if type(settings.nextEdit) == 'table' then
    settings.nextEdit.enabled = on
  else
    settings.nextEdit = on
  end
  if settings['nextEdit.enabled'] ~= nil then
    settings['nextEdit.enabled'] = on
  end
  if not on then
    require('redraft.nextedit').clear_all()
  end
  M.push_settings()
  vim.notify('redraft: next edits ' .. (on and 'on' or 'off'))
end

--- Sets the effort for new requests and tells running servers.
function M.set_effort(effort)
  if not vim.tbl_contains({ 'low', 'medium', 'high' }, effort) then
    vim.notify(('redraft: effort must be low, medium or high, got %q'):format(tostring(effort)), vim.log.levels.ERROR)
    return
  end
  M.config.settings.effort = effort
  M.push_settings()
  vim.notify('redraft: effort ' .. effort)
end

--- One line that says what the plugin and the server are doing.
function M.status_line()
  local clients = M.clients()
  local head = 'redraft: ' .. M.state.status
  if M.state.reason then
    head = head .. ' (' .. M.state.reason .. ')'
  end
  local parts = { head }
  parts[#parts + 1] = M.state.enabled and 'suggestions on' or 'suggestions off'
  parts[#parts + 1] = require('redraft.nextedit').enabled() and 'next edits on' or 'next edits off'
  parts[#parts + 1] = ('%d client%s'):format(#clients, #clients == 1 and '' or 's')
  if M.state.server_version then
    parts[#parts + 1] = 'server ' .. M.state.server_version
  end
  parts[#parts + 1] = 'effort ' .. (M.config.settings.effort or 'default')
  parts[#parts + 1] = M.uses_native() and 'native display' or 'extmark display'
  return table.concat(parts, ', ')
end

local subcommands = {
  status = function()
    vim.notify(M.status_line())
  end,
  toggle = function()
    M.toggle()
  end,
  enable = function()
    M.toggle(true)
  end,
  disable = function()
    M.toggle(false)
  end,
  effort = function(args)
    if args[1] then
      M.set_effort(args[1])
    else
      vim.ui.select({ 'low', 'medium', 'high' }, { prompt = 'redraft effort' }, function(choice)
        if choice then
          M.set_effort(choice)
        end
      end)
    end
  end,
  nextedit = function(args)
    local nextedit = require('redraft.nextedit')
    local action = args[1] or 'request'
    if action == 'on' or action == 'off' then
      M.set_next_edit(action == 'on')
    elseif action == 'request' then
      if not nextedit.trigger() then
        vim.notify('redraft: no next edit asked for (next edits off, or no redraft server in this buffer)', vim.log.levels.WARN)
      end
    elseif nextedit[action] and vim.tbl_contains({ 'accept', 'jump', 'dismiss' }, action) then
      if not nextedit[action]() then
        vim.notify('redraft: no next edit shown', vim.log.levels.INFO)
      end
    else
      vim.notify(('redraft: nextedit takes request, accept, jump, dismiss, on or off, got %q'):format(action), vim.log.levels.ERROR)
    end
  end,
  log = function()
    vim.cmd.edit(vim.fn.fnameescape(vim.lsp.log.get_filename()))
  end,
  restart = function()
    for _, client in ipairs(M.clients()) do
      client:stop()
    end
    if not vim.wait(5000, function()
      return #M.clients() == 0
    end, 20) then
      for _, client in ipairs(M.clients()) do
        client:stop(true)
      end
    end
    -- Enabling again attaches every open buffer, which starts a fresh server. A restart by
    -- hand also forgets earlier crashes.
    restarts = {}
    set_status('starting')
    enable_again()
  end,
}

local function create_command()
  vim.api.nvim_create_user_command('Redraft', function(opts)
    local args = vim.split(vim.trim(opts.args), '%s+', { trimempty = true })
    local name = table.remove(args, 1) or 'status'
    local run = subcommands[name]
    if not run then
      vim.notify(('redraft: unknown subcommand %q (%s)'):format(name, table.concat(vim.tbl_keys(subcommands), ', ')), vim.log.levels.ERROR)
      return
    end
    run(args)
  end, {
    nargs = '*',
    desc = 'redraft: status | toggle | enable | disable | effort [low|medium|high] | nextedit [request|accept|jump|dismiss|on|off] | log | restart',
    complete = function(arglead, line)
      local words = vim.split(line, '%s+')
      local second = {
        effort = { 'low', 'medium', 'high' },
        nextedit = { 'request', 'accept', 'jump', 'dismiss', 'on', 'off' },
      }
      local options = #words <= 2 and vim.tbl_keys(subcommands) or (second[words[2]] or {})
      table.sort(options)
      return vim.tbl_filter(function(o)
        return vim.startswith(o, arglead)
      end, options)
    end,
  })
end

--- With `filetypes = nil` (every buffer), also a file's buffer that has no filetype:
--- `vim.lsp.enable` starts servers on `FileType`, which never fires for those. Buffers already
--- open get the server now, later ones once read or created (after filetype detection and
--- modelines, which may give them a filetype and `FileType` its turn).
local function attach_without_filetype()
  local group = vim.api.nvim_create_augroup('redraft.nofiletype', { clear = true })
  if M.config.filetypes ~= nil then
    return
  end
  local function check(bufnr)
    if vim.api.nvim_buf_is_valid(bufnr) and vim.bo[bufnr].filetype == '' and #M.clients(bufnr) == 0 then
      start_in(bufnr)
    end
  end
  vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile' }, {
    group = group,
    callback = function(args)
      vim.schedule(function()
        check(args.buf)
      end)
    end,
  })
  if vim.v.vim_did_enter == 1 then
    for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(bufnr) and vim.api.nvim_buf_get_name(bufnr) ~= '' then
        check(bufnr)
      end
    end
  end
end

--- Configures and starts redraft. Safe to call again: the new options replace the old ones.
function M.setup(opts)
  if vim.fn.has('nvim-0.11') ~= 1 then
    vim.notify('redraft: needs Neovim 0.11 or newer', vim.log.levels.ERROR)
    return
  end
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  if opts and opts.keymaps == false then
    M.config.keymaps = {}
  end
  if opts and (opts.next_edit == false or (type(opts.next_edit) == 'table' and opts.next_edit.keymaps == false)) then
    M.config.next_edit = { keymaps = {} }
  end
  local cmd = resolve_cmd(M.config.cmd)
  if vim.fn.executable(cmd[1]) ~= 1 then
    set_status('error', ('`%s` not found: install redraft or set cmd in setup()'):format(cmd[1]))
    vim.notify('redraft: ' .. M.state.reason, vim.log.levels.WARN)
  else
    set_status('starting')
  end
  -- Assigned, not merged into the last setup()'s (`vim.lsp.config()` would keep its filetypes).
  vim.lsp.config[CLIENT_NAME] = lsp_config()
  vim.lsp.enable(CLIENT_NAME)
  attach_without_filetype()
  renderer().setup(M.config)
  require('redraft.nextedit').setup(M.config.next_edit)
  set_keymaps()
  create_command()
  M.push_settings()
  return M
end

return M
