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
/// brackets; after an operand `%` is a modulo. A typed one (`%r`, `%w`, ...) may be closed by
/// any punctuation (`%r%..%`: 6 more files of `libruby3.1` read to their end, 882 -> 888).
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
        // A letter's literal takes any punctuation for its delimiter.
        (Language::Ruby, "s = %r%a(#%m; f(", "(", true),
        (Language::Ruby, "w = %w-a ( ' b-; f(", "(", true),
        (Language::Ruby, "q = %q\"it's (\"; f(", "(", true),
    ]);
}

/// A Perl quote-like operator holds its text up to its delimiter's closer, whatever the
/// delimiter (bracketing ones nest: `q(a (b))`); `s`, `tr` and `y` have two parts, and two
/// bracketed ones may have blanks or a line break between (`s{..} {..}`). Its quotes, `#` and
/// brackets are text. A name that is no operator (`sort`, `$s`, `$h{y}`, `y => 1`, `-s $file`,
/// `$obj->s(..)`, `Foo::s`) opens none. Read as code, each operator left a string or a bracket
/// open, or hid the line's `(` in a comment.
#[test]
fn perl_quote_like_operators_hold_their_text() {
    check_reads(&[
        (Language::Perl, "my $s = q(it's (x));\nf(", "(", true),
        (Language::Perl, "my $s = qq{a \"b\" {c}};\nf(", "(", true),
        (Language::Perl, "my @w = qw[a ' b];\nf(", "(", true),
        (Language::Perl, "my @w = qw (a ' b);\nf(", "(", true),
        (Language::Perl, "if ($x =~ m/[(]/) { f(", "{(", true),
        (Language::Perl, "if ($x =~ m{^\\s*#}) { f(", "{(", true),
        (Language::Perl, "$x =~ s{(}{)}g;\nf(", "(", true),
        (Language::Perl, "$x =~ s{(} {)}g;\nf(", "(", true),
        (Language::Perl, "$x =~ s{(}\n  {)}g;\nf(", "(", true),
        (Language::Perl, "$x =~ s{(}/)/g;\nf(", "(", true),
        (Language::Perl, "$command =~ s|.*:||; # (\nf(", "(", true),
        (
            Language::Perl,
            "s/\\\\(.)/$1 eq \"n\" ? \"\\n\" : $1/eg;\nf(",
            "(",
            true,
        ),
        (Language::Perl, "$x =~ tr/a-z'/A-Z'/;\nf(", "(", true),
        (Language::Perl, "$x =~ y/'//;\nf(", "(", true),
        (Language::Perl, "my $r = qr/#(/;\nf(", "(", true),
        (Language::Perl, "my $r = qr#(#;\nf(", "(", true),
        (Language::Perl, "s,/+(,/,g; f(", "(", true),
        (Language::Perl, "my $s = qq{\n  (\n};\nf(", "(", true),
        (Language::Perl, "my $s = qq{ (\n", "", false),
        // Modifiers after the closer are the operator's, no `s` of another (`s ||`, `s, @_`).
        (Language::Perl, "if ($p =~ s{^a}{}s || $q) { f(", "{(", true),
        (
            Language::Perl,
            "return grep(!/^\\.{1,2}\\z/s, @_); f(",
            "(",
            true,
        ),
        // Names, no operators.
        (
            Language::Perl,
            "my @s = sort { $a <=> $b } @s; f(",
            "(",
            true,
        ),
        (Language::Perl, "my ($s, $y) = @_; f(", "(", true),
        (Language::Perl, "$h{s}{y} = $h{q}; f(", "(", true),
        (Language::Perl, "my %h = (s => 1, y => 'it'); f(", "(", true),
        (Language::Perl, "if (-s $file) { f(", "{(", true),
        (Language::Perl, "$obj->s('('); $obj->y; f(", "(", true),
        (Language::Perl, "Foo::s('('); f(", "(", true),
    ]);
}

/// Perl's POD, from a line starting `=` and a word up to the end of the line starting `=cut`,
/// is a comment, and so is everything after a line starting `__END__` or `__DATA__`: their
/// apostrophes and brackets are text. Read as code, `it's` opened a string that hid the rest of
/// the file.
#[test]
fn perl_pod_blocks_and_text_after_end_are_no_code() {
    check_reads(&[
        (Language::Perl, "=pod\n\nit's (\n\n=cut\nf(", "(", true),
        (
            Language::Perl,
            "sub f {\n=head1 NAME (\n\nDebian's\n\n=cut trailing (\n\tg(",
            "{(",
            true,
        ),
        (Language::Perl, "f(1);\n=item x\n\n(\n", "", false),
        (Language::Perl, "=cut (\nf(", "(", true),
        (Language::Perl, "=begin x\n=cutting (\n=cut\nf(", "(", true),
        // Not at a line's start, or no word after the `=`: code.
        (Language::Perl, "my $x\n= 1; f(", "(", true),
        (Language::Perl, "my $x\n=~ 1; f(", "(", true),
        (Language::Perl, "1;\n__END__\nit's (\n=cut\n(\n", "", false),
        (Language::Perl, "1;\n__DATA__\n#if (\n", "", false),
        (Language::Perl, "f(__END__);\n__ENDING__ (\n", "(", true),
    ]);
}

/// Perl's `$"`, `$'` and `$]` are variables, not a quote or a closer (a prototype's `($$)`
/// closes its bracket), and a quoted here-document terminator may follow a blank
/// (`<< "HERE"`): each read otherwise left a string or a bracket open in Perl's own modules
/// (`IPC/Open3.pm`, `File/Temp.pm`); Ruby reads `<< "b"` as an append still.
#[test]
fn perl_punctuation_variables_and_spaced_heredoc_terminators() {
    check_reads(&[
        (Language::Perl, "local $\" = ', '; f(", "(", true),
        (Language::Perl, "my $post = $'; f(", "(", true),
        (Language::Perl, "if ($] >= 5.008) { f(", "{(", true),
        (Language::Perl, "sub f($$) { g(", "{(", true),
        (
            Language::Perl,
            "croak << \"HERE\";\nCouldn't (\nHERE\nf(",
            "(",
            true,
        ),
        (Language::Ruby, "x = a << \"(\"; f(", "(", true),
    ]);
}

/// A Ruby or Perl `/` where an operand starts opens a regular expression: after an operator,
/// an opener, a keyword or at a line's start, and in Ruby after a method's name, a blank and
/// no blank (`split /,/`). After an operand it divides, a `}` included (a block's, a hash
/// subscript's), and Ruby's `:/` is a symbol. Its `#` and quotes are text, and where an operand
/// starts it may go on across lines. Read as code, a quote in one opened a string, and a `#` hid the rest of its
/// line; ended at its line, a Ruby pattern's next lines were read as code (of the 907 Ruby
/// files over 1 KB in Debian's `libruby3.1`, 900 now read to their end in code with nothing
/// open, 888 with patterns ending at their line).
#[test]
fn ruby_and_perl_slashes_where_an_operand_starts_open_a_regex() {
    check_reads(&[
        (Language::Ruby, "x = /[(]/\nf(", "(", true),
        (Language::Ruby, "if s =~ /'#/ then f(", "(", true),
        (Language::Ruby, "x.split /'/\nf(", "(", true),
        (Language::Ruby, "x.gsub /\"(/, ''; f(", "(", true),
        (Language::Ruby, "return /#(/ unless x; f(", "(", true),
        (
            Language::Ruby,
            "x = a / (2); y = a/(2); x /= (2); f(",
            "(",
            true,
        ),
        (Language::Ruby, "n = 10 /(2); f(", "(", true),
        (
            Language::Ruby,
            "t = list.sum { |x| x } / (n); f(",
            "(",
            true,
        ),
        (Language::Ruby, "t = list.reduce(:/); f(", "(", true),
        (Language::Ruby, "d = dir.chomp(?/); f(", "(", true),
        (Language::Perl, "if ($x =~ /#'/) { f(", "{(", true),
        (Language::Perl, "my @f = split /(/, $s; f(", "(", true),
        (Language::Perl, "my @g = grep { /'/ } @l; f(", "(", true),
        (Language::Perl, "my $n = $h{a} / (2); f(", "(", true),
        (Language::Perl, "my $n = $x // '('; f(", "(", true),
        (Language::Perl, "my $n = $split / (2); f(", "(", true),
        // Perl's `/.../` is its `m/.../`, across lines too; `*/` is a typeglob.
        (
            Language::Perl,
            "if ($x =~ /^ (a)   # (\n   (b) $/xs) { f(",
            "{(",
            true,
        ),
        (Language::Perl, "*RS = */ ;\nf(", "(", true),
        // Ruby's too (`/x` patterns across lines: its standard library writes them); an
        // operator method's name is no pattern (`def /(other)`).
        (Language::Ruby, "re = /\n  (a|b)) # ((\n/x; f(", "(", true),
        (Language::Ruby, "def /(o) = o; f(", "(", true),
        // After a name it may be a division (`w` a variable): it ends at its line.
        (
            Language::Ruby,
            "half = width /2\nif a\n  f(\nend\n",
            "(",
            true,
        ),
        (Language::Ruby, "x.split /,\nf(", "(", true),
    ]);
}

/// C#'s raw strings close at as many quotes as opened them (`""""` ... `""""`, `$` or `$$`
/// before them too), hold backslashes as they are and may span lines; `@"` strings span lines
/// too, with `""` for a quote. Read as before, four quotes were a `"""` string and an empty
/// one, a backslash before the closing quotes escaped one, and an `@"` string ended at its
/// line.
#[test]
fn csharp_raw_and_verbatim_strings_close_where_csharp_closes_them() {
    check_reads(&[
        (
            Language::CSharp,
            "var s = \"\"\"\"a \"\"\" (\"\"\"\";\nf(",
            "(",
            true,
        ),
        (
            Language::CSharp,
            "var s = \"\"\"\n  \" (\n  \"\"\";\nf(",
            "(",
            true,
        ),
        (
            Language::CSharp,
            "var p = \"\"\"C:\\dir\\\"\"\"; f(",
            "(",
            true,
        ),
        (
            Language::CSharp,
            "var s = $$\"\"\"\n  {\"a\": {{x}} (\n  \"\"\";\nf(",
            "(",
            true,
        ),
        (
            Language::CSharp,
            "var s = @\"a \"\"(\"\" b\"; f(",
            "(",
            true,
        ),
        (
            Language::CSharp,
            "const string Code = @\"\nif 'clr' not in (x):\n    pass\n\"; f(",
            "(",
            true,
        ),
        (Language::CSharp, "var q = @\"SELECT (\n", "", false),
    ]);
}

/// A quote inside a hole of code in a string opens a string of the hole's, and does not end
/// the outer one: Swift's `\(..)`, Kotlin's `${..}`, C#'s `$"{..}"` and `$@"{..}"` (where
/// `{{` is a brace), JavaScript's `` `${..}` ``, Ruby's `"#{..}"`, shell's `"$(..)"`, nested
/// too. Read as before,
/// the inner quotes closed the outer string and left its text as code, or opened one that ran
/// on.
#[test]
fn quotes_inside_a_hole_in_a_string_do_not_end_it() {
    check_reads(&[
        (
            Language::Swift,
            "let s = \"a \\(f(\"(\")) b\"; f(",
            "(",
            true,
        ),
        (
            Language::Swift,
            "let s = \"\\(a[\"k\"] ?? \")\") (\"; f(",
            "(",
            true,
        ),
        (
            Language::Swift,
            "let s = \"\"\"\n  \\(f(\")\"))\n  \"\"\"\nf(",
            "(",
            true,
        ),
        (
            Language::Kotlin,
            "val s = \"a ${f(\"(\")} b\"; f(",
            "(",
            true,
        ),
        (
            Language::Kotlin,
            "val s = \"${m.map { \"}\" }} (\"; f(",
            "(",
            true,
        ),
        (Language::Kotlin, "val s = \"a $x (\"; f(", "(", true),
        (
            Language::Kotlin,
            "val s = \"\"\"\n  ${f(\"\"\"(\"\"\")} (\n  \"\"\"\nf(",
            "(",
            true,
        ),
        (
            Language::Kotlin,
            "val s = \"${\"${\"(\"}\"}\"; f(",
            "(",
            true,
        ),
        (
            Language::CSharp,
            "var s = $\"a {f(\"(\")} b\"; f(",
            "(",
            true,
        ),
        (Language::CSharp, "var s = $\"{{(\"; f(", "(", true),
        (
            Language::CSharp,
            "var s = $@\"a {f(\"(\")} \"\"b\n(\"; f(",
            "(",
            true,
        ),
        (
            Language::CSharp,
            "var s = $\"{(a ? \"x\" : \"(\")}\"; f(",
            "(",
            true,
        ),
        // A template literal in a hole of a template literal, as HTML is built in JavaScript.
        (
            Language::JavaScript,
            "const s = `<ul>${items.map(i => `<li>(${i}</li>`).join('')}</ul>`; f(",
            "(",
            true,
        ),
        // A hole across lines is code: its brackets count, and a line inside it is code.
        (
            Language::TypeScript,
            "const s = `\n  ${items.map((item) => {\n    return f(",
            "({(",
            true,
        ),
        (Language::JavaScript, "const s = `a ${b} (", "", false),
        (
            Language::JavaScript,
            "const s = `$x ${'`'} (`; f(",
            "(",
            true,
        ),
        (Language::JavaScript, "const s = '${'; f(", "(", true),
        (Language::Ruby, "s = \"a #{h[\"(\"]} b\"; f(", "(", true),
        (
            Language::Ruby,
            "s = \"#{a.map { |x| \"}\" }} (\"; f(",
            "(",
            true,
        ),
        (Language::Ruby, "s = \"a # b #@x (\"; f(", "(", true),
        (Language::Ruby, "s = `ls #{d(\"`\")}`; f(", "(", true),
        (Language::Ruby, "s = 'a #{ ('; f(", "(", true),
        // Dart's style is single quotes: a map read in a hole has its own.
        (Language::Dart, "var s = '${m['(']} b'; f(", "(", true),
        (Language::Dart, "var s = \"${m[\"k\"]} (\"; f(", "(", true),
        (
            Language::Dart,
            "var s = '''\n  ${f(''')''')} (\n  '''\nf(",
            "(",
            true,
        ),
        (Language::Dart, "var s = '$x ('; f(", "(", true),
        (Language::Dart, "var s = '${'${'('}'}'; f(", "(", true),
        // An escaped opener is text.
        (Language::Dart, "var s = '\\${ ('; f(", "(", true),
        (Language::JavaScript, "const s = `\\${ (`; f(", "(", true),
        (Language::Ruby, "s = \"\\#{ (\"; f(", "(", true),
        // Shell's command substitution in a string: `"(" ` in it was code, `")"` a string,
        // and a `#` in it began a comment.
        (Language::Shell, "x=\"$(echo \"(\")\"; f(", "(", true),
        (Language::Shell, "n=\"$(grep -c \" #\" f)\"; f(", "(", true),
        (
            Language::Shell,
            "d=\"$(dirname \"$(readlink -f \"$0\")\")\"; f(",
            "(",
            true,
        ),
        (Language::Shell, "s=\"$((a + (b))) (\"; f(", "(", true),
        (Language::Shell, "s=\"a $(f \"x\" (", "(", true),
        (Language::Shell, "s=\"$(\n  ls (\n", "(", true),
        // `${..}`, a single-quoted string and an escaped `$` hold no code.
        (Language::Shell, "s=\"${x:-(}\"; f(", "(", true),
        (Language::Shell, "s='$(\"'; f(", "(", true),
        (Language::Shell, "s=\"\\$(\"; f(", "(", true),
    ]);
}

/// PHP 8's attributes: `#[` opens one (which may span lines), not a `#` comment.
#[test]
fn php_attributes_are_code_not_comments() {
    check_reads(&[
        (
            Language::Php,
            "#[Route(\n    '/api', # it's (\n    methods: ['GET'",
            "[([",
            true,
        ),
        (Language::Php, "#[Pure] function f(", "(", true),
        (Language::Php, "# [not an attribute (\nf(", "(", true),
    ]);
}

/// Two here-documents opened on one line have their bodies one after the other, each up to
/// its own terminator (shell's `cat <<A <<B`, Ruby's `f(<<~A, <<~B)`, Perl's
/// `print <<A, <<B;`). Read as before, the second's body was code. A third's still is: a
/// [`LexMode`] holds two terminators, and three on a line are rare.
#[test]
fn two_heredocs_on_a_line_have_their_bodies_in_turn() {
    check_reads(&[
        (Language::Shell, "cat <<A <<B\n(\nA\n'\nB\nf(", "(", true),
        (
            Language::Shell,
            "cat <<A 3<<'B'\n(\nB\nA\n'\nB\nf(",
            "(",
            true,
        ),
        (Language::Shell, "cat <<A <<B\nx\nA\n(\n", "", false),
        (
            Language::Ruby,
            "f(<<~A, <<~B)\n  (\n  A\n  '\n  B\ng(",
            "(",
            true,
        ),
        (
            Language::Perl,
            "print <<A, <<\"B\";\n(\nA\n'\nB\nf(",
            "(",
            true,
        ),
        (
            Language::Shell,
            "cat <<A <<B <<C\nA\nB\n(\nC\nf(",
            "((",
            true,
        ),
    ]);
}

/// Each line start of `text`, in every language: a scan resumed there from the state scanned
/// up to it reads on as one scan of the whole does, and [`LexMode::after`] line by line ends
/// each line where that scan does.
fn check_resumes(text: &str) {
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

/// The literals that span lines resume at each of their lines: Perl's quote-like operators
/// (between `s{..}`'s parts too) and POD, a second here-document's terminator kept through the
/// first's body, C#'s `@"`, `$@"` and raw strings, and a hole of code spanning lines.
#[test]
fn literals_spanning_lines_resume_at_each_line() {
    for text in [
        "my $s = qq{a\n(\n{b}\n};\n$x =~ s{a}\n  {b\n(\n}x;\n=head1 X\n\nit's\n=cut\nf(\n",
        "cat <<A <<B\n(\nA\n'\nB\nf(\n",
        "var s = $@\"{f(\n\"(\")}\n\"\"(\";\nvar t = \"\"\"\"\n\"\"\"\n\"\"\"\";\n",
        "val s = \"\"\"\n${f(\n\"(\")}\n(\"\"\"\n",
        "let s = \"\"\"\n\\(f(\n\")\"))\n\"\"\"\n",
        "const s = `\n${items.map((i) => {\n  return `(${i}\n`;\n})}\n(`;\nf(\n",
        "s = \"a\n#{h.map { |k|\n  \"}\" }} (\n\"\ncmd = `ls #{d(\n\"`\")}`\n",
        "var s = '''\n${f(\n'(')}\n(''';\nvar t = '${[\n'''(''']}';\n",
        "var s = r'''\n\\''';\n(''';\nt = r\"\"\"\n\"(\n\"\"\";\n",
        "$s = \"{$a[\n\"(\"]}\n(\";\n$t = `{$b(\n\"`\")}`;\n",
    ] {
        check_resumes(text);
    }
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
            "(",
            ")",
            "{",
            "}",
            "[",
            "]",
            "\"",
            "'x'",
            "'\\n'",
            "'a ",
            "\"\"\"",
            "'''",
            "r#\"",
            "\"#",
            "br\"",
            "/*",
            "*/",
            "//",
            "#",
            "\\",
            "\n",
            "a",
            " ",
            "é",
            "`",
            "/",
            "--",
            "[[",
            "]]",
            "{-",
            "-}",
            "@\"",
            "=",
            "<<EOF",
            "<<-'EOF'",
            "EOF",
            "\tEOF",
            "<<<EOT",
            "EOT);",
            "<<~EOS",
            "  EOS",
            "R\"x(",
            ")x\"",
            "[==[",
            "]==]",
            "--[=[",
            "]=]",
            "return",
            "<<",
            "%w[",
            "%(",
            "%Q{",
            "%|",
            "|",
            "q(",
            "qw{",
            "s{",
            "}{",
            "} {",
            "s/",
            "tr|",
            "y#",
            "m!",
            "=pod",
            "=head1 x",
            "=cut",
            "$\"",
            "$@\"",
            "@$\"",
            "\"\"\"\"",
            "$$\"\"\"",
            "\\(",
            "${",
            "<<A <<B",
            "A",
            "B",
            "split /",
            "x /",
            "(:/",
            "$",
            "__END__",
            "$\"",
            "$]",
            "<< \"A\"",
            "?/",
            "s{a}{b}s ",
            "sub s ",
            "$'",
            "*\"",
            "/ ",
            "=foo",
            "?(",
            "?\"",
            "?\\",
            "x ?",
            "r'",
            "r\"\"\"",
            "{$",
            "1 <<A",
            ") <<A",
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
                i += tokens.step(bytes, i);
            }
            prop_assert_eq!(runs.open(), tokens.open());
            prop_assert_eq!(runs.mode(), tokens.mode());
            prop_assert_eq!(
                (runs.errors, runs.literals_ended, runs.previous, runs.previous_on_line),
                (tokens.errors, tokens.literals_ended, tokens.previous, tokens.previous_on_line)
            );
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
        check_resumes(text);
    }
}

/// Where a scan of `text` in `language` ends: the brackets open and whether in code.
fn end_of(language: Language, text: &str) -> (String, bool) {
    let mut scanner = Scanner::new(language);
    scanner.feed(text);
    (scanner.open(), scanner.in_code())
}

/// A sub named as a quote-like operator (`sub s {`, `sub y {`) is a name, not a substitution
/// whose second part would open at the next line's `#` and hold the rest of the file.
#[test]
fn a_sub_named_as_a_quote_like_operator_is_a_name() {
    for name in ["q", "s", "y", "tr", "m"] {
        let text = format!("sub {name} {{\n  return 1;\n}}\n# it's\nf(\n");
        assert_eq!(end_of(Language::Perl, &text), ("(".into(), true), "{name}");
    }
    assert_eq!(
        end_of(Language::Perl, "&s(1); sub s($) { 1 }\nf(\n"),
        ("(".into(), true)
    );
    assert_eq!(
        end_of(Language::Perl, "print q {a}, s {a}{b}r;\nf(\n"),
        ("(".into(), true),
        "an operator after a blank is still one"
    );
}

/// Between the parts of `s{a} {b}` a `#` starts a comment (Perl allows one there), not a
/// second part closed by the next `#`.
#[test]
fn a_comment_between_substitution_parts_opens_no_part() {
    assert_eq!(
        end_of(Language::Perl, "s{a}\n# it's\n{b};\nf(\n"),
        ("(".into(), true)
    );
}

/// Perl's `$"` and `*"` (the list separator and its glob), Ruby's `$'` and `$"` (the text after
/// a match, the loaded features) are variables: no string opens at their quote.
#[test]
fn quotes_in_punctuation_variables_open_no_string() {
    assert_eq!(
        end_of(Language::Perl, "local $\" = ', ';\n*LIST = *\" ;\nf(\n"),
        ("(".into(), true)
    );
    assert_eq!(
        end_of(Language::Ruby, "path = $'\nf(\n  '(',\n"),
        ("(".into(), true)
    );
    assert_eq!(end_of(Language::Ruby, "p $\"\nf(\n"), ("(".into(), true));
    assert_eq!(
        end_of(Language::Shell, "echo $'a(' b\nf(\n"),
        ("(".into(), true),
        "shell's `$'..'` is a string"
    );
}

/// A Perl line that starts with a `/` and a blank goes on dividing (`($done * 100)\n / $total`):
/// read as a pattern, it would run on across lines to the next `/`.
#[test]
fn a_perl_line_starting_with_a_division_divides() {
    assert_eq!(
        end_of(
            Language::Perl,
            "my $pct = ($done * 100)\n    / $total; # it's\nf(\n"
        ),
        ("(".into(), true)
    );
    assert_eq!(
        end_of(Language::Perl, "/^#/ and next;\nf(\n"),
        ("(".into(), true),
        "a pattern at a line's start is still one"
    );
}

/// Only a POD command (`=head1`, `=pod`, `=item`, ...) at a line's start opens POD: `=foo()` on a
/// statement's second line is an assignment.
#[test]
fn only_a_pod_command_opens_pod() {
    assert_eq!(
        end_of(Language::Perl, "my $x\n=foo();\nf(\n"),
        ("(".into(), true)
    );
    for command in [
        "=pod",
        "=head2 X",
        "=over 4",
        "=item *",
        "=begin html",
        "=for x",
        "=encoding utf8",
    ] {
        let text = format!("{command}\n\nf(\n\n=cut\n");
        assert_eq!(
            end_of(Language::Perl, &text),
            (String::new(), true),
            "{command}"
        );
    }
}

/// At each `$` of a run in C# code the opener counts the `$`s and quotes that follow up to a
/// bound: counting all of them made a line of 200,000 `$`s cost 40 s (each `$` counted the
/// rest). Raw strings with their `$`s still open as before.
#[test]
fn a_run_of_dollars_or_quotes_is_counted_up_to_a_bound() {
    let dollars = "$".repeat(100_000);
    assert_eq!(quotes::opener_runs(dollars.as_bytes()), (256, 0));
    let quotes = "\"".repeat(100_000);
    assert_eq!(quotes::opener_runs(quotes.as_bytes()), (0, 256));
    assert_eq!(quotes::opener_runs(b"$$\"\"\"\"x"), (2, 4));
    assert_eq!(
        end_of(
            Language::CSharp,
            &format!("{dollars}\nvar s = $$$$\"\"\"\"a\"\"\"(\"\"\"\";\nf(\n")
        ),
        ("(".into(), true)
    );
}

/// A Perl or Ruby `<<` after a number or a closer shifts, blank or not before it
/// (`1 <<COUNT`, `(a + b) <<BITS`): an operand is there, so no here-document opens. Read as
/// one before, the rest of the file was its body. After a name it still opens one (`print
/// <<EOS`, `puts <<~EOS`; Perl's `print $fh <<EOS` writes one to a file handle).
#[test]
fn a_shift_after_a_number_or_a_closer_opens_no_heredoc() {
    check_reads(&[
        (Language::Perl, "my $mask = 1 <<COUNT;\nf(", "(", true),
        (Language::Perl, "my $x = (1 + $y) <<SHIFT;\nf(", "(", true),
        (Language::Ruby, "x = 0x1 <<BITS\nf(", "(", true),
        (Language::Ruby, "x = a[0] <<N\nf(", "(", true),
        (Language::Perl, "print $fh <<EOS;\n(\nEOS\nf(", "(", true),
        (Language::Perl, "print <<EOS;\n(\nEOS\nf(", "(", true),
        (Language::Ruby, "puts <<~EOS\n  (\nEOS\nf(", "(", true),
        (Language::Ruby, "x = [<<A]\n(\nA\nf(", "(", true),
    ]);
}

/// Ruby's character literals, `?(` and `?"` (`?\"` escaped), where an operand starts after a
/// blank or an opener: one character, no bracket and no string. A `?` after an operand is the
/// ternary operator's (`a ? "(" : ")"`), and so is one followed by a blank or by a name
/// (`x ?ab : c`). Read as code before, `?(` left a bracket open and `?"` a string (of the 907
/// Ruby files over 1 KB in Debian's `libruby3.1`, 880 read to their end in code with nothing
/// open before, 882 after).
#[test]
fn ruby_character_literals_are_one_character() {
    check_reads(&[
        (Language::Ruby, "if c == ?( then f(", "(", true),
        (Language::Ruby, "i = s.index(?\"); f(", "(", true),
        (Language::Ruby, "pairs = [?', ?)]; f(", "(", true),
        (Language::Ruby, "q = ?\\\"; f(", "(", true),
        (Language::Ruby, "case c\nwhen ?{ then f(", "(", true),
        (Language::Ruby, "x = a ? \"(\" : \")\"; f(", "(", true),
        (
            Language::Ruby,
            "x = s.empty? ? \"(\" : \")\"; f(",
            "(",
            true,
        ),
        (Language::Ruby, "x = ok?(a) ? [b : c; f(", "[(", true),
        (Language::Ruby, "x = y ?ab : c; f(", "(", true),
        // The lines of a `/x` pattern across lines (Ruby's stdlib writes them) are read as
        // code: a `?` right after an operator there quantifies.
        (
            Language::Ruby,
            "  (.*?) (\\d+)?\n  (?:a|b)+?\nf(",
            "(",
            true,
        ),
    ]);
}

/// PHP's `{$..}` in a `"` string or a backtick command is code: a quote in it opens a string
/// of its own (`"{$a["k"]}"`). `{ $` and a `'` string's `{$` are text, and so is `\{$` (the
/// escape takes the `{`). Read as text before, the hole's first quote closed the string.
#[test]
fn php_holes_in_double_quoted_strings_are_code() {
    check_reads(&[
        (Language::Php, "$s = \"{$a[\"(\"]} (\"; f(", "(", true),
        (Language::Php, "$s = \"a {$o->f(\")\")} b\"; f(", "(", true),
        (
            Language::Php,
            "$s = \"{$a[\"k\"]} {$b[\"(\"]}\"; f(",
            "(",
            true,
        ),
        (Language::Php, "$o = `ls {$d[\"x\"]}`; f(", "(", true),
        (Language::Php, "$s = \"a { $x (\"; f(", "(", true),
        (Language::Php, "$s = '{$a[' . \"(\"; f(", "(", true),
        (Language::Php, "$s = \"\\{$x (\"; f(", "(", true),
        (Language::Php, "$s = \"{$a[\n  \"(\"\n]", "", true),
    ]);
}

/// Dart's raw strings, `r'..'`, `r"..'`, `r'''..'''`: no escapes and no holes, so `r'C:\'`
/// ends at its second quote and `r'${'` opens nothing. An `r` ending a name is no prefix.
/// Read before as strings with escapes, `r'\'` ran on past its end.
#[test]
fn dart_raw_strings_have_no_escapes_or_holes() {
    check_reads(&[
        (Language::Dart, "var p = r'C:\\'; f(", "(", true),
        (Language::Dart, "var p = r\"\\\"; f(", "(", true),
        (Language::Dart, "var s = r'${'; f(", "(", true),
        (
            Language::Dart,
            "var s = r'''\n\\''' + r\"\"\"\n\\\"\"\"; f(",
            "(",
            true,
        ),
        (
            Language::Dart,
            "var r = 1; var s = 'it\\'s ('; f(",
            "(",
            true,
        ),
        (Language::Dart, "var s = r'(", "", false),
    ]);
}

/// A shell `case` pattern's `)` (`start|stop)`) closes nothing: no `(` is open for it. Read as
/// a closer before, it closed the function's `{` around the `case` (and was an error): of 100
/// scripts in `/usr/bin`, 22 read without a stray closer, 90 now (of the machine's 42
/// Makefiles, 30 and 42; of 300 YAML files, 297 and 300). A `$(` across lines still closes at
/// its `)`.
#[test]
fn a_case_patterns_parenthesis_closes_nothing() {
    check_reads(&[
        (
            Language::Shell,
            "f() {\n  case $1 in\n    a|b) g(",
            "{(",
            true,
        ),
        (
            Language::Shell,
            "f() {\n  case $1 in\n    (a) g(",
            "{(",
            true,
        ),
        (
            Language::Shell,
            "f() {\n  x=$(\n    ls\n  ) ; g(",
            "{(",
            true,
        ),
    ]);
    for (language, text) in [
        (
            Language::Shell,
            "case $1 in\n  start) run ;;\n  *) usage ;;\nesac\n",
        ),
        // A Makefile's recipes are shell (CPython's `install` rules have such `case`s), and
        // so are a CI workflow's steps.
        (
            Language::Yaml,
            "run: |\n  case $OS in\n    linux) make ;;\n  esac\n",
        ),
        (
            Language::Make,
            "all:\n\tcase $(MODE) in \\\n\t\tupgrade) y=1 ;; \\\n\t\t*) y=0 ;; \\\n\tesac\n",
        ),
    ] {
        let mut scanner = Scanner::new(language);
        scanner.feed(text);
        assert_eq!(
            (scanner.open(), scanner.errors),
            (String::new(), 0),
            "{language:?}"
        );
    }
}

/// Perl's POD and its data after `__END__` are text a file may end in, not code; no other mode
/// is (`LexMode::in_perl_text`, what the survival example's `--ends` accepts besides code).
#[test]
fn perl_pod_and_data_are_text_after_code() {
    let after = |text: &str| LexMode::default().after(Language::Perl, text);
    assert!(after("sub f { 1 }\n=head1 NAME\n\nf\n").in_perl_text());
    assert!(after("sub f { 1 }\n__END__\nsome data (\n").in_perl_text());
    assert!(!after("sub f { 1 }\n").in_perl_text());
    assert!(!after("my $s = 'it (\n").in_perl_text());
}
