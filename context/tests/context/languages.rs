//! Languages other than Rust, read by their own lexical rules: what post-processing makes of a
//! correct middle in small real samples of each (`languages/`, with their origin and licence in
//! its README), and of the literals that Rust's rules, which such text got before, misread.

use std::path::Path;

use redraft_context::{finish, plan, Budget, ByteEstimate, Language, Neighbour, Source, Unit};

use redraft_context::survival::{self, Survival};

/// The sample files of `dir` under `languages/`.
fn samples(dir: &str) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/context/languages")
        .join(dir);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect()
}

/// Whole lines and spans cut from `language`'s samples, many a file (the samples are few).
fn survival(dir: &str, language: Language) -> Survival {
    let files = samples(dir);
    let mut all = survival::lines(&files, language, 0x2545_f491_4f6c_dd1d, 300);
    all.add(survival::spans(
        &files,
        language,
        0x9e37_79b9_7f4a_7c15,
        400,
    ));
    all
}

/// Each sample's middles survive at least as often as they did when its language was added
/// (per mille, a little under what was measured). This yardstick hardly sees the lexer (Rust's
/// rules score within a cut or two on these samples: `finish` leans on the line the middle is
/// on), so the lexer's own check is [`top_level_lines_of_the_samples_start_in_code`].
#[test]
fn correct_middles_in_other_languages_survive_post_processing() {
    let floors = [
        ("c", Language::C, 985),
        ("go", Language::Go, 990),
        ("javascript", Language::JavaScript, 990),
        ("lua", Language::Lua, 990),
        ("ruby", Language::Ruby, 985),
        ("shellscript", Language::Shell, 995),
        ("typescript", Language::TypeScript, 998),
    ];
    let mut short = Vec::new();
    for (dir, language, floor) in floors {
        let survival = survival(dir, language);
        let (kept, total) = (survival.kept, survival.total);
        eprintln!("{dir}: {kept}/{total} correct middles kept");
        assert!(total > 300, "{dir}: only {total} cuts");
        if !survival.at_least(floor) {
            short.push(format!(
                "{dir}: {kept}/{total}, e.g. {:#?}",
                survival.examples()
            ));
        }
    }
    assert!(short.is_empty(), "{}", short.join("\n"));
}

/// Of the lines of `text` that start a top-level statement (a letter at column 0), those where
/// `language`'s reading has nothing open and is in code, out of how many.
fn top_level_in_code(text: &str, language: Language) -> (usize, usize) {
    let mut starts = vec![0];
    starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
    let (mut in_code, mut total) = (0, 0);
    for start in starts {
        if !text[start..].starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        let source = Source {
            text,
            cursor: start,
            language,
            tree: None,
        };
        let plan = plan(&source, &Budget::for_positions(256, 48), &ByteEstimate, &[]);
        total += 1;
        let code = plan.line_start_mode.is_none_or(|mode| mode.in_code());
        if plan.open_brackets.is_empty() && code {
            in_code += 1;
        }
    }
    (in_code, total)
}

/// Where a sample's top-level statements start (a letter at column 0), its language's reading
/// has nothing open and is in code, as many times as when the language was added (Go's raw
/// strings hold a few such lines). Rust's rules, which these languages got before, leave
/// brackets open or a string unclosed at many of them: JavaScript's regular expressions and
/// template literals, shell's `#` comments and `'` strings.
#[test]
fn top_level_lines_of_the_samples_start_in_code() {
    let mut short = Vec::new();
    for (dir, language, floor) in [
        ("go", Language::Go, 47),
        ("javascript", Language::JavaScript, 51),
        ("lua", Language::Lua, 131),
        ("shellscript", Language::Shell, 46),
        ("typescript", Language::TypeScript, 38 + 45),
    ] {
        let (mut in_code, mut total) = (0, 0);
        for text in samples(dir) {
            let (own, lines) = top_level_in_code(&text, language);
            in_code += own;
            total += lines;
        }
        eprintln!("{dir}: {in_code}/{total} top-level lines start in code");
        if in_code < floor {
            short.push(format!(
                "{dir}: {in_code}/{total}, at least {floor} expected"
            ));
        }
    }
    assert!(short.is_empty(), "{}", short.join("\n"));
}

/// A snippet of another open document is headed by a line comment of the cursor's language.
#[test]
fn neighbour_snippets_are_headed_by_the_languages_comment() {
    let neighbour = Neighbour {
        path: "lib/other".to_string(),
        text: "function parseConfig(config) {\n  return config.values;\n}\n".to_string(),
        edited_at: 1,
    };
    let budget = Budget::for_positions(4096, 48);
    for (language, header) in [
        (Language::TypeScript, "// lib/other\n"),
        (Language::Shell, "# lib/other\n"),
        (Language::Sql, "-- lib/other\n"),
        (Language::Lua, "-- lib/other\n"),
    ] {
        let text = "const values = parseConfig(config);\n";
        let source = Source {
            text,
            cursor: text.len(),
            language,
            tree: None,
        };
        let plan = plan(
            &source,
            &budget,
            &ByteEstimate,
            std::slice::from_ref(&neighbour),
        );
        assert!(
            plan.prefix.starts_with(header),
            "{language:?}: {:?}",
            plan.prefix
        );
    }
}

/// A line completion inside a template literal ends with its line: the bracket it writes is
/// the string's, not the code's. Rust's rules (what TypeScript got as plain text) took it for
/// code and kept the lines after it.
#[test]
fn a_line_inside_a_template_literal_ends_with_its_line() {
    let text = "const query = sql`\n  SELECT *\n\n`;\n";
    let cursor = text.find("\n\n").unwrap() + 1;
    let middle = "  FROM t WHERE (a = 1\n  AND b = 2\n";
    let finished = |language| {
        let source = Source {
            text,
            cursor,
            language,
            tree: None,
        };
        let plan = plan(
            &source,
            &Budget::for_positions(4096, 48),
            &ByteEstimate,
            &[],
        );
        assert_eq!(plan.canvas.unit, Unit::Line);
        finish(middle, &plan)
    };
    assert_eq!(
        finished(Language::TypeScript).as_deref(),
        Some("  FROM t WHERE (a = 1")
    );
    assert_eq!(
        finished(Language::Plain).as_deref(),
        Some(middle.trim_end())
    );
}
