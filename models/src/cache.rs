//! The Hugging Face hub cache, laid out exactly as huggingface_hub writes it, so that
//! transformers, huggingface_hub, llama.cpp and redraft share one copy of every file:
//!
//! ```text
//! <root>/models--ORG--REPO/blobs/<etag>                  file contents, named by ETag
//! <root>/models--ORG--REPO/blobs/<etag>.incomplete       a download in progress
//! <root>/models--ORG--REPO/snapshots/<commit>/<path>     relative symlink to ../../blobs/<etag>
//! <root>/models--ORG--REPO/refs/<revision>               the commit sha the revision was at
//! <root>/.locks/models--ORG--REPO/<etag>.lock            held while a blob downloads
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// One repository's folder in the cache.
#[derive(Debug, Clone)]
pub struct RepoCache {
    root: PathBuf,
    folder: String,
}

/// A 40-hex-digit git commit sha (lowercase, as the Hub writes them).
pub fn is_commit(text: &str) -> bool {
    text.len() == 40
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A 64-hex-digit sha256 (an LFS file's ETag).
pub fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// An ETag usable as a file name in `blobs/`.
pub fn is_safe_etag(etag: &str) -> bool {
    !etag.is_empty()
        && etag.len() <= 128
        && !etag.starts_with('.')
        && etag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl RepoCache {
    /// The folder of model repository `repo` (`ORG/REPO`) under cache `root`.
    pub fn new(root: &Path, repo: &str) -> RepoCache {
        RepoCache {
            root: root.to_path_buf(),
            folder: folder_name(repo),
        }
    }

    /// `models--ORG--REPO`.
    pub fn dir(&self) -> PathBuf {
        self.root.join(&self.folder)
    }

    pub fn blob(&self, etag: &str) -> PathBuf {
        self.dir().join("blobs").join(etag)
    }

    /// Where a blob's bytes gather while it downloads (huggingface_hub's name, so either tool
    /// resumes the other's download).
    pub fn incomplete(&self, etag: &str) -> PathBuf {
        self.dir().join("blobs").join(format!("{etag}.incomplete"))
    }

    /// huggingface_hub's lock file for a blob (it locks with `flock` too, so the two tools
    /// exclude each other).
    pub fn lock_file(&self, etag: &str) -> PathBuf {
        self.root
            .join(".locks")
            .join(&self.folder)
            .join(format!("{etag}.lock"))
    }

    pub fn snapshot(&self, commit: &str) -> PathBuf {
        self.dir().join("snapshots").join(commit)
    }

    /// The commit `revision` names: itself for a commit sha, else what `refs/<revision>` holds.
    pub fn commit_for(&self, revision: &str) -> Option<String> {
        if is_commit(revision) {
            return Some(revision.to_string());
        }
        let text = std::fs::read_to_string(self.dir().join("refs").join(revision)).ok()?;
        let commit = text.trim();
        is_commit(commit).then(|| commit.to_string())
    }

    /// Records that `revision` is at `commit` (replacing the file, never half-writing it).
    pub fn write_ref(&self, revision: &str, commit: &str) -> Result<()> {
        if revision == commit {
            return Ok(());
        }
        let path = self.dir().join("refs").join(revision);
        let parent = path.parent().unwrap_or(&path).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(|e| Error::cache_write("create", &parent, e))?;
        // Unique per process and call: two threads of one process may write the same ref.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let temp = parent.join(format!(
            ".{}.{}-{}.tmp",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("ref"),
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&temp, commit).map_err(|e| Error::cache_write("write", &temp, e))?;
        std::fs::rename(&temp, &path).map_err(|e| Error::cache_write("write", &path, e))
    }

    /// Removes `snapshots/<commit>/<path>` when it is a file rather than a link (a copy, where
    /// links are not made, that is damaged): the blob it copied is checked, and fetched again
    /// if need be, under the blob's lock; a link is left, to be pointed at it again.
    pub fn forget_copy(&self, commit: &str, path: &str) -> Result<()> {
        let file = self.snapshot(commit).join(path);
        match file.symlink_metadata() {
            Ok(meta) if !meta.file_type().is_symlink() => std::fs::remove_file(&file)
                .map_err(|e| Error::cache_write("remove the damaged", &file, e)),
            _ => Ok(()),
        }
    }

    /// Makes `snapshots/<commit>/<path>` point at `blobs/<etag>` (a relative symlink, as
    /// huggingface_hub makes them, so the cache can move as a whole).
    pub fn link(&self, commit: &str, path: &str, etag: &str) -> Result<PathBuf> {
        let link = self.snapshot(commit).join(path);
        let parent = link.parent().unwrap_or(&link).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(|e| Error::cache_write("create", &parent, e))?;
        let depth = path.split('/').count();
        let mut target = PathBuf::new();
        for _ in 0..depth + 1 {
            target.push("..");
        }
        target.push("blobs");
        target.push(etag);
        place_link(&target, &self.blob(etag), &link)?;
        Ok(link)
    }
}

#[cfg(unix)]
fn place_link(target: &Path, _blob: &Path, link: &Path) -> Result<()> {
    match std::fs::read_link(link) {
        Ok(existing) if existing == target => return Ok(()),
        Ok(_) => std::fs::remove_file(link).map_err(|e| Error::cache_write("replace", link, e))?,
        Err(_) if link.symlink_metadata().is_ok() => {
            std::fs::remove_file(link).map_err(|e| Error::cache_write("replace", link, e))?
        }
        Err(_) => {}
    }
    match std::os::unix::fs::symlink(target, link) {
        Ok(()) => Ok(()),
        // Another process made the same link meanwhile.
        Err(e)
            if e.kind() == std::io::ErrorKind::AlreadyExists
                && std::fs::read_link(link).is_ok_and(|existing| existing == target) =>
        {
            Ok(())
        }
        Err(e) => Err(Error::cache_write("link", link, e)),
    }
}

/// Without symlinks (Windows without developer mode), huggingface_hub keeps a copy in the
/// snapshot; so does this.
#[cfg(not(unix))]
fn place_link(_target: &Path, blob: &Path, link: &Path) -> Result<()> {
    if link.exists() {
        return Ok(());
    }
    std::fs::copy(blob, link)
        .map(|_| ())
        .map_err(|e| Error::cache_write("copy to", link, e))
}

/// `models--ORG--REPO` for `ORG/REPO`.
pub fn folder_name(repo: &str) -> String {
    format!("models--{}", repo.replace('/', "--"))
}

/// `ORG/REPO` for `models--ORG--REPO`; `None` for other folders (datasets, spaces, locks).
pub fn repo_of_folder(folder: &str) -> Option<String> {
    let rest = folder.strip_prefix("models--")?;
    let (org, repo) = rest.split_once("--")?;
    // A name the Hub does not allow (`models--a--b--c`, left by an older redraft) would be
    // listed under a name that does not parse.
    let valid = |part: &str| crate::name::check_repo_part(part).is_ok();
    (valid(org) && valid(repo)).then(|| format!("{org}/{repo}"))
}

/// Every file under `dir` that exists (a dangling symlink does not), as `/`-separated paths
/// relative to `dir`, sorted. Symlinks to files count (a snapshot is made of them); a symlink
/// to a directory is not followed: huggingface_hub never makes one, and two looping ones would
/// make the walk exponential (`d/a -> ..`, `d/b -> ..`: every path of a's and b's).
pub fn files_in(dir: &Path) -> Vec<String> {
    // Deep enough for any repository.
    const MAX_DEPTH: usize = 16;
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let path = entry.path();
            let relative = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                walk(&path, &relative, out, depth + 1);
            } else if std::fs::metadata(&path).is_ok_and(|meta| meta.is_file()) {
                out.push(relative);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out, 0);
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths() {
        let cache = RepoCache::new(Path::new("/c"), "Org/Repo");
        assert_eq!(cache.dir(), Path::new("/c/models--Org--Repo"));
        assert_eq!(
            cache.incomplete("e"),
            Path::new("/c/models--Org--Repo/blobs/e.incomplete")
        );
        assert_eq!(
            cache.lock_file("e"),
            Path::new("/c/.locks/models--Org--Repo/e.lock")
        );
        assert_eq!(
            repo_of_folder("models--Org--Repo").as_deref(),
            Some("Org/Repo")
        );
        assert_eq!(repo_of_folder("datasets--a--b"), None);
        assert!(is_commit(&"a".repeat(40)));
        assert!(!is_commit(&"A".repeat(40)));
        assert!(!is_safe_etag("../x"));
    }

    #[cfg(unix)]
    #[test]
    fn links_are_relative_and_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let cache = RepoCache::new(dir.path(), "o/r");
        std::fs::create_dir_all(cache.blob("e").parent().unwrap()).unwrap();
        std::fs::write(cache.blob("e"), "x").unwrap();
        let link = cache.link(&"c".repeat(40), "sub/dir/f.json", "e").unwrap();
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            Path::new("../../../../blobs/e")
        );
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "x");
        // Linking again (by another process, say) is fine.
        cache.link(&"c".repeat(40), "sub/dir/f.json", "e").unwrap();
    }
}
