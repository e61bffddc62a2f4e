//! The languages the context layer reads, one row of [`ROWS`] each: the LSP ids and file
//! extensions that name it, how it writes comments and strings (a [`Lexis`], shared by a
//! family), and what ends a line that opens a body. Adding a language is a variant and a row.
//!
//! Only Rust is parsed (tree-sitter); every other language is lexed by its row's rules, which is
//! what post-processing needs (brackets, strings, comments), and cut at lines. Text in a
//! language with no row is [`Language::Plain`]: lexed with Rust's rules, but never trusted to
//! say whether a line starts inside a string (see [`crate::Plan::line_start_mode`]).

use std::path::Path;
use std::sync::OnceLock;

use crate::brackets::{Heredocs, Interpolation, Lexis, Regexes};

/// Languages whose comments and strings the layer knows; anything else is plain text (line
/// heuristics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    Rust,
    Python,
    Plain,
    C,
    Cpp,
    CSharp,
    Java,
    Kotlin,
    Swift,
    Dart,
    Go,
    JavaScript,
    TypeScript,
    Php,
    Shell,
    Ruby,
    Perl,
    R,
    Lua,
    Sql,
    Haskell,
    Yaml,
    Toml,
    Make,
}

/// What the layer knows of one language.
struct Row {
    language: Language,
    /// The LSP `languageId`s that name it, the usual one first (VS Code's ids, then other
    /// editors' names: Neovim sends its filetype).
    lsp_ids: &'static [&'static str],
    /// File extensions, as written (case counts, as in `.R`).
    extensions: &'static [&'static str],
    lexis: Lexis,
    /// What the last character of a line that opens a body is (`{`, Python's `:`): a blank
    /// line under one with nothing indented below gets a block-sized canvas.
    block_openers: &'static [char],
}

/// `//` and `/* */` comments that do not nest, `"` and `'` strings with backslash escapes that
/// end at their line (a C or Java char literal reads as a one-character string).
const C_LIKE: Lexis = Lexis {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    escaped_quotes: b"\"'",
    one_line_quotes: b"\"'",
    ..Lexis::NONE
};

/// C-like, with `"""` text blocks (Java, C#, Kotlin, Swift).
const TEXT_BLOCKS: Lexis = Lexis {
    triple_quotes: b"\"",
    ..C_LIKE
};

/// C-like, with template literals (backticks, across lines, code in their `${..}`) and regular
/// expressions (JavaScript, TypeScript).
const SCRIPT: Lexis = Lexis {
    escaped_quotes: b"\"'`",
    interpolation: Some(Interpolation::JavaScript),
    regexes: Some(Regexes::JavaScript),
    ..C_LIKE
};

/// `#` line comments, `"` and `'` strings with escapes that may span lines.
const HASH: Lexis = Lexis {
    line_comments: &["#"],
    escaped_quotes: b"\"'",
    ..Lexis::NONE
};

/// The first rows are the languages of old, in their order; the rest by family.
const ROWS: &[Row] = &[
    Row {
        language: Language::Rust,
        lsp_ids: &["rust"],
        extensions: &["rs"],
        lexis: Lexis::RUST,
        block_openers: &['{', ':'],
    },
    Row {
        language: Language::Python,
        lsp_ids: &["python"],
        extensions: &["py", "pyi"],
        lexis: Lexis {
            triple_quotes: b"\"'",
            one_line_quotes: b"\"'",
            ..HASH
        },
        block_openers: &[':'],
    },
    Row {
        language: Language::Plain,
        lsp_ids: &["plaintext"],
        extensions: &[],
        lexis: Lexis::RUST,
        block_openers: &['{', ':'],
    },
    Row {
        language: Language::C,
        lsp_ids: &["c"],
        extensions: &["c", "h"],
        lexis: C_LIKE,
        block_openers: &['{'],
    },
    Row {
        language: Language::Cpp,
        lsp_ids: &["cpp", "cuda-cpp", "cuda"],
        extensions: &[
            "cc", "cpp", "cxx", "c++", "hh", "hpp", "hxx", "h++", "ipp", "tcc", "inl", "cu", "cuh",
        ],
        lexis: Lexis {
            cpp_raw_strings: true,
            ..C_LIKE
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::CSharp,
        lsp_ids: &["csharp", "cs"],
        extensions: &["cs", "csx"],
        // `@"` and `$@"` strings span lines, `""""` raw strings close at as many quotes, and
        // `$"{f("x")}"` holds code.
        lexis: Lexis {
            at_verbatim: true,
            raw_quote_runs: true,
            interpolation: Some(Interpolation::CSharp),
            ..TEXT_BLOCKS
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::Java,
        lsp_ids: &["java"],
        extensions: &["java"],
        lexis: TEXT_BLOCKS,
        block_openers: &['{'],
    },
    Row {
        language: Language::Kotlin,
        lsp_ids: &["kotlin"],
        extensions: &["kt", "kts"],
        lexis: Lexis {
            comments_nest: true,
            interpolation: Some(Interpolation::Kotlin),
            ..TEXT_BLOCKS
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::Swift,
        lsp_ids: &["swift"],
        extensions: &["swift"],
        lexis: Lexis {
            comments_nest: true,
            interpolation: Some(Interpolation::Swift),
            ..TEXT_BLOCKS
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::Dart,
        lsp_ids: &["dart"],
        extensions: &["dart"],
        lexis: Lexis {
            comments_nest: true,
            triple_quotes: b"\"'",
            interpolation: Some(Interpolation::Dart),
            raw_prefix: true,
            ..C_LIKE
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::Go,
        lsp_ids: &["go"],
        extensions: &["go"],
        lexis: Lexis {
            verbatim_quotes: b"`",
            ..C_LIKE
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::JavaScript,
        lsp_ids: &["javascript", "javascriptreact", "jsx"],
        extensions: &["js", "mjs", "cjs", "jsx"],
        lexis: SCRIPT,
        block_openers: &['{'],
    },
    Row {
        language: Language::TypeScript,
        lsp_ids: &["typescript", "typescriptreact", "tsx"],
        extensions: &["ts", "mts", "cts", "tsx"],
        lexis: SCRIPT,
        block_openers: &['{'],
    },
    Row {
        language: Language::Php,
        lsp_ids: &["php"],
        extensions: &["php"],
        lexis: Lexis {
            line_comments: &["//", "#"],
            hash_attributes: true,
            block_comment: Some(("/*", "*/")),
            escaped_quotes: b"\"'`",
            heredocs: Some(Heredocs::Php),
            interpolation: Some(Interpolation::Php),
            ..Lexis::NONE
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::Shell,
        lsp_ids: &["shellscript", "sh", "bash", "zsh"],
        extensions: &["sh", "bash", "zsh", "ksh"],
        // `$#` and `${#x}` are no comments; `'...'` holds backslashes as they are.
        lexis: Lexis {
            comment_after_blank: true,
            escaped_quotes: b"\"`",
            verbatim_quotes: b"'",
            heredocs: Some(Heredocs::Shell),
            lone_parens: true,
            interpolation: Some(Interpolation::Shell),
            ..HASH
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::Ruby,
        lsp_ids: &["ruby"],
        extensions: &["rb", "rake", "gemspec", "ru"],
        lexis: Lexis {
            escaped_quotes: b"\"'`",
            heredocs: Some(Heredocs::Ruby),
            percent_literals: true,
            char_literals: true,
            dollar_quotes: true,
            interpolation: Some(Interpolation::Ruby),
            regexes: Some(Regexes::Ruby),
            ..HASH
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::Perl,
        lsp_ids: &["perl"],
        extensions: &["pl", "pm"],
        // `$#array` is no comment; here-documents open much as Ruby's do (`<<"EOF";`,
        // `<<~EOF`); `q{..}`, `s/a/b/`, `split /,/` and POD hold text.
        lexis: Lexis {
            comment_after_blank: true,
            heredocs: Some(Heredocs::Perl),
            regexes: Some(Regexes::Perl),
            perl: true,
            dollar_quotes: true,
            ..HASH
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::R,
        lsp_ids: &["r"],
        extensions: &["r", "R"],
        lexis: Lexis {
            verbatim_quotes: b"`",
            ..HASH
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::Lua,
        lsp_ids: &["lua"],
        extensions: &["lua"],
        // Block comments are long brackets after `--` (`--[[`, `--[==[`), as strings are.
        lexis: Lexis {
            line_comments: &["--"],
            block_comment: None,
            long_brackets: true,
            ..C_LIKE
        },
        block_openers: &['{'],
    },
    Row {
        language: Language::Sql,
        lsp_ids: &["sql"],
        extensions: &["sql"],
        // A doubled quote inside a string reads as the string closed and a new one opened.
        lexis: Lexis {
            line_comments: &["--"],
            block_comment: Some(("/*", "*/")),
            verbatim_quotes: b"'\"`",
            ..Lexis::NONE
        },
        block_openers: &[],
    },
    Row {
        language: Language::Haskell,
        lsp_ids: &["haskell"],
        extensions: &["hs"],
        // `foldl'` is a name, not a char literal.
        lexis: Lexis {
            line_comments: &["--"],
            block_comment: Some(("{-", "-}")),
            comments_nest: true,
            quotes_start_tokens: true,
            ..C_LIKE
        },
        block_openers: &[],
    },
    Row {
        language: Language::Yaml,
        lsp_ids: &["yaml"],
        extensions: &["yaml", "yml"],
        // A quote opens a string only where a scalar starts (`it's` is plain text).
        lexis: Lexis {
            comment_after_blank: true,
            quotes_start_tokens: true,
            escaped_quotes: b"\"",
            verbatim_quotes: b"'",
            lone_parens: true,
            ..HASH
        },
        block_openers: &[':'],
    },
    Row {
        language: Language::Toml,
        lsp_ids: &["toml"],
        extensions: &["toml"],
        lexis: Lexis {
            escaped_quotes: b"\"",
            verbatim_quotes: b"'",
            one_line_quotes: b"\"'",
            triple_quotes: b"\"'",
            ..HASH
        },
        block_openers: &[],
    },
    Row {
        language: Language::Make,
        lsp_ids: &["makefile", "make"],
        extensions: &["mk", "mak"],
        // Quotes are the recipes' shell's business: an apostrophe in an `echo` opens nothing.
        // A recipe's `case` patterns close nothing, as in shell.
        lexis: Lexis {
            escaped_quotes: b"",
            lone_parens: true,
            ..HASH
        },
        block_openers: &[],
    },
];

impl Language {
    /// The language of text whose name or id says none (no file name, a name without an
    /// extension, a request without a language): Rust, what the default model was trained on.
    /// The HTTP and command-line doors both read such text so.
    pub const UNSAID: Language = Language::Rust;

    /// Every language, [`Language::Plain`] included, in a fixed order.
    pub fn all() -> impl Iterator<Item = Language> {
        ROWS.iter().map(|row| row.language)
    }

    fn row(self) -> &'static Row {
        ROWS.iter()
            .find(|row| row.language == self)
            .expect("every language has a row")
    }

    /// From a file name: its extension's language ([`Language::from_path`]), or
    /// [`Language::UNSAID`] for a name without one.
    pub fn from_file_name(path: &Path) -> Language {
        match path.extension() {
            None => Language::UNSAID,
            Some(_) => Language::from_path(path),
        }
    }

    /// The name of this language as an LSP `languageId` (`plaintext` for plain text).
    pub fn lsp_id(self) -> &'static str {
        self.row().lsp_ids[0]
    }

    /// Every LSP `languageId` read as this language, [`Language::lsp_id`] first.
    pub fn lsp_ids(self) -> &'static [&'static str] {
        self.row().lsp_ids
    }

    /// The file extensions read as this language (none for plain text).
    pub fn extensions(self) -> &'static [&'static str] {
        self.row().extensions
    }

    /// From an LSP `languageId`; plain text for an id no row names.
    pub fn from_lsp_id(id: &str) -> Language {
        ROWS.iter()
            .find(|row| row.lsp_ids.contains(&id))
            .map_or(Language::Plain, |row| row.language)
    }

    /// From a file name's extension; plain text for one no row names.
    pub fn from_path(path: &Path) -> Language {
        let Some(extension) = path.extension().and_then(|ext| ext.to_str()) else {
            return Language::Plain;
        };
        ROWS.iter()
            .find(|row| row.extensions.contains(&extension))
            .map_or(Language::Plain, |row| row.language)
    }

    /// How a line comment starts, for the headers of neighbour snippets.
    pub fn line_comment(self) -> &'static str {
        self.lexis().line_comments[0]
    }

    pub(crate) fn lexis(self) -> &'static Lexis {
        &self.row().lexis
    }

    /// Which bytes start a token of this language's lexis ([`Lexis::starts_token`]), as a
    /// table built once.
    pub(crate) fn token_starts(self) -> &'static [bool; 256] {
        static TABLES: OnceLock<Vec<[bool; 256]>> = OnceLock::new();
        let tables = TABLES.get_or_init(|| {
            ROWS.iter()
                .map(|row| std::array::from_fn(|b| row.lexis.starts_token(b as u8)))
                .collect()
        });
        let at = ROWS
            .iter()
            .position(|row| row.language == self)
            .expect("every language has a row");
        &tables[at]
    }

    /// Whether `opener`, ending a line, opens a body.
    pub(crate) fn opens_body(self, opener: char) -> bool {
        self.row().block_openers.contains(&opener)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_extensions_name_one_language_each() {
        let mut ids = std::collections::HashSet::new();
        let mut extensions = std::collections::HashSet::new();
        for language in Language::all() {
            assert_eq!(Language::from_lsp_id(language.lsp_id()), language);
            for id in language.lsp_ids() {
                assert!(ids.insert(id), "`{id}` names two languages");
            }
            for extension in language.extensions() {
                assert!(extensions.insert(extension), "`.{extension}` names two");
                let path = format!("file.{extension}");
                assert_eq!(Language::from_path(Path::new(&path)), language);
            }
            assert!(!language.line_comment().is_empty());
        }
        assert_eq!(Language::all().count(), ROWS.len());
    }
}
