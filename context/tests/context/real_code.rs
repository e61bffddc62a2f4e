//! Post-processing must not damage a correct answer: on this repository's own Rust sources,
//! cut the rest of a line (or a whole line, or a span inside a line) at deterministic cursors,
//! hand the true middle to `finish` and expect it back unchanged (up to trailing whitespace at
//! a line's end) almost always.

use std::path::Path;

use redraft_context::Language;

use redraft_context::survival;

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

fn sources() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["engine/src", "context/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    files
}

#[test]
fn correct_middles_survive_post_processing() {
    let survival = survival::lines(&sources(), Language::Rust, 0x2545_f491_4f6c_dd1d, 30);
    let (kept, total) = (survival.kept, survival.total);
    eprintln!("{kept}/{total} correct middles kept");
    assert!(total > 500, "only {total} cuts");
    assert!(
        survival.at_least(995),
        "{kept}/{total} correct middles kept; damaged e.g. {:#?}",
        survival.examples()
    );
}

/// A middle cut from inside a line, with code before the cursor and after the middle (a word
/// before an identifier, arguments before the rest of a call): it comes back whole, blanks
/// before the line's code included (`mut ` at `let |x`).
#[test]
fn correct_middles_inside_a_line_survive_post_processing() {
    let survival = survival::spans(&sources(), Language::Rust, 0x9e37_79b9_7f4a_7c15, 40);
    let (kept, total) = (survival.kept, survival.total);
    eprintln!("{kept}/{total} correct middles inside a line kept");
    assert!(total > 500, "only {total} cuts");
    assert!(
        survival.at_least(995),
        "{kept}/{total} correct middles inside a line kept; damaged e.g. {:#?}",
        survival.examples()
    );
}
