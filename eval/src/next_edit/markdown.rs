//! The part of Markdown that Zed's next-edit cases use, read into the blocks Zed's parser
//! (`ExampleSpec::from_markdown`, over pulldown-cmark) acts on: TOML front matter between `+++`
//! lines, ATX headings, paragraphs and fenced code blocks. Lists, quotes and inline markup are
//! read as paragraph text; that is all a case file's prose is to the parser.

/// One block of a Markdown document, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// `#`..`######` and the heading's text.
    Heading { level: usize, text: String },
    /// A paragraph's lines, trimmed and joined with no separator (the text events
    /// pulldown-cmark gives for it; line breaks are separate events).
    Paragraph(String),
    /// A fenced code block: its info string (trimmed) and its lines, each ending in `\n`.
    Code { info: String, text: String },
}

/// The front matter, when the document starts with `+++` on its own line, and the rest of
/// the document with leading whitespace removed (as Zed splits it: the front matter ends at
/// the first `+++` followed by a line break).
pub fn split_front_matter(input: &str) -> (Option<&str>, &str) {
    if let Some(rest) = input.strip_prefix("+++\n") {
        if let Some((front, rest)) = rest.split_once("+++\n") {
            return (Some(front), rest.trim_start());
        }
    }
    (None, input)
}

/// The blocks of `input` (front matter already removed).
pub fn blocks(input: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut paragraph: Vec<&str> = Vec::new();
    let flush = |paragraph: &mut Vec<&str>, blocks: &mut Vec<Block>| {
        if !paragraph.is_empty() {
            blocks.push(Block::Paragraph(
                paragraph.iter().map(|line| line.trim()).collect(),
            ));
            paragraph.clear();
        }
    };
    let mut lines = input.lines();
    while let Some(line) = lines.next() {
        if let Some(fence) = Fence::open(line) {
            flush(&mut paragraph, &mut blocks);
            let mut text = String::new();
            for line in lines.by_ref() {
                if fence.closes(line) {
                    break;
                }
                text.push_str(fence.strip_indent(line));
                text.push('\n');
            }
            blocks.push(Block::Code {
                info: fence.info.to_string(),
                text,
            });
        } else if let Some((level, text)) = heading(line) {
            flush(&mut paragraph, &mut blocks);
            blocks.push(Block::Heading {
                level,
                text: text.to_string(),
            });
        } else if line.trim().is_empty() {
            flush(&mut paragraph, &mut blocks);
        } else {
            paragraph.push(line);
        }
    }
    flush(&mut paragraph, &mut blocks);
    blocks
}

/// Up to three spaces of indentation, as CommonMark allows before a block marker.
fn indentation(line: &str) -> Option<(usize, &str)> {
    let rest = line.trim_start_matches(' ');
    let indent = line.len() - rest.len();
    (indent <= 3).then_some((indent, rest))
}

/// An ATX heading: `## Title ##` -> (2, "Title").
fn heading(line: &str) -> Option<(usize, &str)> {
    let (_, rest) = indentation(line)?;
    let level = rest.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let text = &rest[level..];
    if !(text.is_empty() || text.starts_with([' ', '\t'])) {
        return None;
    }
    let text = text.trim();
    // A closing run of `#` preceded by a space (or making up the whole text) is not content.
    let closed = text.trim_end_matches('#');
    let text = if closed.is_empty() || closed.ends_with([' ', '\t']) {
        closed.trim_end()
    } else {
        text
    };
    Some((level, text))
}

struct Fence<'a> {
    marker: u8,
    length: usize,
    indent: usize,
    info: &'a str,
}

impl<'a> Fence<'a> {
    /// A line opening a fenced code block: three or more backticks (with no backtick in the
    /// info string) or tildes.
    fn open(line: &'a str) -> Option<Fence<'a>> {
        let (indent, rest) = indentation(line)?;
        let marker = *rest.as_bytes().first()?;
        if marker != b'`' && marker != b'~' {
            return None;
        }
        let length = rest.bytes().take_while(|&b| b == marker).count();
        let info = rest[length..].trim();
        if length < 3 || (marker == b'`' && info.contains('`')) {
            return None;
        }
        Some(Fence {
            marker,
            length,
            indent,
            info,
        })
    }

    /// The same marker, at least as long, and nothing after it.
    fn closes(&self, line: &str) -> bool {
        let Some((_, rest)) = indentation(line) else {
            return false;
        };
        let length = rest.bytes().take_while(|&b| b == self.marker).count();
        length >= self.length && rest[length..].trim().is_empty()
    }

    /// Content lines lose up to the opening fence's indentation.
    fn strip_indent<'l>(&self, line: &'l str) -> &'l str {
        let spaces = line.bytes().take(self.indent).take_while(|&b| b == b' ');
        &line[spaces.count()..]
    }
}

/// A fence for `text`: three backticks, or one more than the longest run of backticks that
/// starts one of its lines (so a diff of a Markdown file stays one block).
pub fn fence_for(text: &str) -> String {
    let longest = text
        .lines()
        .map(|line| line.trim_start_matches(' '))
        .map(|line| line.bytes().take_while(|&b| b == b'`').count())
        .max()
        .unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// Front matter values: the subset of TOML the cases use (`key = "string"`, `'literal'`
/// strings and arrays of strings, `#` comments). `None` when something else is there; Zed
/// then ignores the whole front matter, and so does the caller.
pub fn front_matter(text: &str) -> Option<Vec<(String, TomlValue)>> {
    let mut values = Vec::new();
    let mut rest = text;
    loop {
        rest = skip_blank(rest);
        if rest.is_empty() {
            return Some(values);
        }
        let (key, after) = rest.split_once('=')?;
        let key = key.trim();
        let key = key
            .strip_prefix('"')
            .and_then(|k| k.strip_suffix('"'))
            .unwrap_or(key);
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return None;
        }
        let (value, after) = toml_value(after.trim_start_matches([' ', '\t']))?;
        // Only a comment may follow a value on its line.
        let after = after.trim_start_matches([' ', '\t']);
        let after = match after.strip_prefix('#') {
            Some(comment) => comment.split_once('\n').map_or("", |(_, next)| next),
            None if after.is_empty() => after,
            None => after.strip_prefix('\n')?,
        };
        values.push((key.to_string(), value));
        rest = after;
    }
}

/// A front matter value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TomlValue {
    String(String),
    Array(Vec<String>),
}

fn skip_blank(mut text: &str) -> &str {
    loop {
        text = text.trim_start();
        match text.strip_prefix('#') {
            Some(comment) => text = comment.split_once('\n').map_or("", |(_, next)| next),
            None => return text,
        }
    }
}

fn toml_value(text: &str) -> Option<(TomlValue, &str)> {
    if let Some(mut rest) = text.strip_prefix('[') {
        let mut items = Vec::new();
        loop {
            rest = skip_blank(rest);
            if let Some(after) = rest.strip_prefix(']') {
                return Some((TomlValue::Array(items), after));
            }
            let (item, after) = toml_string(rest)?;
            items.push(item);
            rest = skip_blank(after);
            rest = match rest.strip_prefix(',') {
                Some(after) => after,
                None if rest.starts_with(']') => rest,
                None => return None,
            };
        }
    }
    let (string, rest) = toml_string(text)?;
    Some((TomlValue::String(string), rest))
}

/// A basic (`"..."`, with escapes) or literal (`'...'`) one-line string.
fn toml_string(text: &str) -> Option<(String, &str)> {
    if let Some(rest) = text.strip_prefix('\'') {
        let end = rest.find(['\'', '\n'])?;
        return (rest.as_bytes()[end] == b'\'')
            .then(|| (rest[..end].to_string(), &rest[end + 1..]));
    }
    let rest = text.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = rest.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Some((out, &rest[at + 1..])),
            '\n' => return None,
            '\\' => {
                let (_, escape) = chars.next()?;
                match escape {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    'u' | 'U' => {
                        let digits = if escape == 'u' { 4 } else { 8 };
                        let hex: String = (0..digits)
                            .map(|_| chars.next().map(|(_, c)| c))
                            .collect::<Option<_>>()?;
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    _ => return None,
                }
            }
            c => out.push(c),
        }
    }
    None
}

/// `value` as a TOML basic string.
pub fn toml_quote(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_headings_paragraphs_and_fenced_code() {
        let doc = "Some prose\nover two lines.\n\n## Edit History\n\n```diff\n-a\n+b\n```\n\n\
                   // User accepted prediction:\n````x.rs\n```inner\n````\n# Title #\n";
        assert_eq!(
            blocks(doc),
            [
                Block::Paragraph("Some proseover two lines.".into()),
                Block::Heading {
                    level: 2,
                    text: "Edit History".into()
                },
                Block::Code {
                    info: "diff".into(),
                    text: "-a\n+b\n".into()
                },
                Block::Paragraph("// User accepted prediction:".into()),
                Block::Code {
                    info: "x.rs".into(),
                    text: "```inner\n".into()
                },
                Block::Heading {
                    level: 1,
                    text: "Title".into()
                },
            ]
        );
    }

    #[test]
    fn an_unclosed_fence_runs_to_the_end_and_hash_lines_inside_are_code() {
        assert_eq!(
            blocks("```py\n# ^[CURSOR_POSITION]\n#[derive(Debug)]"),
            [Block::Code {
                info: "py".into(),
                text: "# ^[CURSOR_POSITION]\n#[derive(Debug)]\n".into()
            }]
        );
        // `#[derive]` outside a block is not a heading either (no space after the hashes).
        assert_eq!(
            blocks("#[derive(Debug)]"),
            [Block::Paragraph("#[derive(Debug)]".into())]
        );
    }

    #[test]
    fn front_matter_is_split_as_zed_splits_it() {
        let (front, rest) = split_front_matter("+++\nrevision = \"abc\"\n+++\n\n\n## X\n");
        assert_eq!(front, Some("revision = \"abc\"\n"));
        assert_eq!(rest, "## X\n");
        assert_eq!(split_front_matter("## X\n"), (None, "## X\n"));
    }

    #[test]
    fn front_matter_values_round_trip_through_quoting() {
        let text = format!(
            "# a comment\nrepository_url = {}\nrevision = 'lit\\eral' # why\ntags = [\n  \"a\",\n  \"b\\u00e9\", # c\n]\n",
            toml_quote("git@github.com:x/\"y\"\n")
        );
        assert_eq!(
            front_matter(&text).unwrap(),
            [
                (
                    "repository_url".to_string(),
                    TomlValue::String("git@github.com:x/\"y\"\n".into())
                ),
                (
                    "revision".to_string(),
                    TomlValue::String("lit\\eral".into())
                ),
                (
                    "tags".to_string(),
                    TomlValue::Array(vec!["a".into(), "bé".into()])
                ),
            ]
        );
        assert_eq!(front_matter("x = 3\n"), None);
        assert_eq!(front_matter("x = \"unterminated\n"), None);
    }

    #[test]
    fn fences_outgrow_backtick_runs_in_the_text() {
        assert_eq!(fence_for("-a\n+b\n"), "```");
        // A context line can close a block; an added one (`+` first) cannot.
        assert_eq!(fence_for(" ```rust\n+`````\n"), "````");
    }
}
