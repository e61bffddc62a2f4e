//! LSP positions <-> byte offsets: the one place that knows what a `Position` means.
//!
//! A position is a line (split at `\n`, `\r\n` or `\r`, as LSP says; the rope is built with
//! exactly those breaks) and a column counted in the negotiated encoding: UTF-8 bytes, UTF-16
//! code units (the protocol's default) or UTF-32 code points. Everything behind this module works
//! in byte offsets into the document text.

use ropey::{Rope, RopeSlice};
use tower_lsp_server::ls_types::{Position, PositionEncodingKind, Range};

/// How columns are counted, as negotiated at `initialize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PositionEncoding {
    Utf8,
    #[default]
    Utf16,
    Utf32,
}

impl PositionEncoding {
    /// Every encoding, for tests that must hold in all of them.
    #[cfg(test)]
    pub const ALL: [PositionEncoding; 3] = [
        PositionEncoding::Utf8,
        PositionEncoding::Utf16,
        PositionEncoding::Utf32,
    ];
}

/// A position that names no place in the document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PositionError {
    #[error("line {line} is past the end of the document ({lines} lines)")]
    LinePastEnd { line: u32, lines: usize },
    #[error("range ends before it starts ({start:?} > {end:?})")]
    Reversed { start: Position, end: Position },
}

impl PositionEncoding {
    /// The encoding to use given what the client offers: UTF-8 first (the text is UTF-8, so
    /// columns are cheapest), then UTF-32, else the protocol's mandatory UTF-16.
    pub fn negotiate(offered: Option<&[PositionEncodingKind]>) -> PositionEncoding {
        let offered = offered.unwrap_or_default();
        let has = |kind: &PositionEncodingKind| offered.iter().any(|o| o == kind);
        if has(&PositionEncodingKind::UTF8) {
            PositionEncoding::Utf8
        } else if has(&PositionEncodingKind::UTF32) {
            PositionEncoding::Utf32
        } else {
            PositionEncoding::Utf16
        }
    }

    pub fn kind(self) -> PositionEncodingKind {
        match self {
            PositionEncoding::Utf8 => PositionEncodingKind::UTF8,
            PositionEncoding::Utf16 => PositionEncodingKind::UTF16,
            PositionEncoding::Utf32 => PositionEncodingKind::UTF32,
        }
    }

    /// The byte offset of `position`. A column past the end of its line means the line's end
    /// (the protocol says so); a column inside a character (a UTF-16 surrogate pair, a UTF-8
    /// continuation byte) means that character's start. A line past the last is an error.
    pub fn offset(self, rope: &Rope, position: Position) -> Result<usize, PositionError> {
        let line = position.line as usize;
        if line >= rope.len_lines() {
            return Err(PositionError::LinePastEnd {
                line: position.line,
                lines: rope.len_lines(),
            });
        }
        let start = rope.line_to_byte(line);
        let content = line_content(rope.line(line));
        let column = position.character as usize;
        let chars = match self {
            PositionEncoding::Utf8 => content.byte_to_char(column.min(content.len_bytes())),
            PositionEncoding::Utf16 => content.utf16_cu_to_char(column.min(content.len_utf16_cu())),
            PositionEncoding::Utf32 => column.min(content.len_chars()),
        };
        Ok(start + content.char_to_byte(chars))
    }

    /// Like [`offset`](Self::offset), but a line past the last means the end of the document:
    /// edits from clients that address "everything" that way still apply.
    pub fn offset_clamped(self, rope: &Rope, position: Position) -> usize {
        self.offset(rope, position).unwrap_or(rope.len_bytes())
    }

    /// The byte range of an edit's `range` (see [`offset_clamped`](Self::offset_clamped)).
    pub fn edit_range(
        self,
        rope: &Rope,
        range: Range,
    ) -> Result<std::ops::Range<usize>, PositionError> {
        let start = self.offset_clamped(rope, range.start);
        let end = self.offset_clamped(rope, range.end);
        if start > end {
            return Err(PositionError::Reversed {
                start: range.start,
                end: range.end,
            });
        }
        Ok(start..end)
    }

    /// The position of byte offset `byte` (clamped to the document, rounded down to a char
    /// boundary).
    pub fn position(self, rope: &Rope, byte: usize) -> Position {
        let byte = byte.min(rope.len_bytes());
        let byte = rope.char_to_byte(rope.byte_to_char(byte));
        let line = rope.byte_to_line(byte);
        let before = rope.byte_slice(rope.line_to_byte(line)..byte);
        let column = match self {
            PositionEncoding::Utf8 => before.len_bytes(),
            PositionEncoding::Utf16 => before.len_utf16_cu(),
            PositionEncoding::Utf32 => before.len_chars(),
        };
        Position::new(to_u32(line), to_u32(column))
    }

    /// The range of bytes `bytes` (see [`position`](Self::position)); it may span lines.
    pub fn range(self, rope: &Rope, bytes: std::ops::Range<usize>) -> Range {
        Range::new(
            self.position(rope, bytes.start),
            self.position(rope, bytes.end),
        )
    }

    /// How many columns `text` spans in this encoding.
    #[cfg(test)]
    pub fn width(self, text: &str) -> usize {
        match self {
            PositionEncoding::Utf8 => text.len(),
            PositionEncoding::Utf16 => text.encode_utf16().count(),
            PositionEncoding::Utf32 => text.chars().count(),
        }
    }
}

/// `text` in place of `bytes`, widened so that neither end falls between the `\r` and the `\n`
/// of a `\r\n`: no position names that place (a line's columns end before its break), and a
/// client reads the nearest one, the line's end before the `\r`, so the edit would keep a `\r`
/// it removes or put text before one it follows. The widened edit leaves the same text. (The
/// context layer's edits end there when a rewrite changes a `\r\n` line of a document that
/// mixes line endings to the region's `\n`.)
pub fn around_line_breaks(
    rope: &Rope,
    bytes: std::ops::Range<usize>,
    text: String,
) -> (std::ops::Range<usize>, String) {
    let inside_break = |byte: usize| {
        byte > 0
            && byte < rope.len_bytes()
            && rope.byte(byte - 1) == b'\r'
            && rope.byte(byte) == b'\n'
    };
    let (mut start, mut end, mut text) = (bytes.start, bytes.end, text);
    if inside_break(start) {
        start -= 1;
        text.insert(0, '\r');
    }
    if inside_break(end) {
        end += 1;
        text.push('\n');
    }
    (start..end, text)
}

/// A line without its line break.
pub fn line_content(line: RopeSlice<'_>) -> RopeSlice<'_> {
    let mut end = line.len_chars();
    if end > 0 && line.char(end - 1) == '\n' {
        end -= 1;
    }
    if end > 0 && line.char(end - 1) == '\r' {
        end -= 1;
    }
    line.slice(..end)
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The oracle: LSP's reading of a position, written against a plain `&str` without ropey.
    fn oracle_offset(text: &str, enc: PositionEncoding, pos: Position) -> Option<usize> {
        let mut line_start = 0;
        let mut line = 0;
        let bytes = text.as_bytes();
        let mut i = 0;
        while line < pos.line {
            if i >= bytes.len() {
                return None;
            }
            match bytes[i] {
                b'\n' => {
                    line += 1;
                    line_start = i + 1;
                }
                b'\r' => {
                    if bytes.get(i + 1) == Some(&b'\n') {
                        i += 1;
                    }
                    line += 1;
                    line_start = i + 1;
                }
                _ => {}
            }
            i += 1;
        }
        let rest = &text[line_start..];
        let content_len = rest.find(['\r', '\n']).unwrap_or(rest.len());
        let content = &rest[..content_len];
        let mut used = 0;
        for (at, c) in content.char_indices() {
            let w = enc.width(c.encode_utf8(&mut [0; 4]));
            if used + w > pos.character as usize {
                return Some(line_start + at);
            }
            used += w;
        }
        Some(line_start + content_len)
    }

    fn text_strategy() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("a"),
                Just("é"),
                Just("€"),
                Just("😀"),
                Just("\t"),
                Just("\n"),
                Just("\r\n"),
                Just("\r"),
                Just(" "),
                Just("fn"),
            ],
            0..40,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn offsets_match_the_oracle_and_round_trip(
            text in text_strategy(),
            line in 0u32..12,
            character in 0u32..20,
        ) {
            let rope = Rope::from_str(&text);
            for enc in PositionEncoding::ALL {
                let pos = Position::new(line, character);
                let got = enc.offset(&rope, pos).ok();
                prop_assert_eq!(got, oracle_offset(&text, enc, pos), "{:?} {:?} in {:?}", enc, pos, text);
                if let Some(byte) = got {
                    // The offset's own position maps back to the same offset.
                    let back = enc.position(&rope, byte);
                    prop_assert_eq!(enc.offset(&rope, back).unwrap(), byte);
                    prop_assert!(back.line == line && back.character <= character);
                }
            }
        }

        #[test]
        fn every_char_boundary_round_trips(text in text_strategy()) {
            let rope = Rope::from_str(&text);
            for enc in PositionEncoding::ALL {
                for (byte, _) in text.char_indices().chain([(text.len(), ' ')]) {
                    // Between `\r` and `\n` is not a position.
                    if byte > 0 && text.as_bytes()[byte - 1] == b'\r' && text.as_bytes().get(byte) == Some(&b'\n') {
                        continue;
                    }
                    let pos = enc.position(&rope, byte);
                    prop_assert_eq!(enc.offset(&rope, pos).unwrap(), byte, "{:?} at {} in {:?}", enc, byte, text);
                }
            }
        }
    }

    #[test]
    fn surrogate_pairs_and_multibyte_columns() {
        let rope = Rope::from_str("a😀b\r\nx");
        let u16 = PositionEncoding::Utf16;
        assert_eq!(u16.offset(&rope, Position::new(0, 1)).unwrap(), 1);
        // Inside the surrogate pair: the emoji's start.
        assert_eq!(u16.offset(&rope, Position::new(0, 2)).unwrap(), 1);
        assert_eq!(u16.offset(&rope, Position::new(0, 3)).unwrap(), 5);
        assert_eq!(
            PositionEncoding::Utf32
                .offset(&rope, Position::new(0, 2))
                .unwrap(),
            5
        );
        assert_eq!(
            PositionEncoding::Utf8
                .offset(&rope, Position::new(0, 5))
                .unwrap(),
            5
        );
        // Past the end of the line: the line's end, before `\r\n`.
        assert_eq!(u16.offset(&rope, Position::new(0, 99)).unwrap(), 6);
        assert_eq!(u16.offset(&rope, Position::new(1, 0)).unwrap(), 8);
        assert_eq!(
            u16.offset(&rope, Position::new(2, 0)),
            Err(PositionError::LinePastEnd { line: 2, lines: 2 })
        );
        assert_eq!(u16.offset_clamped(&rope, Position::new(7, 3)), 9);
        assert_eq!(u16.position(&rope, 5), Position::new(0, 3));
    }

    proptest! {
        /// Oracle: the widened edit leaves the text the edit would, and no end of it is
        /// between a `\r` and its `\n`, so each end is a position that names it.
        #[test]
        fn an_edit_widened_around_line_breaks_leaves_the_same_text(
            text in text_strategy(),
            from in 0usize..80,
            len in 0usize..8,
            new in text_strategy(),
        ) {
            let start = text.floor_char_boundary(from.min(text.len()));
            let end = text.floor_char_boundary((start + len).min(text.len()));
            let rope = Rope::from_str(&text);
            let (range, widened) = around_line_breaks(&rope, start..end, new.clone());
            let mut expected = text.clone();
            expected.replace_range(start..end, &new);
            let mut got = text.clone();
            got.replace_range(range.clone(), &widened);
            prop_assert_eq!(got, expected);
            for enc in PositionEncoding::ALL {
                for byte in [range.start, range.end] {
                    prop_assert_eq!(enc.offset(&rope, enc.position(&rope, byte)).unwrap(), byte);
                }
            }
        }
    }

    #[test]
    fn negotiation_prefers_utf8_then_utf32_then_the_default() {
        use PositionEncodingKind as K;
        assert_eq!(PositionEncoding::negotiate(None), PositionEncoding::Utf16);
        assert_eq!(
            PositionEncoding::negotiate(Some(&[K::UTF16, K::UTF8])),
            PositionEncoding::Utf8
        );
        assert_eq!(
            PositionEncoding::negotiate(Some(&[K::UTF32, K::UTF16])),
            PositionEncoding::Utf32
        );
        assert_eq!(
            PositionEncoding::negotiate(Some(&[K::new("latin1")])),
            PositionEncoding::Utf16
        );
    }
}
