//! A document's recent edits, the history a next-edit suggestion is asked with: the changes
//! `didChange` applies, coalesced into edit groups (a run of keystrokes close in time and on
//! the same lines is one edit) and kept in a ring bounded by count and bytes.
//!
//! A group records where it replaced what, in the text as it was when the group began
//! (`start`, `old`), what is there now (`new`), and the lines around it then, so it can be
//! written as the whole-line [`HistoryEdit`] the pipeline reads. Replaying the groups in order
//! on the text before the oldest one gives the current text (the property test below). Only
//! the newest group grows: a change on other lines, after the pause, or made by accepting a
//! suggestion starts a new one, and an accepted suggestion is a group of its own.

use std::collections::VecDeque;
use std::ops::Range;

use redraft_context::edit::history::CONTEXT_LINES;
use redraft_context::edit::HistoryEdit;
use ropey::Rope;

/// The most of a line kept as context on either side of a group: a minified file's one huge
/// line must not make every keystroke copy it.
const MAX_CONTEXT_BYTES: usize = 2 << 10;

/// Limits of one document's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryLimits {
    /// Changes at most this far apart in time (ms) may join one group.
    pub coalesce_ms: u64,
    pub max_groups: usize,
    /// Bytes over all groups (old and new text and their context lines). A single change
    /// larger than this (a paste of a whole file) is not kept: the history starts over after it.
    pub max_bytes: usize,
}

impl Default for HistoryLimits {
    fn default() -> HistoryLimits {
        HistoryLimits {
            coalesce_ms: 1_000,
            max_groups: 32,
            max_bytes: 64 << 10,
        }
    }
}

/// When and how a change was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Orders changes across all documents (the document owner's event counter).
    pub seq: u64,
    /// Milliseconds on the owner's clock (coalescing only compares these).
    pub at_ms: u64,
    /// The change applied a suggestion the server offered.
    pub accepted: bool,
}

/// One edit group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditGroup {
    /// Byte offset of the replaced text in the document as it was when the group began.
    pub start: usize,
    pub old: String,
    pub new: String,
    /// The text before `start` from the start of the line [`CONTEXT_LINES`] above, and after
    /// `old` to the end of the line [`CONTEXT_LINES`] + 1 below, as they were (at most
    /// [`MAX_CONTEXT_BYTES`] each): enough for [`HistoryEdit::from_change`] to widen the group
    /// to whole lines.
    before: String,
    after: String,
    /// The change that began the group and the one that last grew it.
    pub first_seq: u64,
    pub last_seq: u64,
    pub last_ms: u64,
    /// The user made it by accepting a suggestion.
    pub accepted: bool,
}

impl EditGroup {
    fn bytes(&self) -> usize {
        self.old.len() + self.new.len() + self.before.len() + self.after.len()
    }

    /// The group's span in the text as it is after it.
    fn span(&self) -> Range<usize> {
        self.start..self.start + self.new.len()
    }

    /// As the context layer reads past edits: the lines touched, before and after, with
    /// [`CONTEXT_LINES`] around them.
    pub fn to_history(&self, path: &str) -> HistoryEdit {
        let text = format!("{}{}{}", self.before, self.old, self.after);
        let at = self.before.len();
        HistoryEdit::from_change(path, &text, at..at + self.old.len(), &self.new)
    }
}

/// The recent edits of one document, oldest first.
#[derive(Debug, Clone, Default)]
pub struct EditHistory {
    groups: VecDeque<EditGroup>,
    bytes: usize,
    limits: HistoryLimits,
    /// Moves with every change of the groups (see [`revision`](Self::revision)).
    revision: u64,
}

impl EditHistory {
    pub fn new(limits: HistoryLimits) -> EditHistory {
        EditHistory {
            groups: VecDeque::new(),
            bytes: 0,
            limits,
            revision: 0,
        }
    }

    /// Names the groups as they are: a change that records nothing (no text changed, or the
    /// same text written again) leaves it, anything else moves it.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn groups(&self) -> impl DoubleEndedIterator<Item = &EditGroup> + ExactSizeIterator {
        self.groups.iter()
    }

    /// Bytes held (see [`HistoryLimits::max_bytes`]).
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Records replacing `range` of `before` (the document just before the change) with
    /// `new_text`. `range` lies on char boundaries of `before`.
    pub fn record(&mut self, before: &Rope, range: Range<usize>, new_text: &str, stamp: Stamp) {
        if range.is_empty() && new_text.is_empty() {
            return;
        }
        if range.len() + new_text.len() > self.limits.max_bytes {
            if !self.groups.is_empty() {
                self.revision += 1;
            }
            self.groups.clear();
            self.bytes = 0;
            return;
        }
        let joins = self
            .groups
            .back()
            .is_some_and(|last| self.joins(last, before, &range, stamp));
        if joins {
            let last = self
                .groups
                .back_mut()
                .expect("joins only a group that exists");
            self.bytes -= last.bytes();
            let span = last.span();
            self.revision += 1;
            // The group widens to cover the change; what it takes in beyond its old span is
            // text no group changed, the same in its base as now.
            let (a, b) = (range.start.min(span.start), range.end.max(span.end));
            let head = before.byte_slice(a..span.start).to_string();
            let tail = before.byte_slice(span.end..b).to_string();
            let mut new = format!("{head}{}{tail}", last.new);
            new.replace_range(range.start - a..range.end - a, new_text);
            last.old = format!("{head}{}{tail}", last.old);
            last.new = new;
            last.start = a;
            last.before = context_before(before, a);
            last.after = context_after(before, b);
            last.last_seq = stamp.seq;
            last.last_ms = stamp.at_ms;
            self.bytes += last.bytes();
            // Typed, then deleted again: no edit.
            if last.old == last.new {
                self.pop_back();
            }
        } else {
            let group = EditGroup {
                start: range.start,
                old: before.byte_slice(range.clone()).to_string(),
                new: new_text.to_string(),
                before: context_before(before, range.start),
                after: context_after(before, range.end),
                first_seq: stamp.seq,
                last_seq: stamp.seq,
                last_ms: stamp.at_ms,
                accepted: stamp.accepted,
            };
            if group.old == group.new {
                return;
            }
            self.revision += 1;
            self.bytes += group.bytes();
            self.groups.push_back(group);
        }
        while self.groups.len() > self.limits.max_groups || self.bytes > self.limits.max_bytes {
            let Some(gone) = self.groups.pop_front() else {
                break;
            };
            self.bytes -= gone.bytes();
        }
    }

    /// Whether a change of `range` joins `last`, the newest group: soon enough after it,
    /// neither of them an accepted suggestion, and on the lines the group now covers (or the
    /// line break on either side of them, as a backspace at a line start deletes).
    fn joins(&self, last: &EditGroup, before: &Rope, range: &Range<usize>, stamp: Stamp) -> bool {
        if stamp.accepted
            || last.accepted
            || stamp.at_ms.saturating_sub(last.last_ms) > self.limits.coalesce_ms
        {
            return false;
        }
        let span = last.span();
        let lines_start = line_start(before, span.start).saturating_sub(1);
        let lines_end = (line_end(before, span.end) + 1).min(before.len_bytes());
        lines_start <= range.start && range.end <= lines_end
    }

    fn pop_back(&mut self) {
        if let Some(gone) = self.groups.pop_back() {
            self.bytes -= gone.bytes();
        }
    }

    /// The newest group was an accepted suggestion.
    #[cfg(test)]
    pub fn last_accepted(&self) -> bool {
        self.groups.back().is_some_and(|g| g.accepted)
    }
}

/// The byte offset where the line holding `byte` starts (lines split at `\n`, as
/// [`HistoryEdit`] splits them).
fn line_start(rope: &Rope, byte: usize) -> usize {
    let mut bytes = rope.bytes_at(byte);
    let mut at = byte;
    while let Some(b) = bytes.prev() {
        if b == b'\n' {
            break;
        }
        at -= 1;
    }
    at
}

/// The byte offset of the `\n` that ends the line holding `byte`, or the end of the text.
fn line_end(rope: &Rope, byte: usize) -> usize {
    let mut at = byte;
    for b in rope.bytes_at(byte) {
        if b == b'\n' {
            break;
        }
        at += 1;
    }
    at
}

/// The text before `byte` from the start of the line [`CONTEXT_LINES`] above its own, at most
/// [`MAX_CONTEXT_BYTES`] (cut on a char boundary).
fn context_before(rope: &Rope, byte: usize) -> String {
    let mut bytes = rope.bytes_at(byte);
    let mut start = byte;
    let mut breaks = 0;
    while let Some(b) = bytes.prev() {
        if b == b'\n' {
            breaks += 1;
            if breaks > CONTEXT_LINES {
                break;
            }
        }
        if byte - start >= MAX_CONTEXT_BYTES {
            break;
        }
        start -= 1;
    }
    // Back to the start of the character the cut fell in.
    let start = rope.char_to_byte(rope.byte_to_char(start));
    rope.byte_slice(start..byte).to_string()
}

/// The text after `byte` to the end of the line [`CONTEXT_LINES`] + 1 below its own (with
/// that line's break), at most [`MAX_CONTEXT_BYTES`] (cut on a char boundary).
fn context_after(rope: &Rope, byte: usize) -> String {
    let mut end = byte;
    let mut breaks = 0;
    for b in rope.bytes_at(byte) {
        if end - byte >= MAX_CONTEXT_BYTES && is_char_start(b) {
            break;
        }
        end += 1;
        if b == b'\n' {
            breaks += 1;
            if breaks > CONTEXT_LINES + 1 {
                break;
            }
        }
    }
    rope.byte_slice(byte..end).to_string()
}

fn is_char_start(b: u8) -> bool {
    b & 0xC0 != 0x80
}

/// The smallest replacement that turns `old` into `new`: the byte range of `old` it replaces
/// and the range of `new` it is replaced with (the common start and end left out, on char
/// boundaries). How a full-text `didChange` becomes an edit.
pub fn changed_span(old: &Rope, new: &str) -> (Range<usize>, Range<usize>) {
    let mut prefix = old
        .bytes()
        .zip(new.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    while !new.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let longest = old.len_bytes().min(new.len()) - prefix;
    let mut suffix = old
        .bytes_at(old.len_bytes())
        .reversed()
        .zip(new.bytes().rev())
        .take(longest)
        .take_while(|(a, b)| a == b)
        .count();
    while !new.is_char_boundary(new.len() - suffix) {
        suffix -= 1;
    }
    (prefix..old.len_bytes() - suffix, prefix..new.len() - suffix)
}

/// `groups` replayed in order on `text` (the oracle of the property tests); each group's
/// old text and context must be what is there.
#[cfg(test)]
pub fn replay<'a>(text: &str, groups: impl Iterator<Item = &'a EditGroup>) -> String {
    let mut text = text.to_string();
    for g in groups {
        let old = g.start..g.start + g.old.len();
        assert_eq!(&text[old.clone()], g.old);
        assert!(text[..g.start].ends_with(&g.before), "{g:?} in {text:?}");
        assert!(text[old.end..].starts_with(&g.after), "{g:?} in {text:?}");
        text.replace_range(old, &g.new);
    }
    text
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use redraft_context::edit::{parse_patches, unified_diff};

    use super::*;

    fn stamp(seq: u64, at_ms: u64) -> Stamp {
        Stamp {
            seq,
            at_ms,
            accepted: false,
        }
    }

    /// Replaces `at..at + del` of `text` with `ins`, recording it at `at_ms`.
    struct Typist {
        history: EditHistory,
        text: String,
        seq: u64,
    }

    impl Typist {
        fn new(text: &str, limits: HistoryLimits) -> Typist {
            Typist {
                history: EditHistory::new(limits),
                text: text.to_string(),
                seq: 0,
            }
        }

        fn edit(&mut self, at: usize, del: usize, ins: &str, at_ms: u64, accepted: bool) {
            self.seq += 1;
            let rope = Rope::from_str(&self.text);
            let stamp = Stamp {
                accepted,
                ..stamp(self.seq, at_ms)
            };
            self.history.record(&rope, at..at + del, ins, stamp);
            self.text.replace_range(at..at + del, ins);
        }

        fn type_at(&mut self, at: usize, text: &str, from_ms: u64) {
            for (i, (offset, c)) in text.char_indices().enumerate() {
                self.edit(
                    at + offset,
                    0,
                    c.encode_utf8(&mut [0; 4]),
                    from_ms + 80 * i as u64,
                    false,
                );
            }
        }

        fn history(&self) -> Vec<HistoryEdit> {
            self.history
                .groups()
                .map(|g| g.to_history("src/lib.rs"))
                .collect()
        }
    }

    #[test]
    fn keystrokes_close_in_time_and_place_are_one_group() {
        let mut t = Typist::new(
            "fn area() {\n    let w = 3;\n    w * h\n}\n",
            HistoryLimits::default(),
        );
        t.type_at(21, "idth", 0);
        // A backspace and a retype at the group's edge still belong to it.
        t.edit(24, 1, "", 400, false);
        t.edit(24, 0, "h", 480, false);
        assert_eq!(t.text, "fn area() {\n    let width = 3;\n    w * h\n}\n");
        assert_eq!(t.history.groups().len(), 1);
        assert_eq!(
            t.history(),
            [HistoryEdit {
                path: "src/lib.rs".into(),
                old: "fn area() {\n    let w = 3;\n    w * h\n".into(),
                new: "fn area() {\n    let width = 3;\n    w * h\n".into(),
            }]
        );
        // On another line is a new group, so is the same line after the pause.
        t.edit(35, 1, "width", 600, false);
        t.edit(20, 0, "mut ", 5_000, false);
        assert_eq!(t.history.groups().len(), 3);
        // An accepted suggestion is its own group, and the next keystroke starts another.
        t.edit(47, 1, "height", 5_010, true);
        t.edit(46, 0, " ", 5_020, false);
        let accepted: Vec<bool> = t.history.groups().map(|g| g.accepted).collect();
        assert_eq!(accepted, [false, false, false, true, false]);
        assert_eq!(
            t.text,
            "fn area() {\n    let mut width = 3;\n    width *  height\n}\n"
        );
    }

    #[test]
    fn typing_and_deleting_the_same_text_leaves_no_edit() {
        let mut t = Typist::new("fn a() {}\n", HistoryLimits::default());
        t.edit(8, 0, "x", 0, false);
        t.edit(8, 1, "", 50, false);
        assert_eq!(t.history.groups().len(), 0);
        assert_eq!(t.history.bytes(), 0);
    }

    /// What the server records for a rename equals what `redraft complete --next-edit` reads
    /// from the same edit written as a unified diff: the two front doors ask the same question.
    #[test]
    fn a_recorded_edit_is_the_history_a_diff_of_it_gives() {
        let before =
            "use std::fmt;\n\nfn area(w: u32, h: u32) -> u32 {\n    w * h\n}\n\nfn main() {}\n";
        let mut t = Typist::new(before, HistoryLimits::default());
        let at = before.find("w: u32").unwrap();
        t.edit(at, 1, "", 0, false);
        t.type_at(at, "width", 50);
        let diff = unified_diff("src/lib.rs", before, &t.text, 3);
        let patches = parse_patches(&diff).unwrap();
        let from_diff: Vec<HistoryEdit> =
            patches.iter().flat_map(HistoryEdit::from_patch).collect();
        assert_eq!(t.history(), from_diff);
    }

    #[test]
    fn the_ring_keeps_the_newest_groups_within_its_limits() {
        let limits = HistoryLimits {
            coalesce_ms: 0,
            max_groups: 3,
            max_bytes: 1 << 20,
        };
        let mut t = Typist::new("a\nb\nc\nd\ne\n", limits);
        for (i, at) in [0, 2, 4, 6, 8].into_iter().enumerate() {
            t.edit(at, 1, "X", 10 * i as u64, false);
        }
        let starts: Vec<usize> = t.history.groups().map(|g| g.start).collect();
        assert_eq!(starts, [4, 6, 8]);
        let mut t = Typist::new(
            "0123456789\n",
            HistoryLimits {
                max_bytes: 20,
                ..limits
            },
        );
        // 13 bytes (1 removed, 2 inserted, the other 10 of the line as context), then 14.
        t.edit(0, 1, "ab", 0, false);
        t.edit(6, 1, "cd", 10, false);
        assert_eq!(
            t.history.groups().len(),
            1,
            "the oldest goes over the byte limit"
        );
        assert_eq!(t.history.bytes(), 14);
        // A change larger than the whole budget is not kept, nor is anything before it.
        t.edit(0, 0, &"x".repeat(21), 20, false);
        assert_eq!((t.history.groups().len(), t.history.bytes()), (0, 0));
    }

    #[test]
    fn a_huge_line_is_not_copied_whole_as_context() {
        let line = "é".repeat(10_000);
        let mut t = Typist::new(&format!("{line}\n"), HistoryLimits::default());
        t.edit(line.len() / 2, 0, "x", 0, false);
        let group = t.history.groups().next().unwrap();
        assert!(
            group.bytes() <= 2 * MAX_CONTEXT_BYTES + 1,
            "{}",
            group.bytes()
        );
        assert_eq!(replay(&format!("{line}\n"), t.history.groups()), t.text);
    }

    #[test]
    fn a_full_text_change_is_its_changed_span() {
        let rope = Rope::from_str("let é = 1;\nlet b = 2;\n");
        assert_eq!(
            changed_span(&rope, "let é = 10;\nlet b = 2;\n"),
            (10..10, 10..11)
        );
        // The common prefix stops inside `é` (0xC3 0xA9 vs 0xC3 0xA8): back to its start.
        assert_eq!(
            changed_span(&rope, "let è = 1;\nlet b = 2;\n"),
            (4..6, 4..6)
        );
        assert_eq!(changed_span(&rope, ""), (0..rope.len_bytes(), 0..0));
        assert_eq!(changed_span(&Rope::from_str("aaa"), "aa"), (2..3, 2..2));
    }

    fn piece() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("a"),
            Just("b"),
            Just("é"),
            Just("😀"),
            Just(" "),
            Just("\n"),
            Just("\r\n"),
            Just("let x"),
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(piece(), 0..6).prop_map(|p| p.concat())
    }

    /// Snaps `byte` down to a char boundary of `text`.
    fn floor(text: &str, byte: usize) -> usize {
        let mut byte = byte.min(text.len());
        while !text.is_char_boundary(byte) {
            byte -= 1;
        }
        byte
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// After any sequence of edits (anywhere, inserting, deleting, replacing, multi-byte,
        /// at any pace, some accepted), the oldest group's base text with the groups replayed
        /// on it is the current text, and the ring stays within its limits.
        #[test]
        fn the_groups_replay_to_the_current_text(
            start in proptest::collection::vec(piece(), 0..30),
            edits in proptest::collection::vec(
                (0usize..200, 0usize..8, text(), 0u64..1_500, proptest::bool::weighted(0.1)),
                0..60,
            ),
            max_groups in 1usize..12,
            max_bytes in 16usize..600,
        ) {
            let limits = HistoryLimits { coalesce_ms: 1_000, max_groups, max_bytes };
            let mut t = Typist::new(&start.concat(), limits);
            // The text before each change, by the change's number.
            let mut texts = vec![t.text.clone()];
            let mut now = 0;
            for (at, del, ins, gap, accepted) in edits {
                let at = floor(&t.text, at);
                let end = floor(&t.text, at + del).max(at);
                now += gap;
                texts.push(t.text.clone());
                t.edit(at, end - at, &ins, now, accepted);
                let groups = &t.history;
                prop_assert!(groups.groups().len() <= max_groups);
                prop_assert!(groups.bytes() <= max_bytes);
                prop_assert_eq!(groups.bytes(), groups.groups().map(EditGroup::bytes).sum::<usize>());
                let base = match groups.groups().next() {
                    Some(oldest) => &texts[oldest.first_seq as usize],
                    None => &t.text,
                };
                prop_assert_eq!(&replay(base, groups.groups()), &t.text);
                for g in groups.groups() {
                    prop_assert!(g.old != g.new);
                    let h = g.to_history("a.rs");
                    // Whole lines (none, for an edit of an empty text).
                    prop_assert!(h.old.is_empty() || h.old.ends_with('\n'));
                    prop_assert!(h.new.is_empty() || h.new.ends_with('\n'));
                }
            }
        }
    }
}
