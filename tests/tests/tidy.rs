//! The repository is self-contained: no tracked file refers to a folder beside it or to notes
//! kept outside it, so a bare clone builds, tests and reads the same as the checkout it came
//! from (rust-analyzer keeps such checks in its `tidy` test).

use std::path::{Path, PathBuf};
use std::process::Command;

/// What no tracked file may mention. Spelt in pieces so this file does not match itself.
const OUTSIDE: [(&str, &str); 2] = [
    (
        concat!("..", "/shared"),
        "a folder beside the repository: keep what is needed in the repository (benchmark data in \
         benchmarks/) and refer to it there",
    ),
    (
        concat!("PROTOCOLS", ".md"),
        "notes that are not in the repository: name the public spec instead (Zed's \
         edit-prediction code, Inception's API, with a URL)",
    ),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// The tracked files, as paths relative to the repository root.
fn tracked_files() -> Vec<String> {
    let output = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(repo())
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git ls-files failed (this test reads the tracked files of a git checkout): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("tracked paths are UTF-8")
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether a tracked file is checked: not the benchmark data itself (its provenance notes are
/// the authors'), not the lockfile.
fn checked(path: &str) -> bool {
    !path.starts_with("benchmarks/") && path != "Cargo.lock"
}

#[test]
fn no_tracked_file_refers_outside_the_repository() {
    let root = repo();
    let files = tracked_files();
    assert!(
        files.iter().any(|f| f == "Cargo.toml"),
        "sanity: the tracked files were listed"
    );
    let mut found = Vec::new();
    for file in files.iter().filter(|f| checked(f)) {
        // Tracked but deleted in this checkout, or a submodule: nothing to read.
        let Ok(bytes) = std::fs::read(root.join(file)) else {
            continue;
        };
        // Binary files (models, gzip) say nothing to a reader.
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        for (number, line) in text.lines().enumerate() {
            for (needle, why) in OUTSIDE {
                if line.contains(needle) {
                    found.push(format!("{file}:{}: `{needle}`, {why}", number + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "tracked files refer outside the repository:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_benchmark_data_is_in_the_repository() {
    let files = tracked_files();
    for required in [
        "benchmarks/README.md",
        "benchmarks/humaneval-infilling/HumanEval-SingleLineInfilling.jsonl.gz",
        "benchmarks/humaneval-infilling/LICENSE",
        "benchmarks/humanevalpack-rust/humanevalpack.jsonl",
        "benchmarks/humanevalpack-rust/LICENSE",
        "benchmarks/zed-next-edit/zed--change-match-arm.md",
        "benchmarks/zed-next-edit/LICENSE",
    ] {
        assert!(
            files.iter().any(|f| f == required),
            "{required} is not tracked: the tests and `redraft eval` read it from the repository"
        );
    }
}

/// The README is read in five minutes; the details live in docs/.
const README_MAX_LINES: usize = 250;

#[test]
fn the_readme_is_short() {
    let text = std::fs::read_to_string(repo().join("README.md")).expect("README.md is readable");
    let lines = text.lines().count();
    assert!(
        lines < README_MAX_LINES,
        "README.md has {lines} lines, at most {} allowed: move the details to the page in docs/ \
         that covers them and link to it",
        README_MAX_LINES - 1
    );
}

/// The markdown files whose links are checked: the README and every page under docs/.
fn linked_docs(files: &[String]) -> Vec<&String> {
    files
        .iter()
        .filter(|f| *f == "README.md" || (f.starts_with("docs/") && f.ends_with(".md")))
        .collect()
}

#[test]
fn relative_markdown_links_point_at_tracked_files() {
    let root = repo();
    let files = tracked_files();
    let docs = linked_docs(&files);
    assert!(
        docs.iter().any(|f| *f == "README.md"),
        "sanity: README.md is tracked"
    );
    let mut broken = Vec::new();
    for file in docs {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        for (line, target) in relative_links(&text) {
            if let Err(why) = resolve(file, &target, &files) {
                broken.push(format!("{file}:{line}: `{target}` {why}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "relative links in README.md and docs/ that lead nowhere (fix the path, or `git add` the \
         file it names):\n{}",
        broken.join("\n")
    );
}

/// Every link target in `text` that is a path in this repository, with its 1-based line: inline
/// links and images (`[text](target)`) and reference definitions (`[name]: target`), outside
/// fenced code blocks and code spans; web and mail addresses and pure `#anchors` left out, an
/// `#anchor` suffix stripped.
fn relative_links(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    let mut fence: Option<&str> = None;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => {
                fence = Some(m);
                continue;
            }
            (Some(open), Some(m)) if open == m => {
                fence = None;
                continue;
            }
            _ => {}
        }
        if fence.is_some() {
            continue;
        }
        let prose = without_code_spans(line);
        let mut targets = Vec::new();
        if let Some(rest) = prose.trim_start().strip_prefix('[') {
            if let Some((_, after)) = rest.split_once("]:") {
                targets.push(after.trim().to_string());
            }
        }
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let mut depth = 0usize;
            let end = after
                .char_indices()
                .find(|&(_, c)| match c {
                    '(' => {
                        depth += 1;
                        false
                    }
                    ')' if depth == 0 => true,
                    ')' => {
                        depth -= 1;
                        false
                    }
                    _ => false,
                })
                .map_or(after.len(), |(i, _)| i);
            targets.push(after[..end].to_string());
            rest = &after[end..];
        }
        for target in targets {
            // `<path with spaces>` and a `"title"` after the path.
            let target = target.trim();
            let target = match target.strip_prefix('<') {
                Some(inner) => inner.split('>').next().unwrap_or(""),
                None => target.split_whitespace().next().unwrap_or(""),
            };
            let path = target.split('#').next().unwrap_or("");
            let external = ["http://", "https://", "mailto:"]
                .iter()
                .any(|scheme| target.starts_with(scheme));
            if !external && !path.is_empty() {
                links.push((number + 1, path.to_string()));
            }
        }
    }
    links
}

/// `line` with its code spans blanked, so a link written as code is not a link.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].len() - rest[start..].trim_start_matches('`').len();
        let fence = &rest[start..start + ticks];
        let body = &rest[start + ticks..];
        match body.find(fence) {
            Some(end) => rest = &body[end + ticks..],
            // An unclosed backtick is plain text.
            None => {
                out.push_str(fence);
                rest = body;
            }
        }
        out.push(' ');
    }
    out.push_str(rest);
    out
}

/// Where `target`, linked from `from`, leads: a tracked file, or a folder holding tracked files.
fn resolve(from: &str, target: &str, files: &[String]) -> Result<(), &'static str> {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    let target = target.strip_prefix('/').map_or(target, |t| {
        // A leading `/` is the repository root, as GitHub renders it.
        parts.clear();
        t
    });
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err("leads out of the repository");
                }
            }
            name => parts.push(name),
        }
    }
    let path = parts.join("/");
    let folder = format!("{path}/");
    if path.is_empty() || files.iter().any(|f| *f == path || f.starts_with(&folder)) {
        Ok(())
    } else {
        Err("is not a tracked file or folder")
    }
}

#[test]
fn the_link_checker_reads_links_as_markdown_does() {
    let text = "See [the CLI](docs/cli.md#redraft-complete), [web](https://example.com/a.md), \
                [top](#top) and ![shot](img/a.png \"title\").\n\
                `[not](a-link.md)` and ``[nor](this.md)``\n\
                ```sh\n[inside](a-fence.md)\n```\n\
                [ref]: ../up.md\n\
                [nested](dir/a_(b).md) <[angle](<with space.md>)>\n";
    let found: Vec<(usize, String)> = relative_links(text);
    let expected: Vec<(usize, String)> = vec![
        (1, "docs/cli.md".into()),
        (1, "img/a.png".into()),
        (6, "../up.md".into()),
        (7, "dir/a_(b).md".into()),
        (7, "with space.md".into()),
    ];
    assert_eq!(found, expected);

    let files = vec!["docs/cli.md".to_string(), "docs/reports/a.md".to_string()];
    assert_eq!(resolve("README.md", "docs/cli.md", &files), Ok(()));
    assert_eq!(resolve("docs/reports/a.md", "../cli.md", &files), Ok(()));
    assert_eq!(resolve("docs/README.md", "reports/", &files), Ok(()));
    assert_eq!(resolve("docs/README.md", "/docs/cli.md", &files), Ok(()));
    assert!(resolve("docs/README.md", "cli.md.bak", &files).is_err());
    assert!(resolve("docs/README.md", "reports/b.md", &files).is_err());
    assert!(resolve("README.md", "../outside.md", &files).is_err());
}

/// The lints that make an `unsafe` block without a `// SAFETY:` comment, or an `unsafe fn`
/// without a `# Safety` section, a compile error.
const SAFETY_LINTS: [&str; 3] = [
    "clippy::undocumented_unsafe_blocks",
    "clippy::missing_safety_doc",
    "unsafe_op_in_unsafe_fn",
];

/// The `.rs` files under `dir` (relative to the repository), recursively, read from the disk
/// (a file not yet committed counts too).
fn rust_files(dir: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut pending = vec![repo().join(dir)];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a readable directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source files are UTF-8");
                let relative = path.strip_prefix(repo()).unwrap_or(&path);
                found.push((relative.display().to_string(), text));
            }
        }
    }
    found.sort();
    found
}

/// The 1-based lines of `text` whose code (what precedes a `//` comment) uses `unsafe`.
fn unsafe_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.split("//").next().unwrap_or("");
            code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| word == "unsafe")
        })
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn unsafe_code_lives_in_the_kernels_crate_under_its_safety_lints() {
    // Every `unsafe` of the kernels crate is checked by the lints its root denies, and no file
    // of it allows them back.
    let kernels = rust_files("kernels/src");
    let lib = kernels
        .iter()
        .find(|(path, _)| path == "kernels/src/lib.rs")
        .map(|(_, text)| text.as_str())
        .expect("kernels/src/lib.rs exists");
    assert!(
        kernels
            .iter()
            .all(|(path, _)| path != "kernels/src/main.rs" && !path.starts_with("kernels/src/bin/")),
        "kernels/src is one library: its lib.rs's lints cover every file"
    );
    let deny = lib
        .split("#![deny(")
        .nth(1)
        .and_then(|rest| rest.split(")]").next())
        .unwrap_or("");
    for lint in SAFETY_LINTS {
        assert!(
            deny.split(',').any(|l| l.trim() == lint),
            "kernels/src/lib.rs must `#![deny({lint})]`: every `unsafe` block of the kernels \
             crate says why it is sound (found `#![deny({deny})]`)"
        );
    }
    assert!(
        kernels
            .iter()
            .any(|(_, text)| !unsafe_lines(text).is_empty()),
        "sanity: the kernels' unsafe code was found"
    );
    let mut allowed = Vec::new();
    for (path, text) in &kernels {
        for (number, line) in text.lines().enumerate() {
            if line.contains("allow(") && SAFETY_LINTS.iter().any(|lint| line.contains(lint)) {
                allowed.push(format!("{path}:{}", number + 1));
            }
        }
    }
    assert!(
        allowed.is_empty(),
        "the kernels' safety lints are allowed back at:\n{}\n(write the `// SAFETY:` comment or \
         the `# Safety` section instead)",
        allowed.join("\n")
    );

    // The engine's ops are safe wrappers: their unsafe code moved to the kernels crate.
    let mut ops = rust_files("engine/src/ops");
    let root = "engine/src/ops.rs";
    let text = std::fs::read_to_string(repo().join(root)).expect("engine/src/ops.rs is readable");
    ops.push((root.to_string(), text));
    let found: Vec<String> = ops
        .iter()
        .flat_map(|(path, text)| {
            unsafe_lines(text)
                .into_iter()
                .map(move |line| format!("{path}:{line}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "`unsafe` in the engine's ops (kernels with unsafe code belong in kernels/src, under \
         its safety lints):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_unsafe_finder_reads_code_not_comments() {
    let text = "// unsafe in a comment\nlet x = unsafe { f() };\n/// # Safety: an unsafe fn\n\
                fn not_unsafe_code() {}\nunsafe impl Send for X {} // SAFETY: below\n";
    assert_eq!(unsafe_lines(text), vec![2, 5]);
}

/// Every package states the workspace's `rust-version`, so clippy's `incompatible_msrv` (run
/// with `-D warnings` by `.ci/run`) holds every crate to it: a standard-library API newer than
/// the version the README promises is a CI failure, not a user's build error.
#[test]
fn every_package_inherits_the_workspace_rust_version() {
    let root = std::fs::read_to_string(repo().join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        root.lines()
            .any(|l| l.starts_with("rust-version = \"") && l.ends_with('"')),
        "the workspace states no rust-version"
    );
    let manifests: Vec<String> = tracked_files()
        .into_iter()
        .filter(|f| f.ends_with("/Cargo.toml") && f.matches('/').count() == 1)
        .filter(|f| !f.starts_with("fixtures/"))
        .collect();
    assert!(manifests.len() >= 10, "sanity: {manifests:?}");
    for manifest in manifests {
        let text = std::fs::read_to_string(repo().join(&manifest)).expect("readable");
        assert!(
            text.lines()
                .any(|l| l.trim() == "rust-version.workspace = true"),
            "{manifest} does not inherit the workspace's rust-version"
        );
    }
}

#[test]
fn no_module_is_found_by_a_path_attribute() {
    // Modules are found by their file names. Source was once shared between crates by pointing
    // a module of one at a file of another; a library crate both depend on replaced that.
    let root = repo();
    let files = tracked_files();
    let rust: Vec<&String> = files
        .iter()
        .filter(|f| checked(f) && f.ends_with(".rs"))
        .collect();
    assert!(
        rust.iter().any(|f| *f == "tests/tests/tidy.rs"),
        "sanity: the tracked Rust files were listed"
    );
    let mut found = Vec::new();
    for file in rust {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        for line in path_attribute_lines(&text) {
            found.push(format!("{file}:{line}"));
        }
    }
    assert!(
        found.is_empty(),
        "`#[path]` attributes at:\n{}\n(name the file as its `mod` expects, `foo.rs` and \
         `foo/bar.rs`; code that two crates share belongs in a library crate they both depend on)",
        found.join("\n")
    );
}

/// The 1-based lines of `text` where a `path` attribute (plain or under `cfg_attr`) starts, read
/// from its code: comments and the insides of string and character literals are left out.
fn path_attribute_lines(text: &str) -> Vec<usize> {
    let code: Vec<char> = code_only(text).chars().collect();
    let skip_space = |mut i: usize| {
        while code.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        i
    };
    let word_at = |i: usize| -> String {
        code[i.min(code.len())..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect()
    };
    let mut lines = Vec::new();
    for start in (0..code.len()).filter(|&i| code[i] == '#') {
        let mut i = skip_space(start + 1);
        if code.get(i) == Some(&'!') {
            i = skip_space(i + 1);
        }
        if code.get(i) != Some(&'[') {
            continue;
        }
        let name_at = skip_space(i + 1);
        let name = word_at(name_at);
        let is_path = match name.as_str() {
            "path" => true,
            // `cfg_attr(predicate, path = "...")`: a `path =` anywhere inside the brackets.
            "cfg_attr" => {
                let mut depth = 0usize;
                let mut inner = name_at;
                let mut found = false;
                while let Some(&c) = code.get(inner) {
                    match c {
                        '[' | '(' => depth += 1,
                        ']' | ')' if depth <= 1 => break,
                        ']' | ')' => depth -= 1,
                        _ => {}
                    }
                    let starts_word = inner == 0
                        || !(code[inner - 1].is_alphanumeric() || code[inner - 1] == '_');
                    if starts_word
                        && word_at(inner) == "path"
                        && code.get(skip_space(inner + 4)) == Some(&'=')
                    {
                        found = true;
                    }
                    inner += 1;
                }
                found
            }
            _ => false,
        };
        if is_path {
            lines.push(code[..start].iter().filter(|c| **c == '\n').count() + 1);
        }
    }
    lines
}

/// `text` with its comments and its string and character literals blanked (newlines kept, so
/// lines keep their numbers): what is left is code.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let is_word = |i: usize| chars[i].is_alphanumeric() || chars[i] == '_';
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let end = match (chars[i], chars.get(i + 1).copied()) {
            ('/', Some('/')) => Some(
                chars[i..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(chars.len(), |n| i + n),
            ),
            ('/', Some('*')) => {
                // Block comments nest.
                let (mut depth, mut j) = (1usize, i + 2);
                while j < chars.len() && depth > 0 {
                    match (chars[j], chars.get(j + 1).copied()) {
                        ('/', Some('*')) => (depth, j) = (depth + 1, j + 2),
                        ('*', Some('/')) => (depth, j) = (depth - 1, j + 2),
                        _ => j += 1,
                    }
                }
                Some(j)
            }
            ('"', _) => {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != '"' {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
                Some((j + 1).min(chars.len()))
            }
            // `'x'` and `'\n'` are characters; `'a` is a lifetime or a label.
            ('\'', Some('\\')) => Some(
                chars[i + 3..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map_or(chars.len(), |n| i + 3 + n + 1),
            ),
            ('\'', Some(_)) if chars.get(i + 2) == Some(&'\'') => Some(i + 3),
            // Raw strings: `r"..."`, `r#"..."#`, `br"..."`, where the `r` starts a word.
            ('r', _)
                if i == 0
                    || !is_word(i - 1)
                    || (matches!(chars[i - 1], 'b' | 'c') && (i == 1 || !is_word(i - 2))) =>
            {
                let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
                let open = i + 1 + hashes;
                (chars.get(open) == Some(&'"')).then(|| {
                    let close: Vec<char> = format!("\"{}", "#".repeat(hashes)).chars().collect();
                    (open + 1..chars.len())
                        .find(|&j| chars[j..].starts_with(&close))
                        .map_or(chars.len(), |j| j + close.len())
                })
            }
            _ => None,
        };
        match end {
            Some(end) => {
                let end = end.max(i + 1);
                out.extend(
                    chars[i..end]
                        .iter()
                        .map(|&c| if c == '\n' { '\n' } else { ' ' }),
                );
                i = end;
            }
            None => {
                out.push(chars[i]);
                i += 1;
            }
        }
    }
    out
}

#[test]
fn the_path_attribute_finder_reads_code_not_comments_or_strings() {
    let text = concat!(
        "#[path = \"x.rs\"]\nmod a;\n",
        "// #[path = \"y.rs\"] in a comment\n",
        "/// #[path] in a doc comment\n",
        "/* #[path = \"z.rs\"] /* nested */\n#[path] */ mod b;\n",
        "const S: &str = \"#[path = \\\"s.rs\\\"]\";\n",
        "const M: &str = \"a string\n#[path = \\\"m.rs\\\"] on its second line\";\n",
        "const R: &str = r#\"#[path = \"r.rs\"]\"#;\n",
        "const Q: char = '\"'; # [ path = \"spaced.rs\" ]\nmod c;\n",
        "#[cfg_attr(unix, path = \"unix.rs\")]\nmod d;\n",
        "#[serde(rename = \"path\")]\nfn e<'a>(_: &'a str, _: char) -> char { '\\'' }\n",
        "#[pathological]\n#![path = \"inner.rs\"]\n",
    );
    assert_eq!(path_attribute_lines(text), vec![1, 11, 13, 18]);
}

/// Past this many lines a library's or binary's source file mixes concerns: split it.
const SOURCE_MAX_LINES: usize = 1_000;

/// Whether `path` is source of a library or binary: a `.rs` file under a crate's `src/` that is
/// not test-only (a `tests.rs` module, or anything under a `tests/` folder: integration tests,
/// their fixtures, the test-support crate).
fn is_crate_source(path: &str) -> bool {
    let mut folders: Vec<&str> = path.split('/').collect();
    let file = folders.pop().unwrap_or("");
    file.ends_with(".rs")
        && file != "tests.rs"
        && folders.contains(&"src")
        && !folders.contains(&"tests")
}

#[test]
fn source_files_are_at_most_a_thousand_lines() {
    let root = repo();
    let files = tracked_files();
    let sources: Vec<&String> = files
        .iter()
        .filter(|f| checked(f) && is_crate_source(f))
        .collect();
    assert!(
        sources.iter().any(|f| *f == "kernels/src/lib.rs"),
        "sanity: the crates' source files were listed"
    );
    let mut long = Vec::new();
    for file in sources {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        let lines = text.lines().count();
        if lines > SOURCE_MAX_LINES {
            long.push(format!("{file}: {lines} lines"));
        }
    }
    assert!(
        long.is_empty(),
        "source files longer than {SOURCE_MAX_LINES} lines:\n{}\nsplit each along its concerns: \
         `foo.rs` keeps the outline, each concern moves to a module of its own in `foo/` (its \
         tests to `foo/tests.rs`)",
        long.join("\n")
    );
}

#[test]
fn the_length_rule_reads_library_and_binary_sources_only() {
    assert!(is_crate_source("kernels/src/q8.rs"));
    assert!(is_crate_source("cli/src/bin/redraft.rs"));
    assert!(is_crate_source("fixtures/corpus/src/lib.rs"));
    assert!(!is_crate_source("train/src/corpus/tests.rs"));
    assert!(!is_crate_source("engine/src/qwen2/tests/fixtures.rs"));
    assert!(!is_crate_source("engine/tests/engine/sampler.rs"));
    assert!(!is_crate_source(
        "eval/tests/fixtures/next_edit/new/src/added.rs"
    ));
    assert!(!is_crate_source("tests/src/lib.rs"));
    assert!(!is_crate_source("engine/benches/attention.rs"));
    assert!(!is_crate_source("kernels/src/q8.md"));
}

/// Backticked spans of `text` that name a file in the repository: a path starting with one of
/// `roots` (the tracked top-level folders) and ending in a file extension, without spaces or
/// wildcards. Each with its 1-based line.
fn named_paths<'a>(text: &'a str, roots: &[&str]) -> Vec<(usize, &'a str)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        for (i, span) in line.split('`').enumerate() {
            let is_path = i % 2 == 1
                && !span.contains([' ', '*', '{', '<', '$', '?', '['])
                && span
                    .split_once('/')
                    .is_some_and(|(root, _)| roots.contains(&root))
                && span
                    .rsplit('/')
                    .next()
                    .and_then(|name| name.rsplit_once('.'))
                    .is_some_and(|(stem, ext)| {
                        !stem.is_empty() && ext.chars().all(|c| c.is_ascii_alphanumeric())
                    });
            if is_path {
                found.push((number + 1, span));
            }
        }
    }
    found
}

#[test]
fn files_the_docs_name_exist() {
    // A file moved without its mentions leaves readers looking for it; the measurement reports
    // under docs/reports/ are history and keep the paths of their day. Spans starting with a
    // top-level folder's name are checked, whole or as the end of a tracked path.
    let files = tracked_files();
    let roots: Vec<&str> = {
        let mut roots: Vec<&str> = files
            .iter()
            .filter_map(|f| f.split_once('/').map(|(root, _)| root))
            .collect();
        roots.sort_unstable();
        roots.dedup();
        roots
    };
    let mut missing = Vec::new();
    for doc in files
        .iter()
        .filter(|f| f.ends_with(".md") && checked(f) && !f.starts_with("docs/reports/"))
    {
        let text = std::fs::read_to_string(repo().join(doc)).expect("tracked docs are readable");
        for (line, path) in named_paths(&text, &roots) {
            // Repository paths, or paths inside a crate or folder the text is about (the code
            // map names `qwen2/realign.rs` under `engine/`): some tracked file ends with it.
            let suffix = format!("/{path}");
            if !files.iter().any(|f| f == path || f.ends_with(&suffix)) {
                missing.push(format!("{doc}:{line}: `{path}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs name files that are not in the repository (moved or renamed? point at where they \
         are now):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_path_finder_reads_backticked_repository_files_only() {
    let roots = ["engine", "docs"];
    let text = "see `engine/src/qwen2.rs` and `docs/cli.md`\n\
                not `redraft serve`, `engine/src/*.rs`, `target/x.rs`, `engine/`, `a b/c.rs`\n\
                `engine/src/sampler/config.rs` too";
    assert_eq!(
        named_paths(text, &roots),
        [
            (1, "engine/src/qwen2.rs"),
            (1, "docs/cli.md"),
            (3, "engine/src/sampler/config.rs")
        ]
    );
}
