//! Real edits: earlier published versions of the corpus's crates, each file paired with the
//! same path in the next newer version and cut into cases by [`cut_versions`].
//!
//! Only cargo talks to the registry. For crate `name` at version `V` a scratch package depending
//! on `name = "<V"` is resolved (`cargo generate-lockfile`: the newest published, unyanked
//! version below `V`) and fetched (`cargo fetch --target <host>`, which unpacks it under
//! `$CARGO_HOME/registry/src/`; its own dependencies come along, most of them already there).
//! Each scratch package keeps its lockfile under the work directory, so a rerun resolves
//! nothing again and the versions stay the same. The chain stops at the first version that
//! does not resolve, is not MIT or Apache-2.0 (the corpus's licence rule, applied to that
//! version's own `Cargo.toml`) or was not unpacked; the reason is kept.
//!
//! Files are read with the corpus's file filters ([`crate::corpus`]); the newest version's
//! files are the corpus's own records. The crate set is the corpus manifest's (benchmark
//! sources are not in it, and are refused here again by name). A pair whose older or newer
//! file shares a passage with held-out code ([`HeldOutCode`], the corpus's rule) makes no
//! cases: the corpus checked its own files, never the earlier versions'.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use redraft_context::edit::cut::{cut_versions, CutOptions};
use serde::{Deserialize, Serialize};

use super::{EditKind, EditRecord, EditsError, Result};
use crate::corpus::{self, CorpusCrate, CorpusRecord, HeldOutCode, Split};

/// The scratch packages' name (never a crates.io crate's).
const SCRATCH_PACKAGE: &str = "redraft-edit-versions-scratch";

/// What [`build`] needs beyond the crates.
#[derive(Debug, Clone)]
pub struct VersionsOptions {
    /// Earlier versions per crate, at most.
    pub versions: usize,
    /// Scratch packages live here, one directory per resolution.
    pub work_dir: PathBuf,
    /// `CARGO_HOME` for cargo; `None`: cargo's default.
    pub cargo_home: Option<PathBuf>,
    /// The corpus's file size limit.
    pub max_file_bytes: usize,
    /// The corpus's excluded crate patterns (benchmark sources).
    pub excluded_crates: Vec<String>,
    pub cut: CutOptions,
}

/// One corpus crate's chain of versions, newest first after the corpus's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrateVersions {
    pub name: String,
    pub split: Split,
    /// The corpus's version.
    pub current: String,
    /// Earlier versions paired, newest first.
    pub used: Vec<UsedVersion>,
    /// Why the chain ended before `versions` earlier versions (none when it did not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// An earlier version paired with the next newer one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsedVersion {
    pub version: String,
    /// The version it was paired with (the next newer one).
    pub paired_with: String,
    pub license: String,
    /// Files at the same path in both versions, and how many of those changed.
    pub files_paired: usize,
    pub files_changed: usize,
    pub cases: usize,
    /// Size of its `.crate` download (0 when cargo's cache has none).
    pub crate_bytes: u64,
    /// Changed files whose pair made no cases: one of the two shares a passage with held-out
    /// code.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_out_passage: Vec<HeldOutPassageFile>,
}

/// A file of a version pair that shares a passage with held-out code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldOutPassageFile {
    pub path: String,
    /// The version whose file shares it (the older one when both do).
    pub version: String,
    /// Consecutive code tokens shared ([`corpus::SharedPassage::tokens`]).
    pub tokens: usize,
    /// `crate/path (version)` of the held-out file.
    pub held_out: String,
}

/// Real-edit cases and what it took.
#[derive(Debug, Default)]
pub struct VersionsBuild {
    /// By crate, then version pair (newest first), then path.
    pub records: Vec<EditRecord>,
    pub crates: Vec<CrateVersions>,
    /// Changes dropped, by [`redraft_context::edit::cut::DropReason::name`], and the cases of
    /// pairs sharing held-out code (`held_out_passage`).
    pub dropped: BTreeMap<String, usize>,
    pub fetch_seconds: f64,
    pub crate_bytes: u64,
}

/// Fetches up to `options.versions` earlier versions of each crate and cuts their files
/// against the next newer version's (`current_files`: the corpus's records by crate), leaving
/// out pairs that share a passage with `held_out`.
pub fn build(
    crates: &[CorpusCrate],
    current_files: &BTreeMap<String, Vec<CorpusRecord>>,
    held_out: &HeldOutCode,
    options: &VersionsOptions,
) -> Result<VersionsBuild> {
    let mut out = VersionsBuild::default();
    if options.versions == 0 {
        return Ok(out);
    }
    let cargo = Cargo::new(options);
    for krate in crates {
        let mut chain = CrateVersions {
            name: krate.name.clone(),
            split: krate.split,
            current: krate.version.clone(),
            used: Vec::new(),
            stopped: None,
        };
        if let Some(pattern) = options
            .excluded_crates
            .iter()
            .find(|pattern| corpus::matches_crate_pattern(pattern, &krate.name))
        {
            chain.stopped = Some(format!("excluded (matches `{pattern}`)"));
            out.crates.push(chain);
            continue;
        }
        let mut newer_version = krate.version.clone();
        let mut newer: BTreeMap<String, String> = current_files
            .get(&krate.name)
            .into_iter()
            .flatten()
            .map(|record| (record.path.clone(), record.text.clone()))
            .collect();
        for _ in 0..options.versions {
            let started = Instant::now();
            let earlier = cargo.earlier_version(&krate.name, &newer_version);
            out.fetch_seconds += started.elapsed().as_secs_f64();
            let resolved = match earlier? {
                Ok(resolved) => resolved,
                Err(reason) => {
                    chain.stopped = Some(reason);
                    break;
                }
            };
            let corpus::CrateVersionFiles { license, files } =
                corpus::crate_version_files(&resolved.dir, options.max_file_bytes)?;
            let Some(license) = license else {
                chain.stopped = Some(format!(
                    "{}: its licence has no MIT or Apache-2.0 alternative",
                    resolved.version
                ));
                break;
            };
            let older: BTreeMap<String, String> = files.into_iter().collect();
            let mut used = UsedVersion {
                version: resolved.version.clone(),
                paired_with: newer_version.clone(),
                license,
                files_paired: 0,
                files_changed: 0,
                cases: 0,
                crate_bytes: resolved.crate_bytes,
                held_out_passage: Vec::new(),
            };
            for (path, new_text) in &newer {
                let Some(old_text) = older.get(path) else {
                    continue;
                };
                used.files_paired += 1;
                if old_text == new_text {
                    continue;
                }
                used.files_changed += 1;
                let cut = cut_versions(path, old_text, new_text, &options.cut);
                let shared = [(&resolved.version, old_text), (&newer_version, new_text)]
                    .into_iter()
                    .find_map(|(version, text)| Some((version, held_out.shared_passage(text)?)));
                if let Some((version, passage)) = shared {
                    *out.dropped
                        .entry("held_out_passage".to_string())
                        .or_default() += cut.cases.len();
                    used.held_out_passage.push(HeldOutPassageFile {
                        path: path.clone(),
                        version: version.clone(),
                        tokens: passage.tokens,
                        held_out: passage.source,
                    });
                    continue;
                }
                for (reason, count) in cut.dropped {
                    *out.dropped.entry(reason.name().to_string()).or_default() += count;
                }
                used.cases += cut.cases.len();
                out.records.extend(cut.cases.into_iter().map(|case| {
                    let mut record =
                        EditRecord::new(EditKind::Versions, &krate.name, &newer_version, case);
                    record.from_version = Some(resolved.version.clone());
                    record
                }));
            }
            out.crate_bytes += used.crate_bytes;
            chain.used.push(used);
            newer_version = resolved.version;
            newer = older;
        }
        out.crates.push(chain);
    }
    Ok(out)
}

/// An earlier version, unpacked.
struct Resolved {
    version: String,
    dir: PathBuf,
    crate_bytes: u64,
}

/// cargo, run on scratch packages.
struct Cargo<'a> {
    options: &'a VersionsOptions,
    home: PathBuf,
    host: Option<String>,
}

impl<'a> Cargo<'a> {
    fn new(options: &'a VersionsOptions) -> Cargo<'a> {
        let home = options.cargo_home.clone().unwrap_or_else(|| {
            std::env::var_os("CARGO_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo")
                })
        });
        let host = Command::new("rustc")
            .arg("-vV")
            .output()
            .ok()
            .and_then(|output| {
                String::from_utf8_lossy(&output.stdout)
                    .lines()
                    .find_map(|line| line.strip_prefix("host: ").map(str::to_string))
            });
        Cargo {
            options,
            home,
            host,
        }
    }

    fn command(&self, args: &[&str], manifest: &Path) -> Command {
        let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        command.args(args).arg("--manifest-path").arg(manifest);
        if let Some(home) = &self.options.cargo_home {
            command.env("CARGO_HOME", home);
        }
        command
    }

    /// Runs `command`: `Ok(Ok(()))`, or `Ok(Err(stderr))` when cargo ran and failed.
    fn run(&self, mut command: Command) -> Result<std::result::Result<(), String>> {
        let output = command.output().map_err(|source| EditsError::Cargo {
            command: format!("{command:?}"),
            source,
        })?;
        if output.status.success() {
            Ok(Ok(()))
        } else {
            Ok(Err(String::from_utf8_lossy(&output.stderr).into_owned()))
        }
    }

    /// The newest version of `name` below `below`, fetched; `Ok(Err(why))` when there is none
    /// to use.
    fn earlier_version(
        &self,
        name: &str,
        below: &str,
    ) -> Result<std::result::Result<Resolved, String>> {
        let dir = self.options.work_dir.join(format!("{name}-below-{below}"));
        let manifest = dir.join("Cargo.toml");
        let lockfile = dir.join("Cargo.lock");
        let none_file = dir.join("no-earlier-version");
        let write_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| EditsError::Write { path, source }
        };
        if none_file.exists() {
            return Ok(Err(format!("no published version below {below}")));
        }
        if !lockfile.exists() {
            fs::create_dir_all(&dir).map_err(write_error(&dir))?;
            // Its own `[workspace]`, so a work directory inside another workspace stays apart.
            let text = format!(
                "[package]\nname = \"{SCRATCH_PACKAGE}\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
                 publish = false\n\n[lib]\npath = \"lib.rs\"\n\n[dependencies]\n\
                 earlier = {{ package = \"{name}\", version = \"<{below}\" }}\n\n[workspace]\n"
            );
            fs::write(&manifest, text).map_err(write_error(&manifest))?;
            let lib = dir.join("lib.rs");
            fs::write(&lib, "").map_err(write_error(&lib))?;
            if let Err(stderr) =
                self.run(self.command(&["generate-lockfile", "--quiet"], &manifest))?
            {
                if stderr.contains("failed to select a version") {
                    fs::write(&none_file, &stderr).map_err(write_error(&none_file))?;
                    return Ok(Err(format!("no published version below {below}")));
                }
                return Ok(Err(format!(
                    "cargo could not resolve it: {}",
                    last_error(&stderr)
                )));
            }
        }
        let lock = fs::read_to_string(&lockfile).map_err(|source| EditsError::Read {
            path: lockfile.clone(),
            source,
        })?;
        let Some(version) = root_dependency_version(&lock, name) else {
            return Ok(Err(format!(
                "{} does not pin {name} (a crate without a library?)",
                lockfile.display()
            )));
        };
        let mut unpacked = self.unpacked(name, &version);
        if unpacked.is_none() {
            let mut args = vec!["fetch", "--quiet"];
            if let Some(host) = &self.host {
                args.extend(["--target", host]);
            }
            if let Err(stderr) = self.run(self.command(&args, &manifest))? {
                return Ok(Err(format!("cargo fetch failed: {}", last_error(&stderr))));
            }
            unpacked = self.unpacked(name, &version);
        }
        let Some(dir) = unpacked else {
            return Ok(Err(format!(
                "{name} {version} is not unpacked under {}",
                self.home.join("registry/src").display()
            )));
        };
        let crate_bytes = self
            .registry_dirs("cache")
            .iter()
            .find_map(|cache| fs::metadata(cache.join(format!("{name}-{version}.crate"))).ok())
            .map_or(0, |meta| meta.len());
        Ok(Ok(Resolved {
            version,
            dir,
            crate_bytes,
        }))
    }

    /// `$CARGO_HOME/registry/<what>/*`, sorted.
    fn registry_dirs(&self, what: &str) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = fs::read_dir(self.home.join("registry").join(what))
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .collect();
        dirs.sort();
        dirs
    }

    fn unpacked(&self, name: &str, version: &str) -> Option<PathBuf> {
        self.registry_dirs("src")
            .into_iter()
            .map(|src| src.join(format!("{name}-{version}")))
            .find(|dir| dir.join("Cargo.toml").is_file())
    }
}

/// The last `error:` line of cargo's output (or its last line).
fn last_error(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .rev()
        .find(|line| line.starts_with("error"))
        .or(lines.last())
        .map_or_else(String::new, |line| line.to_string())
}

/// The version of `name` that the scratch package depends on, from its `Cargo.lock`.
fn root_dependency_version(lock: &str, name: &str) -> Option<String> {
    let packages: Vec<BTreeMap<&str, Vec<&str>>> = lock
        .split("[[package]]")
        .skip(1)
        .map(|block| {
            let mut fields: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            let mut in_deps = false;
            for line in block.lines().map(str::trim) {
                if in_deps {
                    if line.starts_with(']') {
                        in_deps = false;
                    } else {
                        fields
                            .entry("dependencies")
                            .or_default()
                            .push(line.trim_matches([',', '"']));
                    }
                } else if line.starts_with("dependencies = [") {
                    in_deps = !line.ends_with(']');
                } else if let Some((key, value)) = line.split_once(" = ") {
                    fields.entry(key).or_default().push(value.trim_matches('"'));
                }
            }
            fields
        })
        .collect();
    fn field<'l>(package: &BTreeMap<&str, Vec<&'l str>>, key: &str) -> Option<&'l str> {
        package.get(key).and_then(|v| v.first().copied())
    }
    let root = packages
        .iter()
        .find(|p| field(p, "name") == Some(SCRATCH_PACKAGE))?;
    let dependency = root
        .get("dependencies")?
        .iter()
        .find(|dep| dep.split(' ').next() == Some(name))?;
    match dependency.split(' ').nth(1) {
        Some(version) => Some(version.to_string()),
        None => packages
            .iter()
            .find(|p| field(p, "name") == Some(name))
            .and_then(|p| field(p, "version"))
            .map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::root_dependency_version;

    #[test]
    fn the_scratch_packages_dependency_is_read_from_its_lockfile() {
        let lock = r#"
version = 4

[[package]]
name = "rand"
version = "0.8.5"
source = "registry+https://github.com/rust-lang/crates.io-index"
dependencies = [
 "rand_core 0.6.4",
]

[[package]]
name = "rand"
version = "0.9.0"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "redraft-edit-versions-scratch"
version = "0.0.0"
dependencies = [
 "rand 0.8.5",
]
"#;
        assert_eq!(
            root_dependency_version(lock, "rand").as_deref(),
            Some("0.8.5")
        );
        let unique = lock.replace(" \"rand 0.8.5\",", " \"rand\",").replace(
            "name = \"rand\"\nversion = \"0.9.0\"",
            "name = \"other\"\nversion = \"0.9.0\"",
        );
        assert_eq!(
            root_dependency_version(&unique, "rand").as_deref(),
            Some("0.8.5")
        );
        assert_eq!(root_dependency_version(lock, "serde"), None);
    }
}
