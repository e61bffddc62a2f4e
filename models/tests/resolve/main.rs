//! Names resolved end to end, offline: a loopback fake Hub, Hub caches laid out as
//! huggingface_hub writes them, and fake Ollama stores, all in temporary directories.

mod cache_trouble;
mod gguf;
mod hub_answers;
mod hub_cache;
mod hub_downloads;
mod listing;
mod names;
mod ollama;

use std::path::{Path, PathBuf};

use redraft_models::{HfToken, NoProgress, ResolvedModel, Resolver, Result, Settings};

use redraft_tests::fake_hub::{etag_of, FakeHub};
use redraft_tests::refused::RefusedPort;

/// A commit sha made of one repeated hex digit.
pub fn commit(digit: char) -> String {
    std::iter::repeat_n(digit, 40).collect()
}

pub use redraft_tests::fake_hub::weights;

/// A checkpoint repository's files, with pickled weights and code beside the real ones.
pub fn checkpoint_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("config.json", br#"{"model_type":"qwen2"}"#.to_vec()),
        ("tokenizer.json", br#"{"model":{}}"#.to_vec()),
        ("tokenizer_config.json", br#"{}"#.to_vec()),
        ("redraft.json", br#"{"mask_token_id":5}"#.to_vec()),
        ("model.safetensors", weights(300_000, 1)),
        ("pytorch_model.bin", weights(1000, 2)),
        ("modeling_custom.py", b"import os".to_vec()),
        ("README.md", b"# a model".to_vec()),
    ]
}

/// Temporary stores and the settings pointing at them.
pub struct World {
    pub dir: tempfile::TempDir,
    pub settings: Settings,
    /// The port that stands for a Hub that is down, held for as long as the stores are.
    _hub_down: Option<RefusedPort>,
}

impl World {
    /// Stores in a fresh temporary directory, the Hub at `endpoint`.
    pub fn new(endpoint: &str) -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        let settings = Settings {
            hub_cache: dir.path().join("hub"),
            endpoint: endpoint.to_string(),
            token: None,
            offline: false,
            ollama_models: dir.path().join("ollama"),
        };
        World {
            dir,
            settings,
            _hub_down: None,
        }
    }

    /// Stores for `hub`.
    pub fn with_hub(hub: &FakeHub) -> World {
        World::new(&hub.url)
    }

    /// Stores with no Hub: any request fails to connect.
    pub fn without_hub() -> World {
        let down = RefusedPort::new();
        let world = World::new(&down.url());
        World {
            _hub_down: Some(down),
            ..world
        }
    }

    pub fn token(mut self, token: &str) -> World {
        self.settings.token = HfToken::new(token);
        self
    }

    pub fn offline(mut self) -> World {
        self.settings.offline = true;
        self
    }

    pub fn resolver(&self) -> Resolver {
        Resolver::new(self.settings.clone())
    }

    pub fn resolve(&self, name: &str) -> Result<ResolvedModel> {
        self.resolver().resolve(name, &mut NoProgress)
    }

    pub fn repo_dir(&self, repo: &str) -> PathBuf {
        self.settings
            .hub_cache
            .join(format!("models--{}", repo.replace('/', "--")))
    }

    /// Asserts that `file` of `repo` at `commit` is in the cache as huggingface_hub lays it
    /// out: the blob named by its ETag with this content, and a relative snapshot symlink.
    pub fn assert_cached(&self, repo: &str, commit: &str, file: &str, content: &[u8]) {
        let dir = self.repo_dir(repo);
        let etag = etag_of(file, content);
        let blob = dir.join("blobs").join(&etag);
        assert_eq!(
            std::fs::read(&blob).expect("blob"),
            content,
            "blob of {file}"
        );
        let link = dir.join("snapshots").join(commit).join(file);
        let depth = file.split('/').count();
        let expected = format!("{}blobs/{etag}", "../".repeat(depth + 1));
        assert_eq!(
            std::fs::read_link(&link).expect("snapshot link"),
            Path::new(&expected)
        );
        assert_eq!(std::fs::read(&link).expect("linked file"), content);
    }

    /// Lays out a cache as huggingface_hub writes it: blobs, relative symlinks, a ref.
    pub fn write_hf_cache(
        &self,
        repo: &str,
        revision: &str,
        commit: &str,
        files: &[(&str, Vec<u8>)],
    ) {
        let dir = self.repo_dir(repo);
        for (file, content) in files {
            let etag = etag_of(file, content);
            std::fs::create_dir_all(dir.join("blobs")).unwrap();
            std::fs::write(dir.join("blobs").join(&etag), content).unwrap();
            let link = dir.join("snapshots").join(commit).join(file);
            std::fs::create_dir_all(link.parent().unwrap()).unwrap();
            let target = format!("{}blobs/{etag}", "../".repeat(file.split('/').count() + 1));
            std::os::unix::fs::symlink(target, link).unwrap();
        }
        let reference = dir.join("refs").join(revision);
        std::fs::create_dir_all(reference.parent().unwrap()).unwrap();
        std::fs::write(reference, commit).unwrap();
    }
}

/// The files under `dir`, relative, sorted (symlinks listed, not followed).
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&path, base, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
