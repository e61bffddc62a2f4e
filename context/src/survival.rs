//! What a perfect model would lose: cut a middle out of real code at deterministic cursors,
//! hand the true middle to [`finish`] and count how many come back unchanged. The yardstick of
//! the real-code tests and of `cargo run -p redraft-context --example survival` (any files, any
//! language, for measuring what a lexer change does beyond the committed samples).

use crate::{finish, plan, Budget, ByteEstimate, Language, Plan, Source};

/// (document without the middle, cursor, true middle), or `None` for blank or bracket-only
/// lines (an editor closes those itself; benchmarks skip them too).
pub fn cut(text: &str, cursor: usize) -> Option<(String, usize, String)> {
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

/// The line `at` is on, without its line break.
fn line_around(text: &str, at: usize) -> &str {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    &text[start..end]
}

/// Deterministic offsets (xorshift), each below the `n` it is asked for.
pub struct Offsets(pub u64);

impl Offsets {
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }

    /// A char boundary of `text`, at random.
    pub fn cursor(&mut self, text: &str) -> usize {
        let mut cursor = self.below(text.len());
        while !text.is_char_boundary(cursor) {
            cursor -= 1;
        }
        cursor
    }
}

/// The plan for `middle` at `cursor` of `document` (the middle cut out), and the suggestion
/// `finish` makes of it.
pub fn finished(
    document: &str,
    cursor: usize,
    middle: &str,
    language: Language,
) -> (Plan, Option<String>) {
    let source = Source {
        text: document,
        cursor,
        language,
        tree: None,
    };
    let plan = plan(&source, &Budget::for_positions(256, 48), &ByteEstimate, &[]);
    let finished = finish(middle, &plan);
    (plan, finished)
}

/// Middles kept out of those cut, and the damaged ones: (middle, what came back).
#[derive(Debug, Default)]
pub struct Survival {
    pub kept: usize,
    pub total: usize,
    pub damaged: Vec<(String, Option<String>)>,
}

impl Survival {
    fn count(&mut self, middle: &str, finished: Option<String>, same: bool) {
        self.total += 1;
        if same {
            self.kept += 1;
        } else {
            self.damaged.push((middle.to_string(), finished));
        }
    }

    /// Adds `other`'s counts and damaged middles.
    pub fn add(&mut self, other: Survival) {
        self.kept += other.kept;
        self.total += other.total;
        self.damaged.extend(other.damaged);
    }

    /// The first few damaged middles, for a failure message.
    pub fn examples(&self) -> &[(String, Option<String>)] {
        &self.damaged[..self.damaged.len().min(5)]
    }

    /// Whether at least `per_mille` of the cuts were kept.
    pub fn at_least(&self, per_mille: usize) -> bool {
        self.kept * 1000 >= self.total * per_mille
    }
}

/// The rest of a line, or a whole line at a line's start, `per_file` times a file: kept when it
/// comes back up to trailing whitespace at a line's end.
pub fn lines(files: &[String], language: Language, seed: u64, per_file: usize) -> Survival {
    lines_where(files, language, seed, per_file, |_| true)
}

/// [`lines`], cut only where the cursor's line passes `keep`.
pub fn lines_where(
    files: &[String],
    language: Language,
    seed: u64,
    per_file: usize,
    keep: impl Fn(&str) -> bool,
) -> Survival {
    let mut survival = Survival::default();
    for (text, cursor) in cursors(files, seed, per_file) {
        if !keep(line_around(text, cursor)) {
            continue;
        }
        let Some((document, cursor, middle)) = cut(text, cursor) else {
            continue;
        };
        let (_, finished) = finished(&document, cursor, &middle, language);
        let same = finished.as_deref().map(str::trim_end) == Some(middle.trim_end());
        survival.count(&middle, finished, same);
    }
    survival
}

/// A span inside a line, with code before the cursor and after the middle (a word before an
/// identifier, arguments before the rest of a call), `per_file` tries a file: kept when it
/// comes back whole, blanks before the line's code included (`mut ` at `let |x`).
pub fn spans(files: &[String], language: Language, seed: u64, per_file: usize) -> Survival {
    spans_where(files, language, seed, per_file, |_| true)
}

/// [`spans`], cut only where the cursor's line passes `keep`.
pub fn spans_where(
    files: &[String],
    language: Language,
    seed: u64,
    per_file: usize,
    keep: impl Fn(&str) -> bool,
) -> Survival {
    let mut survival = Survival::default();
    let mut offsets = Offsets(seed);
    for text in files {
        for _ in 0..per_file {
            let cursor = offsets.cursor(text);
            let line_start = text[..cursor].rfind('\n').map_or(0, |at| at + 1);
            let line_end = text[cursor..]
                .find('\n')
                .map_or(text.len(), |at| cursor + at);
            let skip = text[line_start..cursor].trim().is_empty() || line_end - cursor < 2;
            if skip || !keep(&text[line_start..line_end]) {
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
            let (_, finished) = finished(&document, cursor, middle, language);
            let same = finished.as_deref() == Some(middle);
            survival.count(middle, finished, same);
        }
    }
    survival
}

/// What a model that repeats the suffix loses: a whole line cut at a line's start, `per_file`
/// times a file, and the middle written as that line followed by the suffix's next line as
/// the document has it (indentation and all), at the line's start and again after the next
/// line's indentation (the cut line's code, then the repeat). Kept when `finish` makes of it
/// what it makes of the true middle alone, a suggestion: the repeat went and nothing else did.
/// The other yardsticks count correct middles kept; this one counts repeats dropped, which a
/// change that keeps more lines could lose.
pub fn repeats(files: &[String], language: Language, seed: u64, per_file: usize) -> Survival {
    let mut survival = Survival::default();
    for (text, cursor) in cursors(files, seed, per_file) {
        let line_start = text[..cursor].rfind('\n').map_or(0, |at| at + 1);
        let Some((document, cursor, middle)) = cut(text, line_start) else {
            continue;
        };
        let next = document[cursor..]
            .split_inclusive('\n')
            .next()
            .unwrap_or("");
        if !middle.ends_with('\n') || !next.ends_with('\n') || next.trim().is_empty() {
            continue;
        }
        // At the line's start, and after the next line's indentation (`    |h();`: the line's
        // code, then the repeat, indented as the document has it).
        let indent = next.len() - next.trim_start_matches([' ', '\t']).len();
        let code = middle.trim_start_matches([' ', '\t']);
        let mut places = vec![(cursor, middle.as_str())];
        if indent > 0 {
            places.push((cursor + indent, code));
        }
        for (at, written) in places {
            let (_, alone) = finished(&document, at, written, language);
            if alone.is_none() {
                continue;
            }
            let repeated = format!("{written}{next}");
            let (_, finished) = finished(&document, at, &repeated, language);
            let same = finished == alone;
            survival.count(&repeated, finished, same);
        }
    }
    survival
}

/// `per_file` cursors in each of `files` in turn, drawn from `seed`: (text, cursor).
fn cursors(files: &[String], seed: u64, per_file: usize) -> impl Iterator<Item = (&str, usize)> {
    let mut offsets = Offsets(seed);
    files
        .iter()
        .flat_map(move |text| std::iter::repeat_n(text.as_str(), per_file))
        .map(move |text| (text, offsets.cursor(text)))
}
