//! Post-processing must not damage a correct answer: on this repository's own Rust sources,
//! cut the rest of a line (or a whole line, or a span inside a line) at deterministic cursors,
//! hand the true middle to `finish` and expect it back unchanged (up to trailing whitespace at
//! a line's end) almost always.

use std::path::Path;

use redraft_context::{finish, plan, Budget, ByteEstimate, Language, Plan, Source};

fn rust_files(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// (document without the middle, cursor, true middle), or `None` for blank or bracket-only
/// lines (an editor closes those itself; benchmarks skip them too).
fn cut(text: &str, cursor: usize) -> Option<(String, usize, String)> {
    let line_start = text[..cursor].rfind('\n').map_or(0, |at| at + 1);
    let line_end = text[cursor..]
        .find('\n')
        .map_or(text.len(), |at| cursor + at);
    let (start, end) = if text[line_start..cursor].trim().is_empty() {
        (line_start, (line_end + 1).min(text.len()))
    } else {
        (cursor, line_end)
    };
    let middle = &text[start..end];
    let trivial = middle.trim().chars().all(|c| "{}()[];,".contains(c));
    (!trivial).then(|| {
        (
            format!("{}{}", &text[..start], &text[end..]),
            start,
            middle.to_string(),
        )
    })
}

fn sources() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["engine/src", "context/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    files
}

/// Deterministic offsets (xorshift), each below the `n` it is asked for.
struct Offsets(u64);

impl Offsets {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }

    /// A char boundary of `text`, at random.
    fn cursor(&mut self, text: &str) -> usize {
        let mut cursor = self.below(text.len());
        while !text.is_char_boundary(cursor) {
            cursor -= 1;
        }
        cursor
    }
}

/// The plan for `middle` at `cursor` of `document` (the middle cut out), and the suggestion
/// `finish` makes of it.
fn finished(document: &str, cursor: usize, middle: &str) -> (Plan, Option<String>) {
    let source = Source {
        text: document,
        cursor,
        language: Language::Rust,
        tree: None,
    };
    let plan = plan(&source, &Budget::for_positions(256, 48), &ByteEstimate, &[]);
    let finished = finish(middle, &plan);
    (plan, finished)
}

#[test]
fn correct_middles_survive_post_processing() {
    let files = sources();
    let (mut total, mut kept) = (0, 0);
    let mut damaged = Vec::new();
    let mut offsets = Offsets(0x2545_f491_4f6c_dd1d);
    for text in &files {
        for _ in 0..30 {
            let cursor = offsets.cursor(text);
            let Some((document, cursor, middle)) = cut(text, cursor) else {
                continue;
            };
            let (plan, finished) = finished(&document, cursor, &middle);
            total += 1;
            if finished.as_deref().map(str::trim_end) == Some(middle.trim_end()) {
                kept += 1;
            } else if damaged.len() < 5 {
                damaged.push((plan.canvas.unit, middle, finished));
            }
        }
    }
    eprintln!("{kept}/{total} correct middles kept");
    assert!(total > 500, "only {total} cuts");
    assert!(
        kept * 1000 >= total * 995,
        "{kept}/{total} correct middles kept; damaged e.g. {damaged:#?}"
    );
}

/// A middle cut from inside a line, with code before the cursor and after the middle (a word
/// before an identifier, arguments before the rest of a call): it comes back whole, blanks
/// before the line's code included (`mut ` at `let |x`).
#[test]
fn correct_middles_inside_a_line_survive_post_processing() {
    let files = sources();
    let (mut total, mut kept) = (0, 0);
    let mut damaged = Vec::new();
    let mut offsets = Offsets(0x9e37_79b9_7f4a_7c15);
    for text in &files {
        for _ in 0..40 {
            let cursor = offsets.cursor(text);
            let line_start = text[..cursor].rfind('\n').map_or(0, |at| at + 1);
            let line_end = text[cursor..]
                .find('\n')
                .map_or(text.len(), |at| cursor + at);
            if text[line_start..cursor].trim().is_empty() || line_end - cursor < 2 {
                continue;
            }
            let mut end = cursor + 1 + offsets.below(line_end - cursor - 1);
            while !text.is_char_boundary(end) {
                end += 1;
            }
            let middle = &text[cursor..end];
            if middle.trim().is_empty() {
                continue;
            }
            let document = format!("{}{}", &text[..cursor], &text[end..]);
            let (plan, finished) = finished(&document, cursor, middle);
            total += 1;
            if finished.as_deref() == Some(middle) {
                kept += 1;
            } else if damaged.len() < 5 {
                damaged.push((middle, plan.line_suffix, finished));
            }
        }
    }
    eprintln!("{kept}/{total} correct middles inside a line kept");
    assert!(total > 500, "only {total} cuts");
    assert!(
        kept * 1000 >= total * 995,
        "{kept}/{total} correct middles inside a line kept; damaged e.g. {damaged:#?}"
    );
}
