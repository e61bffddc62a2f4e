--- Accepting a suggestion, whole or in part (next word, first line), shared by both renderers: it
--- only decides where the server's item goes and how much of it to insert, never what it says.
---
--- An item's range is anchored with extmarks when its answer arrives, so it follows the text
--- typed after that: its start stays put (left gravity) and its end moves on with what is typed
--- at it (right gravity). An item is accepted only while the buffer still agrees with it: the
--- cursor on the line its range starts on, at or after the start, and the text typed since the
--- start a prefix of the item's text. Otherwise the renderer drops it and the key does what it
--- did before.
local M = {}
local api = vim.api

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
  -- `%w` is ASCII only: every byte of a multi-byte UTF-8 character (0x80 and up) counts as a
  -- word character, so `größe` is one word and a character is never split.
  local word = rest:match('^[%w_\128-\255]+') or rest:match('^[^%w_%s\128-\255]+') or ''
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

--- The buffer text between a 0-based (row, col) start and the cursor, when both are on one line.
function M.typed_since(bufnr, start_row, start_col)
  local row, col = unpack(api.nvim_win_get_cursor(0))
  if row - 1 ~= start_row or col < start_col then
    return nil
  end
  local line = api.nvim_buf_get_lines(bufnr, start_row, start_row + 1, true)[1]
  return line:sub(start_col + 1, col)
end

--- What is left of `text` to insert at the cursor while the buffer agrees with an item whose
--- range starts at (`start_row`, `start_col`); nil once it does not.
function M.rest_at_cursor(bufnr, text, start_row, start_col)
  local typed = M.typed_since(bufnr, start_row, start_col)
  return typed and M.remaining(text, typed)
end

--- Anchors a range (0-based rows, byte columns) in `namespace`; nil when the positions are
--- outside the buffer.
---@return { start: integer, end_: integer }?
function M.anchor(bufnr, namespace, srow, scol, erow, ecol)
  local ok_start, start = pcall(api.nvim_buf_set_extmark, bufnr, namespace, srow, scol, { right_gravity = false })
  local ok_end, end_ = pcall(api.nvim_buf_set_extmark, bufnr, namespace, erow, ecol, { right_gravity = true })
  if not (ok_start and ok_end) then
    return nil
  end
  return { start = start, end_ = end_ }
end

--- Anchors an LSP range, or the cursor for an item without one (the protocol inserts those at
--- the cursor).
function M.anchor_lsp(bufnr, namespace, range, encoding)
  if not range then
    local row, col = unpack(api.nvim_win_get_cursor(0))
    return M.anchor(bufnr, namespace, row - 1, col, row - 1, col)
  end
  local function position(pos)
    local line = api.nvim_buf_get_lines(bufnr, pos.line, pos.line + 1, false)[1]
    if not line then
      return nil
    end
    local ok, col = pcall(vim.str_byteindex, line, encoding, pos.character, false)
    return pos.line, ok and col or #line
  end
  local srow, scol = position(range.start)
  local erow, ecol = position(range['end'])
  if not srow or not erow then
    return nil
  end
  return M.anchor(bufnr, namespace, srow, scol, erow, ecol)
end

--- Where an anchored range is now: { srow, scol, erow, ecol }, or nil once its marks are gone.
function M.anchored(bufnr, namespace, anchor)
  if not anchor then
    return nil
  end
  local s = api.nvim_buf_get_extmark_by_id(bufnr, namespace, anchor.start, {})
  local e = api.nvim_buf_get_extmark_by_id(bufnr, namespace, anchor.end_, {})
  if not s[1] or not e[1] then
    return nil
  end
  return { s[1], s[2], e[1], e[2] }
end

--- The buffer text a replacement starting at the cursor takes away (cursor .. range end), when
--- the range ends past the cursor on the cursor's line: "" otherwise.
function M.replaced_after_cursor(bufnr, range)
  local row, col = unpack(api.nvim_win_get_cursor(0))
  if range[3] ~= row - 1 or range[4] <= col then
    return ''
  end
  local line = api.nvim_buf_get_lines(bufnr, row - 1, row, true)[1]
  return line:sub(col + 1, range[4])
end

local function set_text(bufnr, srow, scol, erow, ecol, text)
  local lines = vim.split(text, '\n', { plain = true })
  api.nvim_buf_set_text(bufnr, srow, scol, erow, ecol, lines)
  api.nvim_win_set_cursor(0, { srow + #lines, (#lines == 1 and scol or 0) + #lines[#lines] })
end

--- Accepts the item `text` whose range is now `range` ({ srow, scol, erow, ecol }): all of it
--- (`kind` nil) replaces the range, as the server asked (it may reach past the cursor, over a
--- closing bracket the model wrote again); a word or a line is inserted at the cursor, and only
--- the piece that is the whole rest of the item also replaces what the range covers after the
--- cursor, so the bracket is not doubled. A piece that leaves some of the item to come keeps
--- that text: the rest still replaces it when it is accepted (the range's end follows the
--- insertions before it). Returns false, changing nothing, when the buffer no longer agrees
--- with the item.
---@param kind? 'word'|'line'
function M.accept(bufnr, text, range, kind)
  local srow, scol, erow, ecol = unpack(range)
  local rest = M.rest_at_cursor(bufnr, text, srow, scol)
  if not rest or rest == '' then
    return false
  end
  local row, col = unpack(api.nvim_win_get_cursor(0))
  row = row - 1
  -- What was typed since the start belongs to the item: the range covers it at least.
  if erow < row or (erow == row and ecol < col) then
    erow, ecol = row, col
  end
  if not kind then
    set_text(bufnr, srow, scol, erow, ecol, text)
    return true
  end
  local piece = M.piece(rest, kind)
  if piece == rest then
    set_text(bufnr, row, col, erow, ecol, piece)
  else
    set_text(bufnr, row, col, row, col, piece)
  end
  return true
end

return M
