//! What a perfect model would lose on any files: `cargo run -p redraft-context --example
//! survival -- [--damaged] [--language ID] [--only CHARS] FILE...` cuts middles out of each
//! file (the rest of a line or a whole line, 30 a file; a span inside a line, 40 a file), hands
//! the true middle to `finish` and prints how many come back unchanged (and the first damaged
//! ones, or all with `--damaged`), and how many repeats of the suffix's next line after a whole
//! line's middle `finish` drops (`survival::repeats`). Each file is read in the language of its extension unless
//! `--language` (an LSP language id) says. The committed samples' floors are asserted by
//! `context/tests/context/languages.rs`; this measures a larger corpus (see its README).
//!
//! `--ends` (first, before `--language`) measures the lexer alone instead: how many files read
//! to their end in code (Perl's: or POD, or data after `__END__`) with no bracket open, as a
//! correct file does, and which do not (where they end, and what is open there).

use std::path::Path;

use redraft_context::{plan, survival, Budget, ByteEstimate, Language, LexMode, Source};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut forced = None;
    let ends = args.first().map(String::as_str) == Some("--ends");
    if ends {
        args.remove(0);
    }
    let all_damaged = args.first().map(String::as_str) == Some("--damaged");
    if all_damaged {
        args.remove(0);
    }
    if args.first().map(String::as_str) == Some("--language") && args.len() > 1 {
        forced = Some(Language::from_lsp_id(&args[1]));
        args.drain(..2);
    }
    let language_of = |path: &str| forced.unwrap_or_else(|| Language::from_path(Path::new(path)));
    if ends {
        read_to_their_ends(&args, language_of);
        return;
    }
    // `--only CHARS`: cut only lines holding one of CHARS (quotes, comment marks), 10 times as
    // many tries a file, to measure what a lexer does where it matters.
    let mut only = None;
    if args.first().map(String::as_str) == Some("--only") && args.len() > 1 {
        only = Some(args[1].clone());
        args.drain(..2);
    }
    let tries = if only.is_some() { 10 } else { 1 };
    let keep = |line: &str| {
        only.as_ref()
            .is_none_or(|chars| line.contains(|c| chars.contains(c)))
    };
    let (mut lines, mut spans) = (survival::Survival::default(), survival::Survival::default());
    let mut repeats = survival::Survival::default();
    for path in &args {
        let Ok(text) = std::fs::read_to_string(path) else {
            eprintln!("skipped {path}: not UTF-8 text");
            continue;
        };
        let language = language_of(path);
        let files = [text];
        let seeds = (0x2545_f491_4f6c_dd1d, 0x9e37_79b9_7f4a_7c15);
        let cut_lines = survival::lines_where(&files, language, seeds.0, 30 * tries, keep);
        let cut_spans = survival::spans_where(&files, language, seeds.1, 40 * tries, keep);
        lines.add(cut_lines);
        spans.add(cut_spans);
        if only.is_none() {
            repeats.add(survival::repeats(&files, language, seeds.0, 30));
        }
    }
    println!(
        "{} files: lines {}/{} kept, spans {}/{} kept, repeats of the next line {}/{} dropped",
        args.len(),
        lines.kept,
        lines.total,
        spans.kept,
        spans.total,
        repeats.kept,
        repeats.total
    );
    let shown = if all_damaged { usize::MAX } else { 5 };
    for (middle, finished) in lines.damaged.iter().chain(&spans.damaged).take(shown) {
        println!("  damaged: {middle:?} -> {finished:?}");
    }
    for (middle, finished) in repeats.damaged.iter().take(shown) {
        println!("  repeat kept: {middle:?} -> {finished:?}");
    }
}

/// `--ends`: which files read to their end in code with nothing open.
fn read_to_their_ends(paths: &[String], language_of: impl Fn(&str) -> Language) {
    let (mut whole, mut read) = (0, 0);
    for path in paths {
        let Ok(mut text) = std::fs::read_to_string(path) else {
            eprintln!("skipped {path}: not UTF-8 text");
            continue;
        };
        // A last line comment without a line break (`//# sourceMappingURL=..`) ends there.
        if !text.ends_with('\n') {
            text.push('\n');
        }
        read += 1;
        let language = language_of(path);
        let mode = LexMode::default().after(language, &text);
        let end = Source {
            text: &text,
            cursor: text.len(),
            language,
            tree: None,
        };
        let open = plan(&end, &Budget::for_positions(256, 48), &ByteEstimate, &[]).open_brackets;
        if (mode.in_code() || mode.in_perl_text()) && open.is_empty() {
            whole += 1;
        } else {
            println!("  {path}: ends {mode:?}, {open:?} open");
        }
    }
    println!("{read} files: {whole} read to their end in code with nothing open");
}
