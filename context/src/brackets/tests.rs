//! The bracket scanner's tests: each language's literals, and resuming at a line start.

use super::*;
use proptest::prelude::*;

fn depth_of(language: Language, text: &str) -> (usize, usize) {
    let mut scanner = Scanner::new(language);
    scanner.feed(text);
    (scanner.depth(), scanner.errors)
}

#[test]
fn brackets_in_strings_comments_and_chars_do_not_count() {
    let rust = r#"f("(", '(', '\'', /* ( /* nested ( */ */ x) // (
"#;
    assert_eq!(depth_of(Language::Rust, rust), (0, 0));
    assert_eq!(
        depth_of(Language::Rust, "fn f<'a>(x: &'a str) {"),
        (1, 0),
        "lifetimes are not char literals"
    );
    assert_eq!(
        depth_of(Language::Python, "f('(', \"\"\"\n(\n\"\"\", x) # (\n"),
        (0, 0)
    );
    assert_eq!(depth_of(Language::Rust, "let c = '字'; g("), (1, 0));
    // A quote, a line break and a quote make no char (Rust refuses a raw line break in one).
    let mut scanner = Scanner::new(Language::Rust);
    scanner.feed("f<'\n'x'(");
    assert_eq!((scanner.open(), scanner.in_code()), ("(".to_string(), true));
}

#[test]
fn raw_strings_hold_quotes_and_backslashes_until_their_hashes() {
    let raw = r###"f(r#"a "quoted" ( \"#, br"\", r##"{ "# }"##, x)"###;
    assert_eq!(depth_of(Language::Rust, raw), (0, 0));
    // An `r` that ends a word starts no raw string.
    assert_eq!(depth_of(Language::Rust, "for\"(\" in x {"), (1, 0));
    assert_eq!(depth_of(Language::Rust, "let s = r\"\n(\n\"; g("), (1, 0));
    let mut open = Scanner::new(Language::Rust);
    open.feed("let s = r#\"\n");
    assert!(
        !open.in_code(),
        "still inside the raw string at the next line"
    );
}

#[test]
fn wrong_and_extra_closers_are_errors() {
    assert_eq!(depth_of(Language::Rust, "(]"), (0, 1));
    assert_eq!(depth_of(Language::Rust, "())"), (0, 1));
    let call = Scanner::resume(Language::Rust, "{(", LexMode::default());
    assert_eq!(call.open(), "{(");
    assert_eq!(trouble(&call, "a", ")}"), 0);
    assert!(
        trouble(&call, "a)", ")}") > 0,
        "closes what the suffix closes"
    );
    assert!(
        trouble(&call, "g(a", ")}") > 0,
        "leaves its own opener open"
    );
    assert_eq!(trouble(&call, "g(a)", ")}"), 0);
}

#[test]
fn python_strings_but_triple_quoted_ones_end_at_their_line() {
    let mut typo = Scanner::new(Language::Python);
    typo.feed("print(\"unterminated)\n");
    assert!(typo.in_code(), "{typo:?}");
    assert_eq!(typo.depth(), 1, "the call is still open");
    let mut continued = Scanner::new(Language::Python);
    continued.feed("s = 'a \\\n");
    assert!(!continued.in_code(), "a backslash continues the line");
    for quotes in ["\"\"\"", "'''"] {
        let mut doc = Scanner::new(Language::Python);
        doc.feed(&format!("def f():\n    {quotes}Doc (\n"));
        assert!(!doc.in_code(), "{quotes}");
        doc.feed(&format!("{quotes}\n"));
        assert!(doc.in_code(), "{quotes}");
        assert_eq!((doc.depth(), doc.literals_ended), (0, 1));
    }
}

/// Each language's tricky literals, read by its own rules: the brackets left open after
/// each text and whether it ends in code. Rust's rules, which every language but Rust and
/// Python got before (as plain text), read each of them otherwise.
#[test]
fn a_block_comment_carried_into_a_language_without_them_reads_on_as_code() {
    let in_comment = LexMode::default().after(Language::Rust, "/* (");
    assert!(!in_comment.in_code());
    let after = in_comment.after(Language::Python, "x = '(' # )\n");
    assert!(after.in_code());
    assert_eq!(
        after,
        LexMode::default().after(Language::Python, "x = '(' # )\n")
    );
}

#[test]
fn each_language_reads_its_own_strings_and_comments() {
    let cases: &[(Language, &str, &str, bool)] = &[
        (Language::JavaScript, r#"f('it\'s (', "a\"(", x)"#, "", true),
        (Language::JavaScript, "f(`a ${b} (\n`, x); g(", "(", true),
        (
            Language::JavaScript,
            r"s.replace(/[(\/]/g, x); g(",
            "(",
            true,
        ),
        (Language::JavaScript, "x = a / 2; y = /\"/; f(", "(", true),
        (
            Language::TypeScript,
            "const t = html`\n  <p>(</p>\n",
            "",
            false,
        ),
        (Language::Go, r"f(`C:\dir\`, `(`); g(", "(", true),
        (
            Language::Go,
            "r := '(' ; s := \"unterminated (\ng(",
            "(",
            true,
        ),
        (Language::C, "/* /* */ f(", "(", true),
        (Language::Cpp, "s = \"typo (\nf(", "(", true),
        (
            Language::Java,
            "s = \"\"\"\n  \"(\" (\n  \"\"\"; f(",
            "(",
            true,
        ),
        (Language::CSharp, r#"var p = @"C:\dir\"; f("#, "(", true),
        (
            Language::Kotlin,
            "val s = \"\"\"\n  \"(\" \"\"\"\nf(",
            "(",
            true,
        ),
        (Language::Dart, "s = '''\nit's (\n'''; f(", "(", true),
        (Language::Shell, "echo ${#arr[@]} # (\nf() {", "{", true),
        (Language::Shell, r#"echo '"C:\' ; f("#, "(", true),
        (Language::Perl, "my $n = $#list; # (\nf(", "(", true),
        (Language::Ruby, "x = 1 # don't (\nf(", "(", true),
        (Language::Php, "# it's (\n$a = 'it\\'s (';\nf(", "(", true),
        (Language::R, "x <- 1 # (\nf(", "(", true),
        (
            Language::Yaml,
            "k: it's (fine)\nv: 'x (' # y (\nl: [",
            "[",
            true,
        ),
        (Language::Toml, "a = '''C:\\(\\'''\nb = [ # (\n", "[", true),
        (Language::Lua, "--[[ ( ]] s = [[\n(\n]] -- (\nf(", "(", true),
        (
            Language::Sql,
            "-- it's (\nSELECT f('it''s (', \"(\"",
            "(",
            true,
        ),
        (
            Language::Haskell,
            "foldl' f (x) {- {- ( -} -} g (",
            "(",
            true,
        ),
        (Language::Make, "# (\n\techo don't\nx := $(y", "(", true),
    ];
    let mut division = Scanner::new(Language::TypeScript);
    division.feed("f(a / b, c) / (d[0] / 2) / e /* ( */\n");
    assert_eq!((division.open(), division.in_code()), (String::new(), true));
    for &(language, text, open, in_code) in cases {
        let mut own = Scanner::new(language);
        own.feed(text);
        assert_eq!(
            (own.open().as_str(), own.in_code()),
            (open, in_code),
            "{language:?}: {text:?}"
        );
        let mut rust = Scanner::new(Language::Plain);
        rust.feed(text);
        assert_ne!(
            (rust.open().as_str(), rust.in_code()),
            (open, in_code),
            "Rust's rules read {language:?}'s {text:?} the same"
        );
    }
}

/// `(language, text, brackets open after it, whether it ends in code)`, each read by its
/// language's own scanner.
fn check_reads(cases: &[(Language, &str, &str, bool)]) {
    let mut wrong = Vec::new();
    for &(language, text, open, in_code) in cases {
        let mut scanner = Scanner::new(language);
        scanner.feed(text);
        let read = (scanner.open(), scanner.in_code());
        if read != (open.to_string(), in_code) {
            wrong.push(format!(
                "{language:?} {text:?}: {read:?}, not {:?}",
                (open, in_code)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A C++ raw string holds quotes, backslashes and brackets up to `)`, its delimiter and `"`;
/// an ordinary string's reading of it closes at its first inner quote.
#[test]
fn cpp_raw_strings_hold_quotes_and_brackets_until_their_delimiter() {
    check_reads(&[
        (Language::Cpp, r#"f(R"(")", x); g("#, "(", true),
        (Language::Cpp, r#"s = R"sql(a ")" (b)sql"; f("#, "(", true),
        (Language::Cpp, r#"s = u8R"x(")" ( )x"; f("#, "(", true),
        (Language::Cpp, r#"s = uR"(")"; t = UR"(\)"; f("#, "(", true),
        (Language::Cpp, "s = LR\"--(\n\")\" (\n)--\"; f(", "(", true),
        (Language::Cpp, "s = R\"json({\n  \"a\": [\n", "", false),
        // An `R` ending a name, or a quote with no `(` after its delimiter, opens no raw string.
        (Language::Cpp, r#"FOOR"(" f("#, "(", true),
        (Language::Cpp, r#"s = R"abc"; f("#, "(", true),
    ]);
}

/// Lua's long brackets close only at a closer of their own level: `]]` inside `[==[` is text.
#[test]
fn lua_long_brackets_of_any_level_close_at_their_own_level() {
    check_reads(&[
        (Language::Lua, "s = [==[ ]] ]=] ( ]==] f(", "(", true),
        (Language::Lua, "--[==[ ]] ( ]==] f(", "(", true),
        (Language::Lua, "x = [=[\n(\n]]\n]=] f(", "(", true),
        (Language::Lua, "--[=[ a comment (\n", "", false),
        (Language::Lua, "--[[ ( ]] s = [[\n(\n]] -- (\nf(", "(", true),
        (Language::Lua, "t[a[1]] = f(", "(", true),
        (Language::Lua, "-- [==[ is no long comment\nf(", "(", true),
    ]);
}

/// After a keyword that an operand follows (`return`, `typeof`, ...) a `/` opens a regular
/// expression; after a name it divides.
#[test]
fn a_slash_after_return_and_other_keywords_opens_a_regex() {
    for keyword in [
        "return",
        "typeof",
        "case",
        "do",
        "else",
        "in",
        "of",
        "new",
        "delete",
        "void",
        "throw",
        "yield",
        "await",
        "instanceof",
    ] {
        check_reads(&[(
            Language::JavaScript,
            &format!("  {keyword} /[(]/; f("),
            "(",
            true,
        )]);
    }
    check_reads(&[
        (
            Language::TypeScript,
            "return /[(]/.test(s) && f(",
            "(",
            true,
        ),
        (Language::JavaScript, "x = returns / (2); f(", "(", true),
        (Language::JavaScript, "x = a.length / (n); f(", "(", true),
        (Language::JavaScript, "x = x1 / (2); f(", "(", true),
        // A keyword's spelling as a property's name divides.
        (Language::JavaScript, "x = obj.in / 2; f(", "(", true),
        (Language::JavaScript, "x = a?.return/2; f(", "(", true),
        (Language::TypeScript, "y = this.new / (n); f(", "(", true),
    ]);
    // The keyword and the `/` fed apart (the cursor's line, then the middle).
    let mut scanner = Scanner::new(Language::JavaScript);
    scanner.feed("  retu");
    scanner.feed("rn ");
    scanner.feed("/[(]/; f(");
    assert_eq!((scanner.open(), scanner.in_code()), ("(".to_string(), true));
}

/// A here-document's body holds anything up to the line of its terminator (indented where
/// `<<-`, `<<~` or PHP allow): its quotes and brackets are text. A shift (`a << b`,
/// `$((a << b))`, `class << self`) and a here-string (`<<<`) open none.
#[test]
fn heredocs_hold_their_body_up_to_their_terminator() {
    check_reads(&[
        (Language::Shell, "cat <<EOF\n( ' \"\nEOF\nf(", "(", true),
        (Language::Shell, "cat <<-EOF\n\t( '\n\tEOF\nf(", "(", true),
        (
            Language::Shell,
            "cat << 'EOF' > out\n$( ' \"\nEOF\nf(",
            "(",
            true,
        ),
        (
            Language::Shell,
            "cat <<\"EOF\" | sed 's/(/[/'\n( '\nEOF\nf(",
            "(",
            true,
        ),
        (Language::Shell, "cat <<\\EOF\n(\nEOF\nf(", "(", true),
        (Language::Shell, "cat <<EOF # (\n(\nEOF\nf(", "(", true),
        (Language::Shell, "cat <<EOF\n  EOF\nEOFX\n(\n", "", false),
        (Language::Shell, "cat <<EOF\r\n(\r\nEOF\r\nf(", "(", true),
        (
            Language::Shell,
            "cat <<END-OF-TEXT;\nEND\n(\nEND-OF-TEXT\nf(",
            "(",
            true,
        ),
        (Language::Shell, "x=$((a << b))\nf(", "(", true),
        (Language::Shell, "x=$((a << 2))\nf(", "(", true),
        // An index and `$[...]` are arithmetic too, inside `((...))` or not.
        (Language::Shell, "arr[i<<j]=1\nf(", "(", true),
        (Language::Shell, "echo $[1<<n]\nf(", "(", true),
        (Language::Shell, "(( a[i<<j] = 3 ))\nf(", "(", true),
        (Language::Shell, "echo $(( a[i<<j] ))\nf(", "(", true),
        (Language::Shell, "x=$(\ncat <<EOF\n(\nEOF\n)\nf(", "(", true),
        (Language::Shell, "grep x <<< \"$s\"\nf(", "(", true),
        (Language::Ruby, "x = <<~EOS\n  ( ' \"\n  EOS\nf(", "(", true),
        (
            Language::Ruby,
            "call(<<-EOS, 1)\n  (\"\n  EOS\nf(",
            "(",
            true,
        ),
        (Language::Ruby, "s = <<EOS.strip\n(\nEOS\nf(", "(", true),
        (Language::Ruby, "x = <<~'EOS'\n  #{(}\n  EOS\nf(", "(", true),
        (
            Language::Ruby,
            "a << b\nclass << self\nx<<Y\ns<<~x\nf(",
            "(",
            true,
        ),
        (Language::Ruby, "x = <<EOS\n  EOS\n(\n", "", false),
        (Language::Perl, "print <<\"EOF\";\n( '\nEOF\nf(", "(", true),
        (Language::Perl, "print <<'EOF';\n(\nEOF\nf(", "(", true),
        (Language::Perl, "print <<~EOF;\n  (\n  EOF\nf(", "(", true),
        (Language::Perl, "my $x = 1 << 2;\nf(", "(", true),
        (Language::Php, "$s = <<<EOT\n( '\nEOT;\nf(", "(", true),
        (Language::Php, "$s = <<<\"EOT\"\n(\n  EOT;\nf(", "(", true),
        (Language::Php, "$s = <<<'EOT'\n( \"\nEOT;\nf(", "(", true),
        (Language::Php, "f(<<<EOT\n  a (\n  EOT);\ng(", "(", true),
        (Language::Php, "$s = <<<EOT\nEOTX (\n", "", false),
    ]);
}

/// A Ruby percent literal where an operand starts holds `#`, quotes and its own nested
/// brackets; after an operand `%` is a modulo.
#[test]
fn ruby_percent_literals_hold_hashes_and_quotes() {
    check_reads(&[
        (
            Language::Ruby,
            "attrs << %Q[#{a[0]}=\"#{a[1]}\"]\nf(",
            "(",
            true,
        ),
        (Language::Ruby, "x = %w[it's (a] [b]]\nf(", "(", true),
        (Language::Ruby, "r = %r{^/(\\w+) # \\}}\nf(", "(", true),
        (Language::Ruby, "s = %(it's (x) \"q)\nf(", "(", true),
        (Language::Ruby, "puts %w[a ' b], %i|c #|\nf(", "(", true),
        (Language::Ruby, "s = %q(multi (x)\nline ')\nf(", "(", true),
        (Language::Ruby, "s = %Q{open (\n", "", false),
        (
            Language::Ruby,
            "x = 10 % 3; y = n %(2); z = \"%s\" % [x]; f(",
            "(",
            true,
        ),
        (Language::Ruby, "x %= 3 # (\nf(", "(", true),
        (Language::Ruby, "when /^%/ then f(", "(", true),
    ]);
}

/// A here-document's state at its body's line starts: inside, whatever the line, until the
/// terminator's line; and a plain value (the language server keeps one a line).
#[test]
fn a_heredoc_is_open_at_its_body_lines() {
    fn copy<T: Copy>(value: &T) -> T {
        *value
    }
    let mut mode = LexMode::default();
    let mut in_code = Vec::new();
    for line in ["cat <<EOF >x (\n", "(\n", "EOF (\n", "EOF\n", "f(\n"] {
        mode = copy(&mode).after(Language::Shell, line);
        in_code.push(mode.in_code());
    }
    assert_eq!(in_code, [false, false, false, true, true]);
    assert!(std::mem::size_of::<LexMode>() <= 32);
}

/// Text a line at a time: the pieces a Rust `'` would read across a line end (`'` then a
/// line break then `'`, no valid char literal) are left out.
fn code_lines() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "(", ")", "{", "}", "[", "]", "\"", "'x'", "'\\n'", "'a ", "\"\"\"", "'''", "r#\"",
            "\"#", "br\"", "/*", "*/", "//", "#", "\\", "\n", "a", " ", "é", "`", "/", "--", "[[",
            "]]", "{-", "-}", "@\"", "=", "<<EOF", "<<-'EOF'", "EOF", "\tEOF", "<<<EOT", "EOT);",
            "<<~EOS", "  EOS", "R\"x(", ")x\"", "[==[", "]==]", "--[=[", "]=]", "return", "<<",
            "%w[", "%(", "%Q{", "%|", "|",
        ]),
        0..40,
    )
    .prop_map(|pieces| pieces.concat())
}

proptest! {
    /// Resuming at a line start from the state scanned there reads the rest as one scan
    /// of the whole text does: the oracle for the plan's line-start state.
    #[test]
    fn resuming_at_a_line_start_equals_scanning_through(text in code_lines()) {
        for language in Language::all() {
            let mut whole = Scanner::new(language);
            whole.feed(&text);
            let line_starts = std::iter::once(0)
                .chain(text.match_indices('\n').map(|(at, _)| at + 1));
            for at in line_starts {
                let mut before = Scanner::new(language);
                before.feed(&text[..at]);
                let mut after = Scanner::resume(language, &before.open(), before.mode());
                after.feed(&text[at..]);
                prop_assert_eq!(after.open(), whole.open());
                prop_assert_eq!(after.mode(), whole.mode());
                prop_assert_eq!(before.errors + after.errors, whole.errors);
            }
        }
    }

    /// The runs `feed` passes at once (plain code, a string's or comment's text) leave the
    /// scanner as reading them a token at a time does.
    #[test]
    fn passing_runs_at_once_equals_reading_token_by_token(text in code_lines()) {
        for language in Language::all() {
            let mut runs = Scanner::new(language);
            runs.feed(&text);
            let mut tokens = Scanner::new(language);
            let bytes = text.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                let was_code = tokens.in_code();
                i += tokens.step(bytes, i);
                if !was_code && tokens.in_code() {
                    tokens.literals_ended += 1;
                }
            }
            prop_assert_eq!(runs.open(), tokens.open());
            prop_assert_eq!(runs.mode(), tokens.mode());
            prop_assert_eq!(
                (runs.errors, runs.literals_ended, runs.previous, runs.previous_on_line),
                (tokens.errors, tokens.literals_ended, tokens.previous, tokens.previous_on_line)
            );
            prop_assert_eq!(runs.word, tokens.word);
            prop_assert_eq!(runs.terminator, tokens.terminator);
        }
    }

    /// `LexMode::after` over the lines of a text, one after another, ends where one scan
    /// of the whole text does, and so does any line's mode: the language server feeds a
    /// rope so.
    #[test]
    fn lex_mode_after_lines_equals_scanning_through(text in code_lines()) {
        for language in Language::all() {
            let mut at = 0;
            let mut mode = LexMode::default();
            for line in text.split_inclusive('\n') {
                mode = mode.after(language, line);
                at += line.len();
                let mut through = Scanner::new(language);
                through.feed(&text[..at]);
                prop_assert_eq!(mode, through.mode());
            }
        }
    }
}

/// Texts the proptests above once failed on, checked every run: a shell `<<` after a `((`
/// opened on an earlier line, and a Rust quote before a line break.
#[test]
fn resuming_equals_scanning_through_where_it_once_did_not() {
    for text in [
        "(\n%w[-}\"\"\"\"(r#\"\"\"\"%w[]\"\"<<EOF\n",
        "%([[\n]==]r#\"R\"x(<<EOF\n",
        "\"\"\"r#\"*/(<<-'EOF'\n'x'('x'",
        "x=$(\n(cat <<EOF\n",
    ] {
        for language in Language::all() {
            let mut whole = Scanner::new(language);
            whole.feed(text);
            let mut mode = LexMode::default();
            let mut at = 0;
            for line in text.split_inclusive('\n') {
                let mut before = Scanner::new(language);
                before.feed(&text[..at]);
                let mut after = Scanner::resume(language, &before.open(), before.mode());
                after.feed(&text[at..]);
                assert_eq!(
                    (after.open(), after.mode()),
                    (whole.open(), whole.mode()),
                    "{language:?} {text:?} resumed at {at}"
                );
                mode = mode.after(language, line);
                at += line.len();
                let mut through = Scanner::new(language);
                through.feed(&text[..at]);
                assert_eq!(mode, through.mode(), "{language:?} {text:?} to {at}");
            }
        }
    }
}
