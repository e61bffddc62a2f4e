//! What is already on disk: every usable snapshot in the Hub cache and every model in Ollama's
//! store, each under a name that resolves back to it, and what looks like a model but is not
//! usable (a link to a deleted blob, a split GGUF missing a part, a download never finished, a
//! manifest naming a missing blob, a folder whose name is not a Hub name), with why.

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

/// Something on disk that looks like (part of) a model but is not listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub path: PathBuf,
    /// Why, and what to do about it.
    pub why: String,
}

/// What [`crate::Resolver::scan_local`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalScan {
    pub models: Vec<LocalModel>,
    pub skipped: Vec<Skipped>,
}

impl LocalScan {
    fn skip(&mut self, path: impl Into<PathBuf>, why: impl Into<String>) {
        self.skipped.push(Skipped {
            path: path.into(),
            why: why.into(),
        });
    }
}

/// The Hub cache's models, by repository, then snapshot.
pub fn hub_models(root: &Path, scan: &mut LocalScan) {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            return scan.skip(
                root,
                format!(
                    "the Hugging Face cache cannot be read ({e}); HF_HUB_CACHE (or HF_HOME) \
                     names it"
                ),
            )
        }
    };
    let first_skipped = scan.skipped.len();
    let mut repos = Vec::new();
    for entry in entries.flatten() {
        let folder = entry.file_name();
        match folder.to_str().and_then(repo_of_folder) {
            Some(repo) => repos.push(repo),
            None if folder.to_string_lossy().starts_with("models--") => scan.skip(
                entry.path(),
                "not named models--ORG--REPO with a Hub organisation and repository name, so \
                 no hf: name reaches it",
            ),
            None => {}
        }
    }
    repos.sort_unstable();
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
            snapshot_models(&repo, &revision, &cache.snapshot(&commit), scan);
        }
        unfinished_downloads(&repo, &cache.dir().join("blobs"), scan);
    }
    // In path order, as the models are, whatever order the directory was read in.
    scan.skipped[first_skipped..].sort_by(|a, b| a.path.cmp(&b.path));
}

/// The models one snapshot holds: the checkpoint directory, and each complete GGUF; what in it
/// is broken goes to `scan.skipped`.
fn snapshot_models(repo: &str, revision: &str, snapshot: &Path, scan: &mut LocalScan) {
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
    // Only what a pull would fetch again (a README's dangling link is no model's).
    for file in dangling_in(snapshot)
        .into_iter()
        .filter(|f| plan::refusal(f).is_none())
    {
        let target = if plan::is_gguf(&file) {
            HfTarget::File(file.clone())
        } else {
            HfTarget::Checkpoint
        };
        scan.skip(
            snapshot.join(&file),
            format!(
                "a link to a blob that is gone (deleted, or never finished); `redraft pull {}` \
                 fetches it again",
                name(target)
            ),
        );
    }
    match from_snapshot(snapshot, &HfTarget::Checkpoint) {
        Ok(resolved) if resolved.format == ModelFormat::SafetensorsDir => {
            scan.models.push(LocalModel {
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
        // Weights without what loads them (a config-only snapshot, as transformers leaves
        // one, is no model and not said).
        Err(missing) if has_safetensors(&files) && !dangling_named(scan, snapshot, &missing) => {
            scan.skip(
                snapshot,
                format!(
                    "safetensors weights without {missing}; `redraft pull {}` fetches what is \
                     missing",
                    name(HfTarget::Checkpoint)
                ),
            );
        }
        _ => {}
    }
    for file in &files {
        let first_part = plan::split_info(file).is_none_or(|(_, index, _)| index == 1);
        if !plan::is_model_gguf(file) || !first_part {
            continue;
        }
        match from_snapshot(snapshot, &HfTarget::File(file.clone())) {
            Ok(resolved) => scan.models.push(LocalModel {
                name: name(HfTarget::File(file.clone())),
                format: ModelFormat::Gguf,
                size: plan::split_parts(file).iter().map(|p| size(p)).sum(),
                path: resolved.path,
            }),
            Err(missing) if !dangling_named(scan, snapshot, &missing) => scan.skip(
                snapshot.join(file),
                format!(
                    "a split GGUF without its part {missing}; `redraft pull {}` fetches it",
                    name(HfTarget::File(file.clone()))
                ),
            ),
            Err(_) => {}
        }
    }
}

/// Whether `missing` (a snapshot path) was already said to be a dangling link.
fn dangling_named(scan: &LocalScan, snapshot: &Path, missing: &str) -> bool {
    let path = snapshot.join(missing);
    scan.skipped.iter().any(|s| s.path == path)
}

fn has_safetensors(files: &[String]) -> bool {
    files.iter().any(|f| {
        f.ends_with(".safetensors") || f.rsplit('/').next() == Some(plan::WEIGHTS_INDEX_FILE)
    })
}

/// Symlinks under `dir` whose target is missing, as `/`-separated paths relative to it (a
/// directory symlink is not followed, as [`files_in`] follows none).
fn dangling_in(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>, depth: usize) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let relative = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            match entry.file_type() {
                Ok(kind) if kind.is_dir() && depth < 16 => {
                    walk(&entry.path(), &relative, out, depth + 1)
                }
                Ok(kind) if kind.is_symlink() && std::fs::metadata(entry.path()).is_err() => {
                    out.push(relative)
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out, 0);
    out.sort_unstable();
    out
}

/// `blobs/*.incomplete`: downloads killed (or under way now), which a pull resumes.
fn unfinished_downloads(repo: &str, blobs: &Path, scan: &mut LocalScan) {
    let Ok(entries) = std::fs::read_dir(blobs) else {
        return;
    };
    let mut partial: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "incomplete"))
        .collect();
    partial.sort_unstable();
    for path in partial {
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        scan.skip(
            &path,
            format!(
                "a download of {repo} not finished ({} so far): under way, or stopped; pulling \
                 the same name again resumes it",
                crate::progress::human_bytes(size)
            ),
        );
    }
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

/// Ollama's models whose manifest and blob are in place; the others go to `scan.skipped`
/// with the error resolving them gives.
pub fn ollama_models(store: &Path, scan: &mut LocalScan) {
    if store.exists() && !store.is_dir() {
        let error = crate::Error::OllamaStoreNotDir {
            store: store.to_path_buf(),
        };
        return scan.skip(store, error.to_string());
    }
    for name in ollama::names(store) {
        match ollama::resolve(store, &name) {
            Ok(path) => {
                let size = std::fs::metadata(&path).map_or(0, |m| m.len());
                scan.models.push(LocalModel {
                    name: ModelName::Ollama(name).to_string(),
                    format: ModelFormat::Gguf,
                    size,
                    path,
                });
            }
            Err(error) => scan.skip(ollama::manifest_path(store, &name), error.to_string()),
        }
    }
}
