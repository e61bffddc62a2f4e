//! Post-processing must not damage a correct answer: on this repository's own Rust sources,
//! cut the rest of a line (or a whole line) at deterministic cursors, hand the true middle to
//! `finish` and expect it back unchanged (up to trailing whitespace) almost always.

use std::path::Path;

use redraft_context::{finish, plan, Budget, ByteEstimate, Language, Source};

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

#[test]
fn correct_middles_survive_post_processing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["engine/src", "context/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    let budget = Budget::for_positions(256, 48);
    let (mut total, mut kept) = (0, 0);
    let mut damaged = Vec::new();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for text in &files {
        for _ in 0..30 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut cursor = (seed % text.len().max(1) as u64) as usize;
            while !text.is_char_boundary(cursor) {
                cursor -= 1;
            }
            let Some((document, cursor, middle)) = cut(text, cursor) else {
                continue;
            };
            let source = Source {
                text: &document,
                cursor,
                language: Language::Rust,
                tree: None,
            };
            let plan = plan(&source, &budget, &ByteEstimate, &[]);
            let finished = finish(&middle, &plan);
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
