--- What a buffer has in flight for one feature (ghost text, next edits): its debounce timer
--- and its outstanding request, kept in the feature's per-buffer state as `timer`, `client_id`
--- and `request_id`.
local M = {}

--- Stops and closes the debounce timer, if any.
function M.stop_timer(state)
  if state.timer then
    state.timer:stop()
    if not state.timer:is_closing() then
      state.timer:close()
    end
    state.timer = nil
  end
end

--- Stops the timer and cancels the request in flight (the server stops decoding it).
function M.cancel(state)
  M.stop_timer(state)
  if state.request_id then
    local client = vim.lsp.get_client_by_id(state.client_id)
    if client then
      client:cancel_request(state.request_id)
    end
    state.request_id = nil
  end
end

return M
