//! FIM prompt templates, both ways, in one table: [`Template::prompt`] writes the prompt an
//! autoregressive FIM server expects (the remote backends, `redraft_runtime::backend`), [`split`] reads
//! one back into prefix and suffix (`redraft serve`). Clients written for autoregressive FIM
//! models send the prefix and the suffix already wrapped in the model family's FIM tokens (Zed's
//! OpenAI-compatible and Ollama providers always do, and send no `suffix` field: Zed's
//! `crates/edit_prediction/src/{open_ai_compatible,ollama,fim}.rs`). A masked-diffusion model
//! needs neither the tokens nor their order, only the two texts, so the server splits the prompt
//! back, whatever the served model's own tokens are.
//!
//! Recognised (the templates of Zed's `fim.rs`, Continue's and the models' own cards):
//! - Qwen / CodeGemma: `<|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>`, with Qwen's repo-level
//!   header `<|repo_name|>repo\n<|file_sep|>path\ncode...` before it;
//! - StarCoder: `<fim_prefix>P<fim_suffix>S<fim_middle>`, with StarCoder 2's
//!   `<repo_name>`/`<file_sep>` or StarCoder 1's `<reponame>`/`<filename>` header;
//! - CodeLlama: `<PRE> P <SUF>S <MID>` (the spaces are the template's, not the code's);
//! - DeepSeek: `<｜fim▁begin｜>P<｜fim▁hole｜>S<｜fim▁end｜>` (also with ASCII `|`);
//! - Codestral: `[SUFFIX]S[PREFIX]P` (suffix first);
//! - GLM: `<|code_prefix|>P<|code_suffix|>S<|code_middle|>`.
//!
//! The suffix-first (SPM) order of the token templates is read too. Text after the middle token
//! is the start of the middle the client wants continued, so it joins the prefix.

use std::fmt;
use std::str::FromStr;

use crate::markers;

/// The prompt layout a served model was trained to fill the middle in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Template {
    /// Qwen2.5-Coder, CodeGemma: `<|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>`.
    Qwen,
    /// StarCoder 1/2, SantaCoder: `<fim_prefix>P<fim_suffix>S<fim_middle>`.
    StarCoder,
    /// Code Llama: `<PRE> P <SUF>S <MID>`.
    CodeLlama,
    /// DeepSeek-Coder: `<｜fim▁begin｜>P<｜fim▁hole｜>S<｜fim▁end｜>`.
    DeepSeek,
    /// Codestral: `[SUFFIX]S[PREFIX]P`.
    Codestral,
    /// GLM / CodeGeeX: `<|code_prefix|>P<|code_suffix|>S<|code_middle|>`.
    Glm,
    /// No template: `prompt` is the prefix and the request's `suffix` field the suffix, for
    /// servers that apply the model's template themselves (`redraft serve`, Ollama, OpenAI).
    Suffix,
}

impl Template {
    pub const ALL: [Template; 7] = [
        Template::Qwen,
        Template::StarCoder,
        Template::CodeLlama,
        Template::DeepSeek,
        Template::Codestral,
        Template::Glm,
        Template::Suffix,
    ];

    /// The name settings and flags use.
    pub fn name(self) -> &'static str {
        match self {
            Template::Qwen => "qwen",
            Template::StarCoder => "starcoder",
            Template::CodeLlama => "codellama",
            Template::DeepSeek => "deepseek",
            Template::Codestral => "codestral",
            Template::Glm => "glm",
            Template::Suffix => "suffix",
        }
    }

    /// The `prompt` field for a prefix and a suffix. A template of three tokens is written
    /// from `TOKEN_TEMPLATES`, the table [`split`] reads it back with (its first entry for the
    /// template: DeepSeek's own full-width bars).
    pub fn prompt(self, prefix: &str, suffix: &str) -> String {
        if let Some(t) = TOKEN_TEMPLATES.iter().find(|t| t.template == self) {
            return format!("{}{prefix}{}{suffix}{}", t.prefix, t.suffix, t.middle);
        }
        match self {
            Template::CodeLlama => format!("<PRE> {prefix} <SUF>{suffix} <MID>"),
            Template::Codestral => format!("[SUFFIX]{suffix}[PREFIX]{prefix}"),
            Template::Suffix => prefix.to_string(),
            Template::Qwen | Template::StarCoder | Template::DeepSeek | Template::Glm => {
                unreachable!("a token template is in TOKEN_TEMPLATES")
            }
        }
    }

    /// The template's own tokens and its model family's end tokens: a server that does not
    /// stop at them by itself (or prints special tokens as text) is told to, and a middle is
    /// cut at the first one the answer still holds.
    pub fn stops(self) -> &'static [&'static str] {
        match self {
            Template::Qwen => &[
                "<|endoftext|>",
                markers::FIM_PREFIX,
                markers::FIM_SUFFIX,
                markers::FIM_MIDDLE,
                markers::FIM_PAD,
                "<|repo_name|>",
                markers::FILE_SEP,
                "<|im_start|>",
                "<|im_end|>",
            ],
            Template::StarCoder => &[
                "<|endoftext|>",
                "<fim_prefix>",
                "<fim_suffix>",
                "<fim_middle>",
                "<fim_pad>",
                "<repo_name>",
                "<file_sep>",
            ],
            Template::CodeLlama => &["<EOT>", "<PRE>", "<SUF>", "<MID>"],
            Template::DeepSeek => &[
                "<｜fim▁begin｜>",
                "<｜fim▁hole｜>",
                "<｜fim▁end｜>",
                "<｜end▁of▁sentence｜>",
                "<|EOT|>",
            ],
            Template::Codestral => &["[PREFIX]", "[SUFFIX]", "</s>"],
            Template::Glm => &[
                "<|code_prefix|>",
                "<|code_suffix|>",
                "<|code_middle|>",
                "<|endoftext|>",
            ],
            Template::Suffix => &[],
        }
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Template {
    type Err = String;

    /// The names of [`Template::name`], plus Zed's `prompt_format` spellings and the model
    /// names people reach for.
    fn from_str(s: &str) -> Result<Template, String> {
        Ok(match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "qwen" | "codegemma" => Template::Qwen,
            "starcoder" | "star_coder" | "santacoder" => Template::StarCoder,
            "codellama" | "code_llama" => Template::CodeLlama,
            "deepseek" | "deepseek_coder" => Template::DeepSeek,
            "codestral" | "mistral" => Template::Codestral,
            "glm" | "codegeex" => Template::Glm,
            "suffix" | "none" => Template::Suffix,
            _ => {
                let names: Vec<&str> = Template::ALL.iter().map(|t| t.name()).collect();
                return Err(format!(
                    "unknown FIM template `{s}` (one of: {})",
                    names.join(", ")
                ));
            }
        })
    }
}

/// A prompt split back into what the template wrapped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Split {
    pub prefix: String,
    pub suffix: String,
    /// The current file's name, when the header names it.
    pub path: Option<String>,
    /// Other files a repo-level header carries, in order: (path, text).
    pub files: Vec<(String, String)>,
}

/// Three tokens around prefix and suffix, with the header tokens of the family.
struct Tokens {
    template: Template,
    prefix: &'static str,
    suffix: &'static str,
    middle: &'static str,
    repo: &'static [&'static str],
    file: &'static [&'static str],
}

const TOKEN_TEMPLATES: &[Tokens] = &[
    Tokens {
        template: Template::Qwen,
        prefix: markers::FIM_PREFIX,
        suffix: markers::FIM_SUFFIX,
        middle: markers::FIM_MIDDLE,
        repo: &["<|repo_name|>"],
        file: &[markers::FILE_SEP],
    },
    Tokens {
        template: Template::StarCoder,
        prefix: "<fim_prefix>",
        suffix: "<fim_suffix>",
        middle: "<fim_middle>",
        repo: &["<repo_name>", "<reponame>"],
        file: &["<file_sep>", "<filename>"],
    },
    Tokens {
        template: Template::Glm,
        prefix: "<|code_prefix|>",
        suffix: "<|code_suffix|>",
        middle: "<|code_middle|>",
        repo: &[],
        file: &[],
    },
    Tokens {
        template: Template::DeepSeek,
        prefix: "<｜fim▁begin｜>",
        suffix: "<｜fim▁hole｜>",
        middle: "<｜fim▁end｜>",
        repo: &[],
        file: &[],
    },
    Tokens {
        template: Template::DeepSeek,
        prefix: "<|fim▁begin|>",
        suffix: "<|fim▁hole|>",
        middle: "<|fim▁end|>",
        repo: &[],
        file: &[],
    },
];

/// Start-of-text tokens some clients put first; they carry nothing.
const BOS: &[&str] = &["<s>", "<|endoftext|>", "<｜begin▁of▁sentence｜>", "<bos>"];

/// The template `prompt` is wrapped in and what it wrapped; `None` when it carries none (the
/// prompt is then the prefix itself).
pub fn split(prompt: &str) -> Option<(Template, Split)> {
    for tokens in TOKEN_TEMPLATES {
        if let Some(split) = split_tokens(prompt, tokens) {
            return Some((tokens.template, split));
        }
    }
    if let Some(split) = split_code_llama(prompt) {
        return Some((Template::CodeLlama, split));
    }
    split_codestral(prompt).map(|split| (Template::Codestral, split))
}

fn split_tokens(prompt: &str, t: &Tokens) -> Option<Split> {
    let p = prompt.find(t.prefix)?;
    let s = prompt.find(t.suffix)?;
    let after = |at: usize, token: &str| at + token.len();
    let (prefix, suffix, rest) = if p < s {
        // PSM: P S M.
        let m = prompt[s..].find(t.middle).map(|i| s + i);
        let suffix_end = m.unwrap_or(prompt.len());
        let tail = m.map_or("", |m| &prompt[after(m, t.middle)..]);
        (
            format!("{}{}", &prompt[after(p, t.prefix)..s], tail),
            prompt[after(s, t.suffix)..suffix_end].to_string(),
            &prompt[..p],
        )
    } else {
        // SPM: S P M.
        let m = prompt[p..].find(t.middle).map(|i| p + i);
        let prefix_end = m.unwrap_or(prompt.len());
        let tail = m.map_or("", |m| &prompt[after(m, t.middle)..]);
        (
            format!("{}{}", &prompt[after(p, t.prefix)..prefix_end], tail),
            prompt[after(s, t.suffix)..p].to_string(),
            &prompt[..s],
        )
    };
    let mut split = Split {
        prefix,
        suffix,
        ..Split::default()
    };
    read_header(rest, t, &mut split);
    Some(split)
}

/// The text before the first FIM token: a repo name, other files, the current file's name.
/// Whatever follows the current file's name line is the start of its prefix.
fn read_header(header: &str, t: &Tokens, split: &mut Split) {
    let mut header = header.trim_start();
    while let Some(rest) = BOS.iter().find_map(|bos| header.strip_prefix(bos)) {
        header = rest.trim_start();
    }
    let mut pieces = split_on_any(header, t.file).into_iter();
    let lead = pieces.next().unwrap_or("");
    // The repo line carries nothing the canvas needs; anything else before the first file is
    // code.
    let lead = match t.repo.iter().find_map(|repo| lead.strip_prefix(repo)) {
        Some(_) => "",
        None => lead,
    };
    let files: Vec<(String, String)> = pieces
        .map(|piece| {
            let (path, text) = piece.split_once('\n').unwrap_or((piece, ""));
            (path.trim().to_string(), text.to_string())
        })
        .collect();
    let mut files = files.into_iter().collect::<Vec<_>>();
    if let Some((path, text)) = files.pop() {
        split.path = (!path.is_empty()).then_some(path);
        split.prefix.insert_str(0, &text);
    }
    split.prefix.insert_str(0, lead);
    split.files = files;
}

/// `text` cut before every occurrence of any of `separators` (the separators dropped).
fn split_on_any<'a>(text: &'a str, separators: &[&str]) -> Vec<&'a str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while at < text.len() {
        match separators.iter().find(|sep| text[at..].starts_with(**sep)) {
            Some(sep) => {
                pieces.push(&text[start..at]);
                at += sep.len();
                start = at;
            }
            None => at += text[at..].chars().next().map_or(1, char::len_utf8),
        }
    }
    pieces.push(&text[start..]);
    pieces
}

/// `<PRE> {prefix} <SUF>{suffix} <MID>`: the space after `<PRE>` and those before `<SUF>` and
/// `<MID>` belong to the template.
fn split_code_llama(prompt: &str) -> Option<Split> {
    let p = prompt.find("<PRE>")?;
    let s = p + prompt[p..].find("<SUF>")?;
    let m = prompt[s..].find("<MID>").map(|i| s + i);
    let prefix = &prompt[p + "<PRE>".len()..s];
    let prefix = prefix.strip_prefix(' ').unwrap_or(prefix);
    let prefix = prefix.strip_suffix(' ').unwrap_or(prefix);
    let suffix = &prompt[s + "<SUF>".len()..m.unwrap_or(prompt.len())];
    let suffix = suffix.strip_suffix(' ').unwrap_or(suffix);
    let tail = m.map_or("", |m| &prompt[m + "<MID>".len()..]);
    let tail = tail.strip_prefix(' ').unwrap_or(tail);
    Some(Split {
        prefix: format!("{}{prefix}{tail}", lead_code(&prompt[..p])),
        suffix: suffix.to_string(),
        ..Split::default()
    })
}

/// `[SUFFIX]{suffix}[PREFIX]{prefix}`: the middle follows the prefix directly.
fn split_codestral(prompt: &str) -> Option<Split> {
    let s = prompt.find("[SUFFIX]")?;
    let p = prompt.find("[PREFIX]")?;
    let (prefix, suffix, lead) = if s < p {
        (
            &prompt[p + "[PREFIX]".len()..],
            &prompt[s + "[SUFFIX]".len()..p],
            &prompt[..s],
        )
    } else {
        (
            &prompt[p + "[PREFIX]".len()..s],
            &prompt[s + "[SUFFIX]".len()..],
            &prompt[..p],
        )
    };
    Some(Split {
        prefix: format!("{}{prefix}", lead_code(lead)),
        suffix: suffix.to_string(),
        ..Split::default()
    })
}

/// Text before a template's first token, start-of-text tokens dropped.
fn lead_code(mut lead: &str) -> &str {
    while let Some(rest) = BOS
        .iter()
        .find_map(|bos| lead.trim_start().strip_prefix(bos))
    {
        lead = rest;
    }
    if lead.trim().is_empty() {
        ""
    } else {
        lead
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "fn add(a: u32, b: u32) -> u32 {\n    ";
    const S: &str = "\n}\n";

    #[track_caller]
    fn check(prompt: &str, template: Template, prefix: &str, suffix: &str) -> Split {
        let (found, split) = split(prompt).unwrap_or_else(|| panic!("no template in {prompt:?}"));
        assert_eq!(found, template);
        assert_eq!(split.prefix, prefix, "prefix of {prompt:?}");
        assert_eq!(split.suffix, suffix, "suffix of {prompt:?}");
        split
    }

    #[test]
    fn qwen_and_codegemma() {
        let split = check(
            &format!("<|fim_prefix|>{P}<|fim_suffix|>{S}<|fim_middle|>"),
            Template::Qwen,
            P,
            S,
        );
        assert_eq!((split.path, split.files.len()), (None, 0));
        // Suffix first, and a middle the client started.
        check(
            &format!("<|fim_suffix|>{S}<|fim_prefix|>{P}<|fim_middle|>a"),
            Template::Qwen,
            &format!("{P}a"),
            S,
        );
    }

    #[test]
    fn qwen_repo_level_header_names_the_file_and_the_others() {
        let prompt = format!(
            "<|repo_name|>redraft\n<|file_sep|>src/util.rs\npub fn one() -> u32 {{ 1 }}\n<|file_sep|>src/main.rs\n<|fim_prefix|>{P}<|fim_suffix|>{S}<|fim_middle|>"
        );
        let split = check(&prompt, Template::Qwen, P, S);
        assert_eq!(split.path.as_deref(), Some("src/main.rs"));
        assert_eq!(
            split.files,
            vec![(
                "src/util.rs".to_string(),
                "pub fn one() -> u32 { 1 }\n".to_string()
            )]
        );
    }

    #[test]
    fn starcoder_with_both_header_styles() {
        check(
            &format!("<fim_prefix>{P}<fim_suffix>{S}<fim_middle>"),
            Template::StarCoder,
            P,
            S,
        );
        let split = check(
            &format!("<repo_name>r<file_sep>lib.rs\n<fim_prefix>{P}<fim_suffix>{S}<fim_middle>"),
            Template::StarCoder,
            P,
            S,
        );
        assert_eq!(split.path.as_deref(), Some("lib.rs"));
        let split = check(
            &format!("<reponame>r<filename>src/lib.py\n<fim_prefix>{P}<fim_suffix>{S}<fim_middle>"),
            Template::StarCoder,
            P,
            S,
        );
        assert_eq!(split.path.as_deref(), Some("src/lib.py"));
    }

    #[test]
    fn code_llama_spaces_belong_to_the_template() {
        check(
            &format!("<PRE> {P} <SUF>{S} <MID>"),
            Template::CodeLlama,
            P,
            S,
        );
        check(
            &format!("<s><PRE> {P} <SUF>{S} <MID>"),
            Template::CodeLlama,
            P,
            S,
        );
    }

    #[test]
    fn deepseek_both_pipes() {
        check(
            &format!("<｜fim▁begin｜>{P}<｜fim▁hole｜>{S}<｜fim▁end｜>"),
            Template::DeepSeek,
            P,
            S,
        );
        check(
            &format!("<|fim▁begin|>{P}<|fim▁hole|>{S}<|fim▁end|>"),
            Template::DeepSeek,
            P,
            S,
        );
    }

    #[test]
    fn codestral_is_suffix_first() {
        check(
            &format!("[SUFFIX]{S}[PREFIX]{P}"),
            Template::Codestral,
            P,
            S,
        );
        check(
            &format!("<s>[SUFFIX]{S}[PREFIX]{P}"),
            Template::Codestral,
            P,
            S,
        );
    }

    #[test]
    fn glm() {
        check(
            &format!("<|code_prefix|>{P}<|code_suffix|>{S}<|code_middle|>"),
            Template::Glm,
            P,
            S,
        );
    }

    #[test]
    fn plain_prompts_and_lone_tokens_are_no_template() {
        assert_eq!(split(P), None);
        assert_eq!(split("let html = \"<PRE>\";"), None);
        assert_eq!(split("v[SUFFIX] = 1;"), None);
        assert_eq!(split("<|fim_prefix|> without the suffix token"), None);
    }

    #[test]
    fn empty_parts_and_multibyte_text() {
        check(
            "<|fim_prefix|><|fim_suffix|><|fim_middle|>",
            Template::Qwen,
            "",
            "",
        );
        check(
            "<|fim_prefix|>let é = \"🦀\";<|fim_suffix|>ü<|fim_middle|>",
            Template::Qwen,
            "let é = \"🦀\";",
            "ü",
        );
    }

    /// What the backends write, the server reads back: every token template round-trips.
    #[test]
    fn every_template_written_is_read_back() {
        for template in Template::ALL {
            if template == Template::Suffix {
                assert_eq!(split(&template.prompt(P, S)), None);
                continue;
            }
            check(&template.prompt(P, S), template, P, S);
        }
    }
}
