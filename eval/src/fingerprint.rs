//! Fingerprints of what a run's results came from, kept in its `run.json` so a resumed run is
//! refused when something changed under the same name rather than mixing two runs' results:
//! the model (the same directory with new weights, another embedded default in a rebuilt
//! binary), and the input files (a task file, a completions file or a next-edit case set
//! rewritten in place), which [`of_input`] and [`of_inputs`] hash whole.
//!
//! A model directory is fingerprinted by the bytes of the small files that decide what it
//! computes (`config.json`, `redraft.json`, the tokenizer files, a shard index) and by each
//! weight file's name, size and modification time, not its bytes: hashing gigabytes of
//! weights on every run (and every resume) would cost more than many short runs take, and
//! writing new weights changes their modification time. The embedded default model is
//! fingerprinted by all its bytes, which are in memory already and small.

use std::path::Path;
use std::time::UNIX_EPOCH;

use redraft_engine::engine::{ModelFiles, WeightsFile};

use crate::error::{Error, Result};
use crate::rng::{fnv1a_continue, FNV1A_START};

/// The fingerprint of a model directory or a GGUF file (what `Engine::dir` names): a GGUF
/// file's own name, size and modification time with the `redraft.json` and `tokenizer.json`
/// beside it (the loader reads both).
pub fn of_path(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let mut hash = Fnv1a64::new();
    if meta.is_dir() {
        let mut names: Vec<String> = std::fs::read_dir(path)
            .map_err(|e| Error::io(path, e))?
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        for name in names {
            let file = path.join(&name);
            // Through links: a Hugging Face snapshot links each file to its blob.
            if !file.is_file() {
                continue;
            }
            if is_weights(&name) {
                weight_file(&mut hash, &name, &file)?;
            } else if is_hashed(&name) {
                whole_file(&mut hash, &name, &file)?;
            }
        }
    } else {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        weight_file(&mut hash, &name, path)?;
        let beside = path.parent().unwrap_or(Path::new("."));
        for name in ["redraft.json", "tokenizer.json"] {
            let file = beside.join(name);
            if file.is_file() {
                whole_file(&mut hash, name, &file)?;
            }
        }
    }
    Ok(hash.fingerprint())
}

/// The fingerprint of a model compiled into the binary (the embedded default model): a hash
/// of every byte of its files.
pub fn of_files(files: &ModelFiles) -> String {
    let mut hash = Fnv1a64::new();
    match files.weights {
        WeightsFile::Safetensors { config, weights } => {
            hash.part(b"config.json", config.as_bytes());
            hash.part(b"model.safetensors", weights);
        }
        WeightsFile::Gguf(bytes) => hash.part(b"model.gguf", bytes),
    }
    if let Some(redraft) = files.redraft {
        hash.part(b"redraft.json", redraft.as_bytes());
    }
    hash.part(b"tokenizer.json", files.tokenizer);
    hash.fingerprint()
}

/// The fingerprint of an input file's bytes (a task file as it is on disk, gzip or not; a
/// completions file): the same path rewritten is another input.
pub fn of_input(path: &Path) -> Result<String> {
    of_inputs(std::slice::from_ref(&path))
}

/// The fingerprint of several input files (a next-edit case set): each file's name (not its
/// directory, which the run records as given) and bytes, in the order given.
pub fn of_inputs<P: AsRef<Path>>(files: &[P]) -> Result<String> {
    let mut hash = Fnv1a64::new();
    for file in files {
        let file = file.as_ref();
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        whole_file(&mut hash, &name, file)?;
    }
    Ok(hash.fingerprint())
}

/// Weight files: fingerprinted by name, size and modification time.
fn is_weights(name: &str) -> bool {
    [".safetensors", ".gguf", ".bin", ".pt", ".pth"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

/// The small files whose bytes decide what the model computes.
fn is_hashed(name: &str) -> bool {
    matches!(name, "config.json" | "redraft.json")
        || name.starts_with("tokenizer")
        || name.ends_with(".index.json")
}

fn whole_file(hash: &mut Fnv1a64, name: &str, file: &Path) -> Result<()> {
    let bytes = std::fs::read(file).map_err(|e| Error::io(file, e))?;
    hash.part(name.as_bytes(), &bytes);
    Ok(())
}

fn weight_file(hash: &mut Fnv1a64, name: &str, file: &Path) -> Result<()> {
    let meta = std::fs::metadata(file).map_err(|e| Error::io(file, e))?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let mut stamp = meta.len().to_le_bytes().to_vec();
    stamp.extend_from_slice(&modified.to_le_bytes());
    hash.part(name.as_bytes(), &stamp);
    Ok(())
}

/// FNV-1a, 64 bits: defined by its constants, so a fingerprint stays the same across builds
/// and Rust versions (std's `DefaultHasher` promises neither), and needs no dependency.
struct Fnv1a64(u64);

impl Fnv1a64 {
    fn new() -> Fnv1a64 {
        Fnv1a64(FNV1A_START)
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0 = fnv1a_continue(self.0, bytes);
    }

    /// A named part, its name and length written before it so parts cannot run together.
    fn part(&mut self, name: &[u8], bytes: &[u8]) {
        self.write(&(name.len() as u64).to_le_bytes());
        self.write(name);
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }

    fn fingerprint(&self) -> String {
        format!("fnv1a64:{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    fn model_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("config.json", "{\"hidden_size\": 8}"),
            ("redraft.json", "{}"),
            ("tokenizer.json", "{\"model\": {}}"),
            ("model.safetensors", "weights one"),
            ("README.md", "a model"),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    fn set_modified(file: &Path, at: SystemTime) {
        std::fs::File::options()
            .write(true)
            .open(file)
            .unwrap()
            .set_modified(at)
            .unwrap();
    }

    #[test]
    fn a_directory_changes_with_its_weights_config_and_tokenizer_only() {
        let dir = model_dir();
        let path = dir.path();
        let weights = path.join("model.safetensors");
        set_modified(&weights, UNIX_EPOCH + Duration::from_secs(1_000_000));
        let first = of_path(path).unwrap();
        assert!(first.starts_with("fnv1a64:"), "{first}");
        assert_eq!(
            of_path(path).unwrap(),
            first,
            "the same files, the same fingerprint"
        );

        // Files the loader does not read change nothing.
        std::fs::write(path.join("README.md"), "another text").unwrap();
        std::fs::write(path.join("train_log.jsonl"), "{}\n").unwrap();
        assert_eq!(of_path(path).unwrap(), first);

        // Weights of the same size written again: a new modification time.
        std::fs::write(&weights, "weights two").unwrap();
        set_modified(&weights, UNIX_EPOCH + Duration::from_secs(2_000_000));
        let rewritten = of_path(path).unwrap();
        assert_ne!(rewritten, first);
        // Another size, the old time back.
        std::fs::write(&weights, "other weights").unwrap();
        set_modified(&weights, UNIX_EPOCH + Duration::from_secs(1_000_000));
        assert_ne!(of_path(path).unwrap(), first);
        std::fs::write(&weights, "weights one").unwrap();
        set_modified(&weights, UNIX_EPOCH + Duration::from_secs(1_000_000));
        assert_eq!(of_path(path).unwrap(), first, "the old weights back");

        for name in ["config.json", "redraft.json", "tokenizer.json"] {
            let before = std::fs::read(path.join(name)).unwrap();
            std::fs::write(path.join(name), b"{\"changed\": true}").unwrap();
            assert_ne!(of_path(path).unwrap(), first, "{name}");
            std::fs::write(path.join(name), before).unwrap();
        }
        assert_eq!(of_path(path).unwrap(), first);
    }

    #[test]
    fn a_gguf_file_counts_the_files_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("model.gguf");
        std::fs::write(&file, "GGUF").unwrap();
        let alone = of_path(&file).unwrap();
        std::fs::write(dir.path().join("tokenizer.json"), "{}").unwrap();
        assert_ne!(of_path(&file).unwrap(), alone);
    }

    /// An input rewritten in place (the same path, the same size) is another input.
    #[test]
    fn input_files_are_hashed_by_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.md"), dir.path().join("b.md"));
        std::fs::write(&a, "one").unwrap();
        std::fs::write(&b, "two").unwrap();
        let first = of_input(&a).unwrap();
        assert!(first.starts_with("fnv1a64:"), "{first}");
        assert_eq!(of_input(&a).unwrap(), first);
        std::fs::write(&a, "eno").unwrap();
        assert_ne!(of_input(&a).unwrap(), first);
        let set = of_inputs(&[&a, &b]).unwrap();
        assert_ne!(set, of_input(&a).unwrap());
        // Names count: the same bytes under another name are another set.
        std::fs::rename(&b, dir.path().join("c.md")).unwrap();
        assert_ne!(of_inputs(&[&a, &dir.path().join("c.md")]).unwrap(), set);
        assert!(of_input(&b).is_err(), "a missing input is an error");
    }

    #[test]
    fn embedded_files_are_hashed_whole() {
        let files = |weights: &'static [u8]| ModelFiles {
            origin: "<embedded>/test",
            weights: WeightsFile::Gguf(weights),
            redraft: Some("{}"),
            tokenizer: b"{}",
        };
        let one = of_files(&files(b"GGUF one"));
        assert_eq!(of_files(&files(b"GGUF one")), one);
        assert_ne!(of_files(&files(b"GGUF two")), one);
        // Known values keep the fingerprint stable across builds.
        let mut hash = Fnv1a64::new();
        hash.write(b"a");
        assert_eq!(hash.0, 0xaf63_dc4c_8601_ec8c);
    }
}
