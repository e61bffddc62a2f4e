//! Model names as users write them: a path, `hf:ORG/REPO[...]` or `ollama:NAME[:TAG]`.

use std::fmt;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// The revision used when a `hf:` name has no `@REVISION`.
pub const DEFAULT_REVISION: &str = "main";
/// The tag used when an `ollama:` name has none.
pub const DEFAULT_OLLAMA_TAG: &str = "latest";
/// The registry Ollama's bare names live under.
pub const DEFAULT_OLLAMA_HOST: &str = "registry.ollama.ai";

/// A parsed model name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelName {
    /// An existing file or directory, used as it is.
    Path(PathBuf),
    /// A Hugging Face Hub repository (or one file of it).
    Hf(HfName),
    /// A model in Ollama's local store.
    Ollama(OllamaName),
}

/// `hf:ORG/REPO[:QUANT | /FILE.gguf][@REVISION]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HfName {
    /// `ORG/REPO`.
    pub repo: String,
    /// A branch, tag or commit sha; [`DEFAULT_REVISION`] when not given.
    pub revision: String,
    /// What of the repository is wanted.
    pub target: HfTarget,
}

/// What a `hf:` name asks of its repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HfTarget {
    /// `hf:ORG/REPO`: the safetensors checkpoint directory (or, in a repository that has only
    /// GGUF files, the GGUF llama.cpp's `-hf` would pick without a tag).
    Checkpoint,
    /// `hf:ORG/REPO:QUANT`: the GGUF file of that quantization (`Q4_K_M`, case-insensitive).
    Quant(String),
    /// `hf:ORG/REPO/FILE.gguf`: that file.
    File(String),
}

/// `ollama:[[HOST/]NAMESPACE/]NAME[:TAG]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OllamaName {
    /// [`DEFAULT_OLLAMA_HOST`] unless the name has three parts.
    pub host: String,
    /// `library` for a bare name.
    pub namespace: String,
    pub model: String,
    /// [`DEFAULT_OLLAMA_TAG`] when not given.
    pub tag: String,
}

impl ModelName {
    /// Parses a name. A string naming an existing file or directory is always a path (so a
    /// directory that happens to be called `hf:x` keeps working); otherwise it must be a
    /// `hf:` or `ollama:` name.
    pub fn parse(name: &str) -> Result<ModelName> {
        let trimmed = name.trim();
        if !trimmed.is_empty() && std::path::Path::new(trimmed).exists() {
            return Ok(ModelName::Path(PathBuf::from(trimmed)));
        }
        if let Some(rest) = strip_scheme(trimmed, "hf:") {
            let invalid = |reason: String| Error::InvalidName {
                name: name.to_string(),
                reason,
            };
            let hf = HfName::parse(rest).map_err(invalid)?;
            if let HfTarget::File(file) = &hf.target {
                // Refused kinds say why before anything is asked of the Hub.
                crate::plan::check_fetchable(&hf.repo, file)?;
                if !crate::plan::is_gguf(file) {
                    return Err(invalid(format!(
                        "`{file}` is not a .gguf file; name a GGUF file, or give hf:ORG/REPO for \
                         a safetensors checkpoint"
                    )));
                }
            }
            return Ok(ModelName::Hf(hf));
        }
        if let Some(rest) = strip_scheme(trimmed, "ollama:") {
            return OllamaName::parse(rest)
                .map(ModelName::Ollama)
                .map_err(|reason| Error::InvalidName {
                    name: name.to_string(),
                    reason,
                });
        }
        Err(Error::UnknownName {
            name: name.to_string(),
        })
    }
}

fn strip_scheme<'a>(name: &'a str, scheme: &str) -> Option<&'a str> {
    let head = name.get(..scheme.len())?;
    head.eq_ignore_ascii_case(scheme)
        .then(|| &name[scheme.len()..])
}

impl HfName {
    fn parse(text: &str) -> std::result::Result<HfName, String> {
        // Repository names cannot hold `@`, so the first one starts the revision (which may
        // itself hold `/`, as in `refs/pr/1`).
        let (body, revision) = match text.split_once('@') {
            Some((body, revision)) => {
                check_revision(revision)?;
                (body, revision.to_string())
            }
            None => (text, DEFAULT_REVISION.to_string()),
        };
        let (path, quant) = match body.rsplit_once(':') {
            Some((path, quant)) => {
                // `-` as in Unsloth's `UD-Q4_K_XL`, which llama.cpp's `-hf` takes.
                let tag_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
                if quant.is_empty() {
                    return Err(
                        "nothing after `:`: name a quantization tag (like Q4_K_M or \
                                Q8_0), or leave `:` out for the default pick"
                            .to_string(),
                    );
                }
                if !quant.chars().all(tag_char) {
                    return Err(format!(
                        "`{quant}` is not a quantization tag (like Q4_K_M, Q8_0 or UD-Q4_K_XL)"
                    ));
                }
                (path, Some(quant.to_string()))
            }
            None => (body, None),
        };
        // `hf:ORG/REPO/`, as a repository's URL is often copied, is the repository.
        let path = match path.strip_suffix('/') {
            Some(trimmed) if trimmed.split('/').count() == 2 => trimmed,
            _ => path,
        };
        let parts: Vec<&str> = path.split('/').collect();
        if parts.len() < 2 {
            return Err("expected hf:ORG/REPO".to_string());
        }
        for part in &parts[..2] {
            check_repo_part(part)?;
        }
        let repo = format!("{}/{}", parts[0], parts[1]);
        let target = match (parts.len(), quant) {
            (2, None) => HfTarget::Checkpoint,
            (2, Some(quant)) => HfTarget::Quant(quant),
            (_, Some(_)) => {
                return Err("give either :QUANT or /FILE.gguf, not both".to_string());
            }
            (_, None) => {
                let file = parts[2..].join("/");
                check_repo_file(&file)?;
                HfTarget::File(file)
            }
        };
        Ok(HfName {
            repo,
            revision,
            target,
        })
    }
}

/// The Hub's own rule for organisation and repository names (huggingface_hub's
/// `validate_repo_id`): letters, digits, `-`, `_` and `.`, at most 96 of them, starting and
/// ending with a letter, digit or `_`, with no `--` or `..`. `--` matters beyond the Hub: the
/// cache folder `models--ORG--REPO` of `hf:a--b/c` would be that of `hf:a/b--c`.
pub(crate) fn check_repo_part(part: &str) -> std::result::Result<(), String> {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let valid = part.len() <= 96
        && edge(part.chars().next())
        && edge(part.chars().last())
        && !part.contains("--")
        && !part.contains("..")
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid {
        Ok(())
    } else if part.is_empty() {
        Err("expected hf:ORG/REPO, and the organisation or the repository is empty".to_string())
    } else {
        Err(format!(
            "`{part}` is not a Hub organisation or repository name (letters, digits, `-`, `_` \
             and `.`, not at either end, no `--` or `..`)"
        ))
    }
}

fn check_revision(revision: &str) -> std::result::Result<(), String> {
    let valid = !revision.is_empty()
        && revision
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
        && revision
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(())
    } else if revision.is_empty() {
        Err("nothing after `@`: name a branch, tag or commit, or leave `@` out for main".into())
    } else {
        Err(format!("`{revision}` is not a branch, tag or commit"))
    }
}

fn check_repo_file(file: &str) -> std::result::Result<(), String> {
    if crate::plan::safe_relative_path(file) {
        Ok(())
    } else {
        Err(format!("`{file}` is not a file path inside the repository"))
    }
}

impl OllamaName {
    fn parse(text: &str) -> std::result::Result<OllamaName, String> {
        // A tag follows the last `:` after the last `/` (a host may carry a `:port`).
        let last_slash = text.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match text[last_slash..].rfind(':') {
            Some(i) => (&text[..last_slash + i], &text[last_slash + i + 1..]),
            None => (text, DEFAULT_OLLAMA_TAG),
        };
        let parts: Vec<&str> = path.split('/').collect();
        let (host, namespace, model) = match parts.as_slice() {
            [model] => (DEFAULT_OLLAMA_HOST, "library", *model),
            [namespace, model] => (DEFAULT_OLLAMA_HOST, *namespace, *model),
            [host, namespace, model] => (*host, *namespace, *model),
            _ => {
                return Err("expected ollama:NAME[:TAG] or ollama:NAMESPACE/NAME[:TAG]".to_string())
            }
        };
        let segment_ok = |s: &str, extra: &[char]| {
            !s.is_empty()
                && !s.starts_with('.')
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c) || extra.contains(&c))
        };
        if path.is_empty() {
            return Err("expected ollama:NAME[:TAG], and the name is empty".to_string());
        }
        if !segment_ok(host, &[':']) || !segment_ok(namespace, &[]) || !segment_ok(model, &[]) {
            return Err(format!("`{path}` is not an Ollama model name"));
        }
        if tag.is_empty() {
            return Err(format!(
                "nothing after `:` in `{text}`: name a tag, or leave `:` out for latest"
            ));
        }
        if !segment_ok(tag, &[]) {
            return Err(format!("`{tag}` is not an Ollama tag"));
        }
        Ok(OllamaName {
            host: host.to_string(),
            namespace: namespace.to_string(),
            model: model.to_string(),
            tag: tag.to_string(),
        })
    }

    /// The name as `ollama pull` takes it: `NAME:TAG` for the library, `NS/NAME:TAG` otherwise.
    pub fn pull_name(&self) -> String {
        let mut name = String::new();
        if self.host != DEFAULT_OLLAMA_HOST {
            name.push_str(&self.host);
            name.push('/');
        }
        if self.host != DEFAULT_OLLAMA_HOST || self.namespace != "library" {
            name.push_str(&self.namespace);
            name.push('/');
        }
        name.push_str(&self.model);
        name.push(':');
        name.push_str(&self.tag);
        name
    }
}

impl fmt::Display for ModelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelName::Path(path) => write!(f, "{}", path.display()),
            ModelName::Hf(hf) => write!(f, "{hf}"),
            ModelName::Ollama(ollama) => write!(f, "{ollama}"),
        }
    }
}

impl fmt::Display for HfName {
    /// The canonical spelling; `@main` is left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hf:{}", self.repo)?;
        match &self.target {
            HfTarget::Checkpoint => {}
            HfTarget::Quant(quant) => write!(f, ":{quant}")?,
            HfTarget::File(file) => write!(f, "/{file}")?,
        }
        if self.revision != DEFAULT_REVISION {
            write!(f, "@{}", self.revision)?;
        }
        Ok(())
    }
}

impl fmt::Display for OllamaName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ollama:{}", self.pull_name())
    }
}

impl std::str::FromStr for ModelName {
    type Err = Error;

    fn from_str(name: &str) -> Result<ModelName> {
        ModelName::parse(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `name` and shows the result as `Debug`, or the error message.
    fn check(name: &str, expect: &str) {
        let shown = match ModelName::parse(name) {
            Ok(parsed) => format!("{parsed:?}"),
            Err(error) => error.to_string(),
        };
        assert_eq!(shown, expect, "for {name}");
    }

    #[test]
    fn hf_forms() {
        check(
            "hf:Org/Repo",
            r#"Hf(HfName { repo: "Org/Repo", revision: "main", target: Checkpoint })"#,
        );
        check(
            "hf:bartowski/Qwen2.5-Coder-0.5B-GGUF:q4_k_m",
            r#"Hf(HfName { repo: "bartowski/Qwen2.5-Coder-0.5B-GGUF", revision: "main", target: Quant("q4_k_m") })"#,
        );
        check(
            "hf:o/r/sub/m-Q8_0.gguf@v1.0",
            r#"Hf(HfName { repo: "o/r", revision: "v1.0", target: File("sub/m-Q8_0.gguf") })"#,
        );
        check(
            "HF:o/r:Q8_0@refs/pr/1",
            r#"Hf(HfName { repo: "o/r", revision: "refs/pr/1", target: Quant("Q8_0") })"#,
        );
        // Unsloth's dynamic quants, as llama.cpp's `-hf unsloth/REPO:UD-Q4_K_XL` takes them.
        check(
            "hf:unsloth/Coder-GGUF:UD-Q4_K_XL",
            r#"Hf(HfName { repo: "unsloth/Coder-GGUF", revision: "main", target: Quant("UD-Q4_K_XL") })"#,
        );
    }

    /// `hf:ORG/REPO/`, as a repository's URL is often copied, is the repository; a file path
    /// still may not end in `/`.
    #[test]
    fn a_trailing_slash_after_the_repository_is_the_repository() {
        check(
            "hf:o/r/",
            r#"Hf(HfName { repo: "o/r", revision: "main", target: Checkpoint })"#,
        );
        check(
            "hf:o/r/@v1",
            r#"Hf(HfName { repo: "o/r", revision: "v1", target: Checkpoint })"#,
        );
        check(
            "hf:o/r/x.gguf/",
            "`hf:o/r/x.gguf/` is not a valid model name: `x.gguf/` is not a file path inside the repository",
        );
        check(
            "hf:o/r//",
            "`hf:o/r//` is not a valid model name: `/` is not a file path inside the repository",
        );
    }

    #[test]
    fn hf_mistakes() {
        check(
            "hf:repo",
            "`hf:repo` is not a valid model name: expected hf:ORG/REPO",
        );
        check(
            "hf:o/r@../x",
            "`hf:o/r@../x` is not a valid model name: `../x` is not a branch, tag or commit",
        );
        check(
            "hf:o/../x.gguf",
            "`hf:o/../x.gguf` is not a valid model name: `..` is not a Hub organisation or repository name (letters, digits, `-`, `_` and `.`, not at either end, no `--` or `..`)",
        );
        // One cache folder, `models--a--b--c`, for both: neither is a Hub name.
        for name in ["hf:a--b/c", "hf:a/b--c"] {
            let message = ModelName::parse(name).unwrap_err().to_string();
            assert!(message.contains("no `--` or `..`"), "{name}: {message}");
        }
        for name in ["hf:a./b", "hf:a/-b", "hf:a/b..c", "hf:a/b:Q4_0@v1"] {
            let parsed = ModelName::parse(name);
            assert_eq!(
                parsed.is_ok(),
                name == "hf:a/b:Q4_0@v1",
                "{name}: {parsed:?}"
            );
        }
        check(
            "hf:o/r/a/../../x.gguf",
            "`hf:o/r/a/../../x.gguf` is not a valid model name: `a/../../x.gguf` is not a file path inside the repository",
        );
        check(
            "hf:o/r/m.gguf:Q4_0",
            "`hf:o/r/m.gguf:Q4_0` is not a valid model name: give either :QUANT or /FILE.gguf, not both",
        );
        // Empty parts say what is empty (they were quoted as ``).
        check("hf:o/r:", "`hf:o/r:` is not a valid model name: nothing after `:`: name a quantization tag (like Q4_K_M or Q8_0), or leave `:` out for the default pick");
        check("hf:Qwen/", "`hf:Qwen/` is not a valid model name: expected hf:ORG/REPO, and the organisation or the repository is empty");
        check("hf:a/b@", "`hf:a/b@` is not a valid model name: nothing after `@`: name a branch, tag or commit, or leave `@` out for main");
    }

    #[test]
    fn ollama_forms() {
        check(
            "ollama:qwen2.5-coder",
            r#"Ollama(OllamaName { host: "registry.ollama.ai", namespace: "library", model: "qwen2.5-coder", tag: "latest" })"#,
        );
        check(
            "ollama:someone/coder:1.5b",
            r#"Ollama(OllamaName { host: "registry.ollama.ai", namespace: "someone", model: "coder", tag: "1.5b" })"#,
        );
        check(
            "ollama:hf.co/org/repo:Q4_K_M",
            r#"Ollama(OllamaName { host: "hf.co", namespace: "org", model: "repo", tag: "Q4_K_M" })"#,
        );
        check("ollama:a/b/c/d", "`ollama:a/b/c/d` is not a valid model name: expected ollama:NAME[:TAG] or ollama:NAMESPACE/NAME[:TAG]");
        check(
            "ollama:../x",
            "`ollama:../x` is not a valid model name: `../x` is not an Ollama model name",
        );
        check(
            "ollama:",
            "`ollama:` is not a valid model name: expected ollama:NAME[:TAG], and the name is empty",
        );
        check("ollama:qwen:", "`ollama:qwen:` is not a valid model name: nothing after `:` in `qwen:`: name a tag, or leave `:` out for latest");
    }

    #[test]
    fn display_is_canonical_and_parses_back() {
        for name in [
            "hf:o/r",
            "hf:o/r:Q4_K_M",
            "hf:o/r/x.gguf@v1",
            "ollama:coder:latest",
            "ollama:someone/coder:7b",
            "ollama:hf.co/org/repo:Q4_K_M",
        ] {
            let parsed = ModelName::parse(name).unwrap();
            assert_eq!(parsed.to_string(), name);
        }
        assert_eq!(
            ModelName::parse("hf:o/r@main").unwrap().to_string(),
            "hf:o/r"
        );
        assert_eq!(
            ModelName::parse("ollama:library/x").unwrap().to_string(),
            "ollama:x:latest"
        );
    }

    #[test]
    fn existing_paths_win_and_bare_names_list_the_forms() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap();
        assert_eq!(
            ModelName::parse(path).unwrap(),
            ModelName::Path(dir.path().to_path_buf())
        );
        let message = ModelName::parse("qwen-coder").unwrap_err().to_string();
        for form in [
            "a path to a GGUF file or a model directory",
            "hf:ORG/REPO",
            "hf:ORG/REPO:QUANT",
            "ollama:NAME[:TAG]",
        ] {
            assert!(message.contains(form), "{message}");
        }
    }
}
