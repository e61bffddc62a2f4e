//! What is already on disk: every usable snapshot in the Hub cache and every model in Ollama's
//! store, each under a name that resolves back to it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cache::{files_in, is_commit, repo_of_folder, RepoCache};
use crate::hf::from_snapshot;
use crate::name::{HfName, HfTarget, ModelName, DEFAULT_REVISION};
use crate::{ollama, plan, ModelFormat};

/// A model found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalModel {
    /// A name [`crate::Resolver::resolve`] takes: `hf:ORG/REPO[@REV]`,
    /// `hf:ORG/REPO/FILE.gguf[@REV]` or `ollama:NAME:TAG`.
    pub name: String,
    pub format: ModelFormat,
    /// Bytes on disk (a checkpoint's files, or all parts of a GGUF).
    pub size: u64,
    /// What the name resolves to.
    pub path: PathBuf,
}

/// The Hub cache's models, by repository, then snapshot.
pub fn hub_models(root: &Path) -> Vec<LocalModel> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut repos: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(repo_of_folder))
        .collect();
    repos.sort_unstable();
    let mut found = Vec::new();
    for repo in repos {
        let cache = RepoCache::new(root, &repo);
        let refs = refs_by_commit(&cache.dir().join("refs"));
        let snapshots = cache.dir().join("snapshots");
        let mut commits: Vec<String> = std::fs::read_dir(&snapshots)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        commits.retain(|c| is_commit(c));
        commits.sort_unstable();
        for commit in commits {
            let revision = revision_label(refs.get(&commit), &commit);
            found.extend(snapshot_models(&repo, &revision, &cache.snapshot(&commit)));
        }
    }
    found
}

/// The models one snapshot holds: the checkpoint directory, and each complete GGUF.
fn snapshot_models(repo: &str, revision: &str, snapshot: &Path) -> Vec<LocalModel> {
    let name = |target| {
        ModelName::Hf(HfName {
            repo: repo.to_string(),
            revision: revision.to_string(),
            target,
        })
        .to_string()
    };
    let size = |file: &str| std::fs::metadata(snapshot.join(file)).map_or(0, |m| m.len());
    let files = files_in(snapshot);
    let mut found = Vec::new();
    if let Ok(resolved) = from_snapshot(snapshot, &HfTarget::Checkpoint) {
        if resolved.format == ModelFormat::SafetensorsDir {
            found.push(LocalModel {
                name: name(HfTarget::Checkpoint),
                format: ModelFormat::SafetensorsDir,
                size: files
                    .iter()
                    .filter(|f| !plan::is_gguf(f))
                    .map(|f| size(f))
                    .sum(),
                path: resolved.path,
            });
        }
    }
    for file in &files {
        let first_part = plan::split_info(file).is_none_or(|(_, index, _)| index == 1);
        if !plan::is_model_gguf(file) || !first_part {
            continue;
        }
        if let Ok(resolved) = from_snapshot(snapshot, &HfTarget::File(file.clone())) {
            found.push(LocalModel {
                name: name(HfTarget::File(file.clone())),
                format: ModelFormat::Gguf,
                size: plan::split_parts(file).iter().map(|p| size(p)).sum(),
                path: resolved.path,
            });
        }
    }
    found
}

/// `refs/` as commit -> revisions (nested refs such as `refs/pr/1` included).
fn refs_by_commit(refs: &Path) -> BTreeMap<String, Vec<String>> {
    let mut by_commit: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for revision in files_in(refs) {
        let Ok(text) = std::fs::read_to_string(refs.join(&revision)) else {
            continue;
        };
        let commit = text.trim().to_string();
        if is_commit(&commit) {
            by_commit.entry(commit).or_default().push(revision);
        }
    }
    by_commit
}

/// `main` when it points here, else the first other ref, else the commit itself.
fn revision_label(revisions: Option<&Vec<String>>, commit: &str) -> String {
    let revisions = revisions.map(Vec::as_slice).unwrap_or_default();
    if revisions.iter().any(|r| r == DEFAULT_REVISION) {
        return DEFAULT_REVISION.to_string();
    }
    revisions
        .first()
        .cloned()
        .unwrap_or_else(|| commit.to_string())
}

/// Ollama's models whose manifest and blob are in place.
pub fn ollama_models(store: &Path) -> Vec<LocalModel> {
    ollama::names(store)
        .into_iter()
        .filter_map(|name| {
            let path = ollama::resolve(store, &name).ok()?;
            let size = std::fs::metadata(&path).map_or(0, |m| m.len());
            Some(LocalModel {
                name: ModelName::Ollama(name).to_string(),
                format: ModelFormat::Gguf,
                size,
                path,
            })
        })
        .collect()
}
