//! Languages other than Rust, read by their own lexical rules: what post-processing makes of a
//! correct middle in small real samples of each (`languages/`, with their origin and licence in
//! its README), and of the literals that Rust's rules, which such text got before, misread.

use std::path::Path;

use redraft_context::{
    finish, plan, Budget, ByteEstimate, Language, Neighbour, Plan, Source, Unit,
};

use crate::plan_for_text;
use redraft_context::survival::{self, Survival};

/// The folders of `languages/`, each with the language its samples are read in.
const SAMPLE_LANGUAGES: [(&str, Language); 14] = [
    ("c", Language::C),
    ("cpp", Language::Cpp),
    ("csharp", Language::CSharp),
    ("go", Language::Go),
    ("java", Language::Java),
    ("javascript", Language::JavaScript),
    ("kotlin", Language::Kotlin),
    ("lua", Language::Lua),
    ("perl", Language::Perl),
    ("php", Language::Php),
    ("ruby", Language::Ruby),
    ("shellscript", Language::Shell),
    ("swift", Language::Swift),
    ("typescript", Language::TypeScript),
];

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

/// A model that writes a whole line and then repeats the suffix's next line loses the repeat,
/// and nothing else, in each sample's language (at most one such middle in a hundred keeps
/// it): the other side of what `finish` keeps, which a change keeping more lines could lose
/// (an `end` one level out is no repeat, an `end` at the suffix's own column is).
#[test]
fn a_repeat_of_the_suffixs_next_line_is_dropped_in_other_languages() {
    let mut short = Vec::new();
    for (dir, language) in SAMPLE_LANGUAGES {
        let repeats = survival::repeats(&samples(dir), language, 0x2545_f491_4f6c_dd1d, 300);
        eprintln!("{dir}: {}/{} repeats dropped", repeats.kept, repeats.total);
        assert!(repeats.total > 100, "{dir}: only {} cuts", repeats.total);
        if !repeats.at_least(990) {
            short.push(format!(
                "{dir}: {}/{}, e.g. {:#?}",
                repeats.kept,
                repeats.total,
                repeats.examples()
            ));
        }
    }
    assert!(short.is_empty(), "{}", short.join("\n"));
}

/// Each sample's middles survive at least as often as they did when its language was added
/// (per mille, a little under what was measured). This yardstick hardly sees the lexer (Rust's
/// rules score within a cut or two on these samples: `finish` leans on the line the middle is
/// on), so the lexer's own checks are [`top_level_lines_of_the_samples_start_in_code`],
/// [`each_sample_reads_to_its_end_in_code_with_nothing_open`] and
/// [`heredoc_bodies_of_the_samples_are_text`].
#[test]
fn correct_middles_in_other_languages_survive_post_processing() {
    let floors = [
        ("c", Language::C, 985),
        ("cpp", Language::Cpp, 990),
        ("csharp", Language::CSharp, 995),
        ("go", Language::Go, 990),
        ("java", Language::Java, 995),
        ("javascript", Language::JavaScript, 990),
        ("kotlin", Language::Kotlin, 995),
        ("lua", Language::Lua, 993),
        ("perl", Language::Perl, 995),
        ("php", Language::Php, 993),
        ("ruby", Language::Ruby, 993),
        ("shellscript", Language::Shell, 990),
        ("swift", Language::Swift, 995),
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
        let plan = plan_for_text(text, start, language, Budget::for_positions(256, 48));
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
/// strings hold a few such lines, and here-documents and Lua's long strings some: the shell
/// sample `pyenv-virtualenv-init.bash` has 27 lines at column 0 inside one, `argparse.lua`
/// 7 inside `[[` and `[=[` strings). Rust's rules, which these languages got before, leave
/// brackets open or a string unclosed at many of them: JavaScript's regular expressions and
/// template literals, shell's `#` comments and `'` strings. A level-0 reading of Lua's long
/// brackets (`[=[` as `[` `[`, a `]]` inside it as the closer) left 80 more of `argparse.lua`'s.
/// The Perl samples' 23 other such lines are POD prose, a comment (read as code, 55 lines
/// started in code, some of them prose, and `ConfModule.pm`'s last 5 subs inside a string).
#[test]
fn top_level_lines_of_the_samples_start_in_code() {
    let mut short = Vec::new();
    for (dir, language, floor) in [
        ("go", Language::Go, 47),
        ("javascript", Language::JavaScript, 51),
        ("lua", Language::Lua, 131 + 205 + 1),
        ("perl", Language::Perl, 47 + 10),
        ("shellscript", Language::Shell, 46 + 29),
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

/// [`plan_at`], which must be a line completion's.
#[track_caller]
fn line_plan_at(fixture: &str, language: Language) -> redraft_context::Plan {
    let plan = plan_at(fixture, language);
    assert_eq!(
        plan.canvas.unit,
        Unit::Line,
        "{language:?}: {}",
        plan.canvas.reason
    );
    plan
}

/// The plan at `$0` in `fixture`, with room enough for the whole text.
fn plan_at(fixture: &str, language: Language) -> Plan {
    let cursor = fixture.find("$0").expect("fixture has a $0 cursor");
    let text = fixture.replacen("$0", "", 1);
    plan_for_text(&text, cursor, language, Budget::for_positions(4096, 48))
}

/// A line completion that closes the multi-line literal its line starts in, and the call that
/// literal is an argument of: the closing line keeps its code (`` `); ``, `""")`). The suffix
/// ends inside an open call (a file being written, a window cut short), so that the middle's
/// own reading leaves a bracket open there; a cut before the line, which leaves the literal
/// open and reads the suffix from inside it, was weighed against that and kept only the quote.
#[test]
fn the_closing_line_of_a_multi_line_literal_keeps_its_code() {
    let cases = [
        (
            Language::JavaScript,
            "function usage() {\n  console.log(`Usage: tool [options]\n  -h  help\n$0\n  process.exit(main(\n",
            "`);\n",
        ),
        (
            Language::TypeScript,
            "const menu = [`File (\n  Open`,\n  `Edit\n$0\nrender(menu.map(f(\n",
            "  Undo`];\n",
        ),
        (
            Language::Python,
            "def usage():\n    print(\"\"\"Usage: tool [OPTIONS]\n  -h  Print help\n$0\n    sys.exit(main(\n",
            "\"\"\")\n",
        ),
        (
            Language::Python,
            "def usage():\n    print(\"\"\"Usage: tool [OPTIONS]\n  -h  Print help\n$0\n    sys.exit(main(\n",
            "  -v  Verbose\"\"\")\n",
        ),
    ];
    for (language, fixture, middle) in cases {
        let plan = line_plan_at(fixture, language);
        assert_eq!(
            finish(middle, &plan).as_deref(),
            Some(middle.trim_end()),
            "{language:?}: {fixture:?}"
        );
    }
}

/// The line that closes a doc comment, before a line comment: the comment's `*/` is one token,
/// so its `/` is no repeat of the `//` that the suffix starts with. Cut there, the comment went
/// on over the suffix, which ends inside a method (a file being written): no brackets open
/// there beat the middle's own reading, and ` *` was left.
#[test]
fn a_comments_closer_is_no_repeat_of_a_line_comment_after_it() {
    let plan = plan_at(
        "class Parser {\n  /**\n   * Parses.\n$0  // The entry point.\n  parse(s) {\n    if (s) {\n",
        Language::TypeScript,
    );
    assert_eq!(finish("   */\n", &plan).as_deref(), Some("   */\n"));
}

/// Each sample, read to its end by its language's rules, ends in code with nothing open: its
/// here-documents, long brackets and percent literals are read whole (read as code,
/// `AutoloadGenerator.php` ended with `{{(` open, `argparse.lua` with `(`, and `rss.rb` with 14
/// brackets, the last one `%Q[#{h key}="#{h value}"]`'s, whose `#` read as a comment), and so
/// are Perl's quote-like operators (`ConfModule.pm` ended inside a string with `{([` open: the
/// quote in `s/\\([n"\\])/.../eg` opened one).
#[test]
fn each_sample_reads_to_its_end_in_code_with_nothing_open() {
    let mut wrong = Vec::new();
    for (dir, language) in SAMPLE_LANGUAGES {
        for (at, text) in samples(dir).iter().enumerate() {
            let mode = redraft_context::LexMode::default().after(language, text);
            let end = Source {
                text,
                cursor: text.len(),
                language,
                tree: None,
            };
            let plan = plan(&end, &Budget::for_positions(256, 48), &ByteEstimate, &[]);
            if !mode.in_code() || !plan.open_brackets.is_empty() {
                wrong.push(format!(
                    "{dir} #{at}: {mode:?}, {:?} open",
                    plan.open_brackets
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The here-documents of `text` by a plain reading that knows only the samples' own forms
/// (`opener` then a capitalised name, quoted or not; the name alone on a later line, or before
/// PHP's `;`): each body's lines, its terminator's included, as line indices.
fn heredoc_bodies(text: &str, opener: &str) -> Vec<std::ops::RangeInclusive<usize>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut bodies = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let name = lines[at].split_once(opener).map(|(_, after)| {
            after
                .trim_start_matches('\'')
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                .collect::<String>()
        });
        let Some(name) = name.filter(|name| !name.is_empty()) else {
            at += 1;
            continue;
        };
        let end = (at + 1..lines.len())
            .find(|&line| {
                let line = lines[line].trim();
                line == name || line.strip_suffix(';') == Some(name.as_str())
            })
            .expect("every here-document of the samples ends");
        bodies.push(at + 1..=end);
        at = end + 1;
    }
    bodies
}

/// Every line of a sample's here-documents, its terminator's included, starts inside one, and
/// the line after it in code: their quotes and brackets (a fish function's `end`s, `'...'`
/// across lines, generated PHP) are text. Read as code they left brackets open and strings
/// unclosed, or happened to balance (the shell sample's did).
#[test]
fn heredoc_bodies_of_the_samples_are_text() {
    let mut wrong = Vec::new();
    for (dir, language, opener, bodies) in [
        ("shellscript", Language::Shell, "<<", 14),
        ("ruby", Language::Ruby, "<<-", 22),
        ("php", Language::Php, "<<<", 25),
    ] {
        let mut found = 0;
        for text in samples(dir) {
            let line_starts: Vec<usize> = std::iter::once(0)
                .chain(text.match_indices('\n').map(|(at, _)| at + 1))
                .collect();
            let starts_in_code = |line: usize| {
                let source = Source {
                    text: &text,
                    cursor: line_starts[line],
                    language,
                    tree: None,
                };
                let plan = plan(&source, &Budget::for_positions(64, 16), &ByteEstimate, &[]);
                plan.line_start_mode
                    .expect("a sample is scanned whole")
                    .in_code()
            };
            for body in heredoc_bodies(&text, opener) {
                found += 1;
                for line in body.clone() {
                    if starts_in_code(line) {
                        wrong.push(format!("{dir}: line {} starts in code", line + 1));
                    }
                }
                let after = body.end() + 1;
                if after < line_starts.len() && !starts_in_code(after) {
                    wrong.push(format!("{dir}: line {} starts in a literal", after + 1));
                }
            }
        }
        assert_eq!(found, bodies, "{dir}: here-documents found");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The lines of `text` that a plain reading finds inside its multi-line literals: from the line
/// after one that `opens` one to the next line that `closes` it (that line included), as line
/// indices.
fn literal_bodies(
    text: &str,
    opens: impl Fn(&str) -> bool,
    closes: impl Fn(&str) -> bool,
) -> Vec<std::ops::RangeInclusive<usize>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut bodies = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        if !opens(lines[at]) {
            at += 1;
            continue;
        }
        let end = (at + 1..lines.len())
            .find(|&line| closes(lines[line]))
            .expect("every literal of the samples ends");
        bodies.push(at + 1..=end);
        at = end + 1;
    }
    bodies
}

/// Whether the plan at the start of `text`'s line `line` (an index) starts it in code.
fn line_starts_in_code(text: &str, line: usize, language: Language) -> bool {
    let start = text.split_inclusive('\n').take(line).map(str::len).sum();
    plan_for_text(text, start, language, Budget::for_positions(64, 16))
        .line_start_mode
        .expect("a sample is scanned whole")
        .in_code()
}

/// Every line of the Perl sample's POD blocks (from the line after `=head1`, `=item`, ... to
/// the `=cut` line) starts in a comment, and the line after one in code; so does every line of
/// the C# sample's `@"` string of Python (up to its `";`). Read as code, the POD's `Debian's`
/// and `It's` opened strings, and the Python's lines were code (its `'clr'` and `Don't` one-line
/// strings happened to leave nothing open).
#[test]
fn pod_blocks_and_verbatim_strings_of_the_samples_are_text() {
    let pod_opens =
        |line: &str| line.starts_with('=') && !line.starts_with("=cut") && line.len() > 1;
    let verbatim_opens = |line: &str| line.trim_end().ends_with("@\"");
    let mut wrong = Vec::new();
    for (dir, language, bodies) in [("perl", Language::Perl, 5), ("csharp", Language::CSharp, 1)] {
        let mut found = 0;
        for text in samples(dir) {
            let literals = match language {
                Language::Perl => literal_bodies(&text, pod_opens, |line| line.starts_with("=cut")),
                _ => literal_bodies(&text, verbatim_opens, |line| {
                    line.trim_start().starts_with("\";")
                }),
            };
            let lines = text.lines().count();
            for body in literals {
                found += 1;
                for line in body.clone() {
                    if line_starts_in_code(&text, line, language) {
                        wrong.push(format!("{dir}: line {} starts in code", line + 1));
                    }
                }
                let after = body.end() + 1;
                if after < lines && !line_starts_in_code(&text, after, language) {
                    wrong.push(format!("{dir}: line {} starts in a literal", after + 1));
                }
            }
        }
        assert_eq!(found, bodies, "{dir}: literals found");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A line completion inside a here-document ends with its line: its bracket is the body's
/// text, not code left open (read as code, the line after it was kept too).
#[test]
fn a_line_inside_a_heredoc_ends_with_its_line() {
    for (language, fixture) in [
        (
            Language::Shell,
            "usage() {\n  cat <<EOF\nUsage: tool [\n$0\nEOF\n}\n",
        ),
        (
            Language::Ruby,
            "def usage\n  <<~EOS\n    Usage: tool [\n    $0\n  EOS\nend\n",
        ),
        (
            Language::Php,
            "function usage() {\n    return <<<EOT\n    Usage: tool [\n    $0\n    EOT;\n}\n",
        ),
    ] {
        let plan = line_plan_at(fixture, language);
        assert_eq!(
            finish("  -h (help\n  -v\n", &plan).as_deref(),
            Some("  -h (help"),
            "{language:?}"
        );
    }
}
