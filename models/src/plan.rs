//! Which files of a repository a name needs: the file-kind policy (what is never fetched), the
//! checkpoint's files, and the GGUF file llama.cpp's `-hf` would pick.
//!
//! Everything here works on lists of repository paths, whether they come from the Hub's file
//! listing or from a snapshot directory already in the cache, so the online and the cached
//! paths choose alike.

use crate::error::{Error, Refusal, Result};
use crate::name::HfTarget;

/// The checkpoint's configuration; always needed.
pub const CONFIG_FILE: &str = "config.json";
/// The tokenizer redraft loads; always needed for a checkpoint directory.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// Single-file safetensors weights.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The index of sharded safetensors weights (`weight_map`: tensor name -> shard file).
pub const WEIGHTS_INDEX_FILE: &str = "model.safetensors.index.json";
/// Fetched beside a checkpoint when the repository has them.
pub const OPTIONAL_FILES: [&str; 4] = [
    "tokenizer_config.json",
    "generation_config.json",
    "special_tokens_map.json",
    "redraft.json",
];
/// redraft's own settings, fetched beside a GGUF file when the repository has one there.
pub const REDRAFT_FILE: &str = "redraft.json";

/// Quantizations tried, in order, when a GGUF is wanted without a tag (llama.cpp's order).
const DEFAULT_QUANTS: [&str; 2] = ["Q4_K_M", "Q8_0"];

/// GGUF files that are not language models (llama.cpp's `gguf_filename_is_model`):
/// multimodal projectors, importance matrices, draft and speculative heads.
const NOT_MODEL_GGUF: [&str; 6] = ["mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"];

const PICKLE_EXTENSIONS: [&str; 8] = [
    "bin", "pt", "pth", "pkl", "pickle", "ckpt", "joblib", "dill",
];
const CODE_EXTENSIONS: [&str; 22] = [
    "py", "pyc", "pyo", "pyd", "ipynb", "sh", "bash", "zsh", "bat", "cmd", "ps1", "js", "mjs",
    "ts", "rb", "pl", "lua", "so", "dylib", "dll", "exe", "wasm",
];

/// A repository path that stays inside the snapshot directory: relative, `/`-separated, no
/// empty, `.` or `..` segment, no backslash, drive letter or NUL.
pub fn safe_relative_path(path: &str) -> bool {
    !path.is_empty()
        && !path.contains(['\\', ':', '\0'])
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// Why `path` may not be downloaded, if it may not.
pub fn refusal(path: &str) -> Option<Refusal> {
    if !safe_relative_path(path) {
        return Some(Refusal::UnsafePath);
    }
    let file = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    let extension = file.rsplit_once('.').map_or("", |(_, ext)| ext);
    if PICKLE_EXTENSIONS.contains(&extension) {
        return Some(Refusal::Pickle);
    }
    if CODE_EXTENSIONS.contains(&extension) {
        return Some(Refusal::Code);
    }
    let model_data =
        matches!(extension, "safetensors" | "gguf" | "json" | "txt") || file == "tokenizer.model";
    (!model_data).then_some(Refusal::NotModelData)
}

/// Fails with [`Error::Refused`] for a file the policy refuses.
pub fn check_fetchable(repo: &str, path: &str) -> Result<()> {
    match refusal(path) {
        None => Ok(()),
        Some(reason) => Err(Error::Refused {
            repo: repo.to_string(),
            file: path.to_string(),
            reason,
        }),
    }
}

fn is_pickle(path: &str) -> bool {
    refusal(path) == Some(Refusal::Pickle)
}

/// What a name needs from its repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// A safetensors checkpoint directory: `files` (config, tokenizer, optional files, and
    /// `model.safetensors` or the index, whose shards are added once it is read).
    Checkpoint {
        files: Vec<String>,
        index: Option<String>,
    },
    /// A GGUF file and its split parts (first part first), plus a `redraft.json` beside it.
    Gguf {
        parts: Vec<String>,
        extra: Vec<String>,
    },
}

impl Choice {
    /// Every file to fetch, in order.
    pub fn files(&self) -> Vec<String> {
        match self {
            Choice::Checkpoint { files, .. } => files.clone(),
            Choice::Gguf { parts, extra } => extra.iter().chain(parts).cloned().collect(),
        }
    }
}

/// Chooses the files `target` needs among `files` (a repository's paths).
pub fn choose(target: &HfTarget, files: &[String], repo: &str, revision: &str) -> Result<Choice> {
    // A listing naming a path that would leave the snapshot (no Hub repository can hold one;
    // a hostile mirror could) is read without it, so it is neither picked nor offered.
    let mut files: Vec<&str> = files
        .iter()
        .map(String::as_str)
        .filter(|f| safe_relative_path(f))
        .collect();
    files.sort_unstable();
    let has = |name: &str| files.contains(&name);
    let missing = |file: &str| Error::MissingFile {
        repo: repo.to_string(),
        revision: revision.to_string(),
        file: file.to_string(),
    };
    let no_gguf = |wanted: &str| Error::NoMatchingGguf {
        repo: repo.to_string(),
        revision: revision.to_string(),
        wanted: wanted.to_string(),
        available: list_ggufs(&files),
    };
    match target {
        HfTarget::Checkpoint => {
            if has(WEIGHTS_FILE) || has(WEIGHTS_INDEX_FILE) {
                let mut chosen = Vec::new();
                for required in [CONFIG_FILE, TOKENIZER_FILE] {
                    if !has(required) {
                        return Err(missing(required));
                    }
                    chosen.push(required.to_string());
                }
                chosen.extend(
                    OPTIONAL_FILES
                        .iter()
                        .filter(|f| has(f))
                        .map(|f| f.to_string()),
                );
                // transformers prefers the single file when a repository has both.
                let (weights, index) = if has(WEIGHTS_FILE) {
                    (WEIGHTS_FILE, None)
                } else {
                    (WEIGHTS_INDEX_FILE, Some(WEIGHTS_INDEX_FILE.to_string()))
                };
                chosen.push(weights.to_string());
                return Ok(Choice::Checkpoint {
                    files: chosen,
                    index,
                });
            }
            if let Some(first) = pick_gguf(&files, None) {
                return gguf_choice(&files, first, repo).map_err(|part| missing(&part));
            }
            let pickles: Vec<&str> = files.iter().copied().filter(|f| is_pickle(f)).collect();
            if !pickles.is_empty() {
                return Err(Error::OnlyPickledWeights {
                    repo: repo.to_string(),
                    revision: revision.to_string(),
                    files: pickles.join(", "),
                });
            }
            Err(Error::NoWeights {
                repo: repo.to_string(),
                revision: revision.to_string(),
            })
        }
        HfTarget::Quant(quant) => {
            let first = pick_gguf(&files, Some(quant)).ok_or_else(|| no_gguf(quant))?;
            gguf_choice(&files, first, repo).map_err(|part| missing(&part))
        }
        HfTarget::File(file) => {
            check_fetchable(repo, file)?;
            let found = files
                .iter()
                .find(|f| **f == file.as_str())
                .or_else(|| files.iter().find(|f| f.eq_ignore_ascii_case(file)))
                .ok_or_else(|| no_gguf(file))?;
            gguf_choice(&files, found, repo).map_err(|part| missing(&part))
        }
    }
}

/// The parts of the GGUF `first` (all of them for a split file) and a `redraft.json` beside it;
/// `Err` names a missing part.
fn gguf_choice(files: &[&str], first: &str, repo: &str) -> std::result::Result<Choice, String> {
    let parts = split_parts(first);
    if let Some(absent) = parts.iter().find(|p| !files.contains(&p.as_str())) {
        return Err(absent.clone());
    }
    for part in &parts {
        // Names come from the server: refuse anything unsafe before it reaches a path.
        if refusal(part).is_some() {
            return Err(format!("{part} (refused by {repo}'s file policy)"));
        }
    }
    let beside = match first.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{REDRAFT_FILE}"),
        None => REDRAFT_FILE.to_string(),
    };
    let extra = files
        .iter()
        .filter(|f| **f == beside)
        .map(|f| f.to_string())
        .collect();
    Ok(Choice::Gguf { parts, extra })
}

/// The GGUF files a name could pick (no `mmproj`, `imatrix` or draft-head file, a split file
/// once, by its first part), for an error that lists what there is.
pub fn list_ggufs(files: &[&str]) -> String {
    let first_part = |f: &&str| split_info(f).is_none_or(|(_, index, _)| index == 1);
    let ggufs: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| is_model_gguf(f))
        .filter(first_part)
        .collect();
    if ggufs.is_empty() {
        "none".to_string()
    } else {
        ggufs.join(", ")
    }
}

/// A `.gguf` file (case-insensitive).
pub fn is_gguf(path: &str) -> bool {
    path.len() > 5
        && path
            .get(path.len() - 5..)
            .is_some_and(|ext| ext.eq_ignore_ascii_case(".gguf"))
}

/// A GGUF file that is a language model, not a projector or draft head.
pub fn is_model_gguf(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    is_gguf(path) && !NOT_MODEL_GGUF.iter().any(|marker| file.contains(marker))
}

/// `(prefix, index, count)` of `prefix-00001-of-00003.gguf`; `None` for an unsplit file.
pub fn split_info(path: &str) -> Option<(&str, u32, u32)> {
    if !is_gguf(path) {
        return None;
    }
    let stem = &path[..path.len() - 5];
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, index) = rest.rsplit_once('-')?;
    let five_digits = |s: &str| {
        (s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse::<u32>().ok())?
    };
    let (index, count) = (five_digits(index)?, five_digits(count)?);
    (!prefix.is_empty() && index >= 1 && index <= count).then_some((prefix, index, count))
}

/// Every part of the GGUF whose first part is `first`, in order; just `first` when unsplit.
pub fn split_parts(first: &str) -> Vec<String> {
    match split_info(first) {
        Some((prefix, _, count)) if count > 1 => {
            let ext = &first[first.len() - 5..];
            (1..=count)
                .map(|i| format!("{prefix}-{i:05}-of-{count:05}{ext}"))
                .collect()
        }
        _ => vec![first.to_string()],
    }
}

/// The GGUF llama.cpp's `-hf ORG/REPO[:TAG]` downloads: for each tag tried (the given one, or
/// Q4_K_M then Q8_0), the first model GGUF whose path holds `TAG.` or `TAG-`
/// (case-insensitive), skipping split parts after the first; with no tag and no match, the
/// first model GGUF. `files` must be sorted, as the Hub lists them.
pub fn pick_gguf<'a>(files: &[&'a str], tag: Option<&str>) -> Option<&'a str> {
    let first_part = |f: &&str| split_info(f).is_none_or(|(_, index, _)| index == 1);
    let tags: Vec<&str> = tag.map_or(DEFAULT_QUANTS.to_vec(), |t| vec![t]);
    for tag in tags {
        let tag = tag.to_ascii_uppercase();
        let (dot, dash) = (format!("{tag}."), format!("{tag}-"));
        let found = files
            .iter()
            .filter(|f| is_model_gguf(f) && first_part(f))
            .find(|f| {
                let upper = f.to_ascii_uppercase();
                upper.contains(&dot) || upper.contains(&dash)
            });
        if let Some(found) = found {
            return Some(found);
        }
    }
    if tag.is_none() {
        return files
            .iter()
            .copied()
            .find(|f| is_model_gguf(f) && first_part(f));
    }
    None
}

/// The shard files an index's `weight_map` names, sorted, relative to the repository root.
pub fn index_shards(index_path: &str, text: &str) -> std::result::Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct Index {
        weight_map: std::collections::BTreeMap<String, String>,
    }
    let index: Index = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let dir = index_path.rsplit_once('/').map(|(dir, _)| dir);
    let mut shards: Vec<String> = index
        .weight_map
        .into_values()
        .map(|shard| match dir {
            Some(dir) => format!("{dir}/{shard}"),
            None => shard,
        })
        .collect();
    shards.sort_unstable();
    shards.dedup();
    Ok(shards)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(files: &[&str], tag: Option<&str>) -> Option<String> {
        let mut files = files.to_vec();
        files.sort_unstable();
        pick_gguf(&files, tag).map(str::to_string)
    }

    #[test]
    fn policy_refuses_pickles_and_code_by_name() {
        for (path, expect) in [
            ("model.safetensors", None),
            ("sub/model-Q4_K_M.gguf", None),
            ("config.json", None),
            ("tokenizer.model", None),
            ("merges.txt", None),
            ("pytorch_model.bin", Some(Refusal::Pickle)),
            ("weights.PT", Some(Refusal::Pickle)),
            ("model.ckpt", Some(Refusal::Pickle)),
            ("modeling_x.py", Some(Refusal::Code)),
            ("setup.sh", Some(Refusal::Code)),
            ("model.onnx", Some(Refusal::NotModelData)),
            ("../model.gguf", Some(Refusal::UnsafePath)),
            ("/etc/x.json", Some(Refusal::UnsafePath)),
            ("a\\b.json", Some(Refusal::UnsafePath)),
        ] {
            assert_eq!(refusal(path), expect, "{path}");
        }
    }

    #[test]
    fn gguf_pick_follows_llama_cpp() {
        let files = [
            "mmproj-m-Q4_K_M.gguf",
            "m-IQ4_XS.gguf",
            "m-Q4_K_M.gguf",
            "m-Q4_K_S.gguf",
            "m-Q8_0.gguf",
            "README.md",
        ];
        assert_eq!(
            pick(&files, Some("q4_k_m")).as_deref(),
            Some("m-Q4_K_M.gguf")
        );
        assert_eq!(
            pick(&files, Some("Q4_K")),
            None,
            "Q4_K is not Q4_K_M or Q4_K_S"
        );
        assert_eq!(pick(&files, Some("Q8_0")).as_deref(), Some("m-Q8_0.gguf"));
        assert_eq!(pick(&files, None).as_deref(), Some("m-Q4_K_M.gguf"));
        assert_eq!(
            pick(&files[..2], None).as_deref(),
            Some("m-IQ4_XS.gguf"),
            "the first model"
        );
        assert_eq!(
            pick(&["m-Q8_0.gguf", "m-f16.gguf"], None).as_deref(),
            Some("m-Q8_0.gguf")
        );
        let split = ["s-Q8_0-00002-of-00002.gguf", "s-Q8_0-00001-of-00002.gguf"];
        assert_eq!(
            pick(&split, Some("Q8_0")).as_deref(),
            Some("s-Q8_0-00001-of-00002.gguf")
        );
    }

    #[test]
    fn split_names() {
        assert_eq!(
            split_info("a/m-Q8_0-00001-of-00003.gguf"),
            Some(("a/m-Q8_0", 1, 3))
        );
        assert_eq!(split_info("m-Q8_0.gguf"), None);
        assert_eq!(split_info("-00001-of-00003.gguf"), None);
        assert_eq!(split_info("m-00004-of-00003.gguf"), None);
        assert_eq!(
            split_parts("m-00001-of-00003.gguf"),
            [
                "m-00001-of-00003.gguf",
                "m-00002-of-00003.gguf",
                "m-00003-of-00003.gguf"
            ]
        );
        assert_eq!(split_parts("m.gguf"), ["m.gguf"]);
    }

    /// A quantization the repository lacks lists the files a name could pick: not a
    /// projector's, an importance matrix's or a split file's later parts.
    #[test]
    fn a_missing_quantization_lists_the_files_a_name_could_pick() {
        let files: Vec<String> = [
            "m-Q8_0.gguf",
            "mmproj-m-f16.gguf",
            "m-Q4_0.imatrix.gguf",
            "big-Q6_K-00001-of-00002.gguf",
            "big-Q6_K-00002-of-00002.gguf",
        ]
        .map(String::from)
        .to_vec();
        let target = HfTarget::Quant("Q4_K_M".into());
        let error = choose(&target, &files, "o/r", "main").unwrap_err();
        assert_eq!(
            error.to_string(),
            "o/r@main has no GGUF file matching `Q4_K_M`; its GGUF files: \
             big-Q6_K-00001-of-00002.gguf, m-Q8_0.gguf"
        );
    }

    #[test]
    fn checkpoint_choice() {
        let files: Vec<String> = [
            "config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "model.safetensors.index.json",
            "model-00001-of-00002.safetensors",
            "pytorch_model.bin",
            "modeling.py",
        ]
        .map(String::from)
        .to_vec();
        let choice = choose(&HfTarget::Checkpoint, &files, "o/r", "main").unwrap();
        assert_eq!(
            choice,
            Choice::Checkpoint {
                files: [
                    "config.json",
                    "tokenizer.json",
                    "tokenizer_config.json",
                    "model.safetensors.index.json"
                ]
                .map(String::from)
                .to_vec(),
                index: Some("model.safetensors.index.json".to_string()),
            }
        );
        let no_tokenizer: Vec<String> = files
            .iter()
            .filter(|f| *f != "tokenizer.json")
            .cloned()
            .collect();
        let error = choose(&HfTarget::Checkpoint, &no_tokenizer, "o/r", "main").unwrap_err();
        assert_eq!(
            error.to_string(),
            "o/r@main has no tokenizer.json, which redraft needs to load the model"
        );
    }

    #[test]
    fn index_shards_are_unique_and_relative_to_the_index() {
        let text = r#"{"metadata":{},"weight_map":{"a":"m-2.safetensors","b":"m-1.safetensors","c":"m-1.safetensors"}}"#;
        assert_eq!(
            index_shards("sub/model.safetensors.index.json", text).unwrap(),
            ["sub/m-1.safetensors", "sub/m-2.safetensors"]
        );
    }
}
