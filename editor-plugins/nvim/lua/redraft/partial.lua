--- Partial acceptance (next word, first line) shared by both renderers: it only decides how much
--- of the server's suggestion to insert, never what the suggestion is.
local M = {}

--- The part of `text` (the suggestion still to be inserted after the cursor) that one
--- "accept word" or "accept line" takes.
---@param text string
---@param kind 'word'|'line'
---@return string
function M.piece(text, kind)
  if kind == 'line' then
    local newline = text:find('\n', 1, true)
    if newline == 1 then
      -- At a line end: take the line break and the whole next line.
      local second = text:find('\n', 2, true)
      return second and text:sub(1, second - 1) or text
    end
    return newline and text:sub(1, newline - 1) or text
  end
  local leading = text:match('^%s*')
  local rest = text:sub(#leading + 1)
  local word = rest:match('^[%w_]+') or rest:match('^[^%w_%s]+') or ''
  return leading .. word
end

--- What is left of `insert_text` once the part already typed (range start .. cursor) is
--- dropped; nil when the typed text no longer matches the suggestion.
---@param insert_text string
---@param typed string
---@return string?
function M.remaining(insert_text, typed)
  if insert_text:sub(1, #typed) ~= typed then
    return nil
  end
  return insert_text:sub(#typed + 1)
end

--- Inserts `piece` at the cursor of the current window and moves the cursor past it.
function M.insert_at_cursor(bufnr, piece)
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local lines = vim.split(piece, '\n', { plain = true })
  vim.api.nvim_buf_set_text(bufnr, row - 1, col, row - 1, col, lines)
  local last = lines[#lines]
  vim.api.nvim_win_set_cursor(0, { row + #lines - 1, (#lines == 1 and col or 0) + #last })
end

--- The buffer text between a 0-based (row, col) start and the cursor, when both are on one line.
function M.typed_since(bufnr, start_row, start_col)
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  if row - 1 ~= start_row or col < start_col then
    return nil
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, start_row, start_row + 1, true)[1]
  return line:sub(start_col + 1, col)
end

return M
