//! llama.cpp's split GGUF checkpoints (`llama-gguf-split`, and the parts Hugging Face
//! repositories hold for files past their size limit): `NAME-00001-of-00003.gguf` holds the
//! metadata and some of the tensors, each later part more tensors; every part states
//! `split.no` (from 0) and `split.count`. A checkpoint is loaded from its first part, the
//! others found beside it by llama.cpp's naming (`llama_split_path`).

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Content;

use super::Metadata;
use crate::error::{Error, Result};

/// The parts after `first` of the checkpoint whose first file is `first` (none for a file that
/// is not split), in order; an error for a part other than the first, or parts not named as
/// llama.cpp names them (the others could not be found).
pub(super) fn other_parts(first: &Path, content: &Content) -> Result<Vec<PathBuf>> {
    let meta = Metadata {
        values: &content.metadata,
        path: first,
    };
    let count = match meta.optional_u64("split.count")? {
        Some(count) if count > 1 => count,
        _ => return Ok(Vec::new()),
    };
    let unsupported = |message: String| Error::UnsupportedConfig {
        path: first.to_path_buf(),
        message,
    };
    if count > 99_999 {
        return Err(meta.bad("split.count", "more parts than a name can number"));
    }
    let index = meta.optional_u64("split.no")?.unwrap_or(0);
    let prefix = part_name(first)
        .filter(|&(_, _, named_count)| named_count == count)
        .map(|(prefix, _, _)| prefix);
    let Some(prefix) = prefix else {
        return Err(unsupported(format!(
            "part {} of a GGUF split into {count} files, not named as llama.cpp names the parts \
             (`NAME-00001-of-{count:05}.gguf`, ...), so the other parts cannot be found; rename \
             them so, or merge them with `llama-gguf-split --merge`",
            index + 1
        )));
    };
    let part = |no: u64| first.with_file_name(format!("{prefix}-{no:05}-of-{count:05}.gguf"));
    if index != 0 {
        return Err(unsupported(format!(
            "part {} of a GGUF split into {count} files: load its first part, {}",
            index + 1,
            part(1).display()
        )));
    }
    Ok((2..=count).map(part).collect())
}

/// `(NAME, part, count)` of a file named as llama.cpp names a split file's parts
/// (`NAME-00002-of-00003.gguf`: part 2 of 3); `None` for any other name.
pub(crate) fn part_name(path: &Path) -> Option<(&str, u64, u64)> {
    let number = |digits: &str| {
        (digits.len() == 5 && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())
            .flatten()
    };
    let stem = path.file_name()?.to_str()?.strip_suffix(".gguf")?;
    let (head, count) = stem.rsplit_once("-of-")?;
    let (prefix, part) = head.rsplit_once('-')?;
    Some((prefix, number(part)?, number(count)?))
}

/// The error for a part of `first`'s checkpoint that cannot be opened.
pub(super) fn missing_part(part: &Path, first: &Path, source: std::io::Error) -> Error {
    if source.kind() == std::io::ErrorKind::NotFound {
        Error::UnsupportedConfig {
            path: first.to_path_buf(),
            message: format!(
                "a part of this split GGUF is missing: {} (fetch every part; `redraft pull` \
                 does for a model named hf:...)",
                part.display()
            ),
        }
    } else {
        Error::io(part, source)
    }
}
