//! `hf:` names: from the cache when the revision's snapshot already has every needed file
//! (no request at all), otherwise from the Hub into the cache.

use std::path::Path;

use crate::cache::{files_in, RepoCache};
use crate::download::{fetch_blob, Blob};
use crate::error::{Error, Result};
use crate::hub::Hub;
use crate::name::{HfName, HfTarget};
use crate::plan::{self, Choice};
use crate::progress::Progress;
use crate::{ModelFormat, ResolvedModel, Settings};

/// Resolves `name` from the cache alone; `Err` says what is missing (for the offline error).
pub fn from_cache(
    settings: &Settings,
    name: &HfName,
) -> std::result::Result<ResolvedModel, String> {
    let cache = RepoCache::new(&settings.hub_cache, &name.repo);
    let commit = cache
        .commit_for(&name.revision)
        .ok_or_else(|| format!("the commit of `{}` (refs/{})", name.revision, name.revision))?;
    from_snapshot(&cache.snapshot(&commit), &name.target)
}

/// What `snapshot` offers for `target`, if it has every file needed.
pub fn from_snapshot(
    snapshot: &Path,
    target: &HfTarget,
) -> std::result::Result<ResolvedModel, String> {
    let has = |file: &str| snapshot.join(file).exists();
    let gguf = |first: &str| -> std::result::Result<ResolvedModel, String> {
        if let Some(absent) = plan::split_parts(first).into_iter().find(|p| !has(p)) {
            return Err(absent);
        }
        Ok(ResolvedModel {
            path: snapshot.join(first),
            format: ModelFormat::Gguf,
        })
    };
    match target {
        HfTarget::Checkpoint => {
            if has(plan::WEIGHTS_FILE) || has(plan::WEIGHTS_INDEX_FILE) {
                for required in [plan::CONFIG_FILE, plan::TOKENIZER_FILE] {
                    if !has(required) {
                        return Err(required.to_string());
                    }
                }
                if !has(plan::WEIGHTS_FILE) {
                    let index = plan::WEIGHTS_INDEX_FILE;
                    let text = std::fs::read_to_string(snapshot.join(index))
                        .map_err(|_| index.to_string())?;
                    let shards = plan::index_shards(index, &text).map_err(|_| index.to_string())?;
                    let unusable = |s: &String| plan::refusal(s).is_some() || !has(s);
                    if let Some(absent) = shards.into_iter().find(unusable) {
                        return Err(absent);
                    }
                }
                return Ok(ResolvedModel {
                    path: snapshot.to_path_buf(),
                    format: ModelFormat::SafetensorsDir,
                });
            }
            let files = files_in(snapshot);
            let files: Vec<&str> = files.iter().map(String::as_str).collect();
            match plan::pick_gguf(&files, None) {
                Some(first) => gguf(first),
                None if !has(plan::CONFIG_FILE) => Err(plan::CONFIG_FILE.to_string()),
                None => Err(plan::WEIGHTS_FILE.to_string()),
            }
        }
        HfTarget::Quant(quant) => {
            let files = files_in(snapshot);
            let files: Vec<&str> = files.iter().map(String::as_str).collect();
            match plan::pick_gguf(&files, Some(quant)) {
                Some(first) => gguf(first),
                // What is cached, so that an offline user can pick one of those instead.
                None => Err(format!(
                    "a GGUF file matching `{quant}` (cached: {})",
                    plan::list_ggufs(&files)
                )),
            }
        }
        HfTarget::File(file) => gguf(file),
    }
}

/// Resolves `name` through the Hub: the revision's commit and file list, then each needed file
/// not yet in the snapshot (`HEAD` for its ETag; the blob downloaded unless already cached;
/// the snapshot link), then `refs/<revision>`. With `verify`, a file already in the snapshot
/// is `HEAD`ed too and fetched again when its size is not the Hub's.
pub fn from_hub(
    hub: &Hub,
    settings: &Settings,
    name: &HfName,
    verify: bool,
    progress: &mut dyn Progress,
) -> Result<ResolvedModel> {
    let repo = name.repo.as_str();
    let cache = RepoCache::new(&settings.hub_cache, repo);
    let info = hub.repo_info(repo, &name.revision)?;
    let commit = info.commit.as_str();
    let choice = plan::choose(&name.target, &info.files, repo, &name.revision)?;
    let files = choice.files();
    for file in &files {
        ensure_file(hub, &cache, repo, commit, file, verify, progress)?;
    }
    let snapshot = cache.snapshot(commit);
    let resolved = match &choice {
        Choice::Checkpoint { index, .. } => {
            if let Some(index) = index {
                let index_path = snapshot.join(index);
                let text = std::fs::read_to_string(&index_path)
                    .map_err(|e| Error::io("read", &index_path, e))?;
                let shards = plan::index_shards(index, &text).map_err(|what| Error::Malformed {
                    url: format!("{repo}/{index}"),
                    what,
                })?;
                for shard in &shards {
                    plan::check_fetchable(repo, shard)?;
                    if !info.files.contains(shard) {
                        return Err(Error::MissingFile {
                            repo: repo.to_string(),
                            revision: name.revision.clone(),
                            file: shard.clone(),
                        });
                    }
                }
                for shard in &shards {
                    ensure_file(hub, &cache, repo, commit, shard, verify, progress)?;
                }
            }
            ResolvedModel {
                path: snapshot,
                format: ModelFormat::SafetensorsDir,
            }
        }
        Choice::Gguf { parts, .. } => ResolvedModel {
            path: snapshot.join(&parts[0]),
            format: ModelFormat::Gguf,
        },
    };
    cache.write_ref(&name.revision, commit)?;
    Ok(resolved)
}

/// Puts `file` of `commit` into the snapshot unless it is there already (with `verify`: there
/// with the size the Hub gives it).
fn ensure_file(
    hub: &Hub,
    cache: &RepoCache,
    repo: &str,
    commit: &str,
    file: &str,
    verify: bool,
    progress: &mut dyn Progress,
) -> Result<()> {
    plan::check_fetchable(repo, file)?;
    let cached = cache.snapshot(commit).join(file);
    if cached.exists() && !verify {
        return Ok(());
    }
    let meta = hub.file_meta(repo, commit, file)?;
    if let Ok(have) = std::fs::metadata(&cached) {
        if meta.size.is_none_or(|size| size == have.len()) {
            return Ok(());
        }
        // Cut short (a full disk, a copy killed half way, another tool's crash): what the
        // snapshot shows is not the file. `fetch_blob` replaces a blob of the wrong size;
        // a copy in the snapshot goes first.
        cache.forget_copy(commit, file)?;
    }
    fetch_blob(
        hub,
        cache,
        &Blob {
            repo,
            file,
            meta: &meta,
        },
        progress,
    )?;
    cache.link(commit, file, &meta.etag)?;
    Ok(())
}
