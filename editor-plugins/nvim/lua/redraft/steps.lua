--- The denoising drafts of `redraft/draftStep` (a redraft protocol extension, sent only when
--- `settings.streamSteps` is true), drawn at the cursor while the suggestion is computed: the
--- model's "developing photo", masked slots shown as ░. It is a preview only: the draft is
--- cleared at the last step, and what can be accepted is always the final inline completion.
local M = {}
local api = vim.api

M.namespace = api.nvim_create_namespace('redraft.steps')
M.METHOD = 'redraft/draftStep'

--- Drafts seen since start-up (tests and `:Redraft status` read it).
M.count = 0

local function clear(bufnr)
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, M.namespace, 0, -1)
  end
end

local watched = {}

local function watch(bufnr)
  if watched[bufnr] then
    return
  end
  watched[bufnr] = true
  api.nvim_create_autocmd({ 'TextChangedI', 'InsertLeave', 'BufLeave' }, {
    buffer = bufnr,
    callback = function()
      clear(bufnr)
    end,
  })
end

--- Handler for the notification; drafts for another document version or cursor are stale.
function M.handler(_, params, ctx)
  if type(params) ~= 'table' or type(params.textDocument) ~= 'table' then
    return
  end
  M.count = M.count + 1
  local bufnr = vim.uri_to_bufnr(params.textDocument.uri)
  if not api.nvim_buf_is_loaded(bufnr) or bufnr ~= api.nvim_get_current_buf() then
    return
  end
  watch(bufnr)
  clear(bufnr)
  local version = vim.lsp.util.buf_versions[bufnr]
  if params.masked == 0 or (version and params.textDocument.version ~= version) then
    return
  end
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local row = params.position.line
  local line = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1]
  if not client or not line then
    return
  end
  local col = vim.str_byteindex(line, client.offset_encoding, params.position.character, false)
  local cursor = api.nvim_win_get_cursor(0)
  if cursor[1] - 1 ~= row or cursor[2] ~= col then
    return
  end
  local lines = vim.split(params.draft or '', '\n', { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { lines[i], 'NonText' } }
  end
  api.nvim_buf_set_extmark(bufnr, M.namespace, row, col, {
    virt_text = { { lines[1], 'NonText' }, { (' step %d'):format(params.step + 1), 'Comment' } },
    virt_text_pos = 'inline',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
  })
end

return M
