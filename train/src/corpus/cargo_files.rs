//! The few facts the corpus needs from Cargo's files: a crate's name, version and licence from its
//! (registry-normalised) `Cargo.toml`, the registry packages pinned by a `Cargo.lock`, and semver
//! ordering to find the newest version of a crate.
//!
//! A line-based reader, not a TOML parser: it only understands `key = "string"` lines, which is
//! all that registry-normalised manifests and lockfiles use for these keys.

use std::cmp::Ordering;

/// The `[package]` fields the corpus reads from a `Cargo.toml`.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct PackageFields {
    pub name: Option<String>,
    pub version: Option<String>,
    pub license: Option<String>,
    pub license_file: Option<String>,
}

/// Reads `name`, `version`, `license` and `license-file` from the `[package]` table.
pub(crate) fn package_fields(cargo_toml: &str) -> PackageFields {
    let mut fields = PackageFields::default();
    for (table, key, value) in string_entries(cargo_toml) {
        if table != "package" {
            continue;
        }
        let slot = match key {
            "name" => &mut fields.name,
            "version" => &mut fields.version,
            "license" => &mut fields.license,
            "license-file" => &mut fields.license_file,
            _ => continue,
        };
        slot.get_or_insert(value);
    }
    fields
}

/// The `(name, version)` of every crates.io-style registry package in a `Cargo.lock`; workspace
/// members and git dependencies have no unpacked registry source, so they are skipped.
pub(crate) fn locked_registry_packages(cargo_lock: &str) -> Vec<(String, String)> {
    #[derive(Default)]
    struct Entry {
        name: Option<String>,
        version: Option<String>,
        registry: bool,
    }
    let mut packages = Vec::new();
    let mut current: Option<Entry> = None;
    let mut finish = |entry: Option<Entry>| {
        if let Some(Entry {
            name: Some(name),
            version: Some(version),
            registry: true,
        }) = entry
        {
            packages.push((name, version));
        }
    };
    for line in cargo_lock.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            finish(current.take());
            if line == "[[package]]" {
                current = Some(Entry::default());
            }
            continue;
        }
        let (Some(entry), Some((key, value))) = (current.as_mut(), string_entry(line)) else {
            continue;
        };
        match key {
            "name" => entry.name = Some(value),
            "version" => entry.version = Some(value),
            "source" => {
                entry.registry = value.starts_with("registry+") || value.starts_with("sparse+")
            }
            _ => {}
        }
    }
    finish(current);
    packages
}

/// Every `key = "string"` line with the table it sits in (`package` for `[package]`).
fn string_entries(toml: &str) -> Vec<(&str, &str, String)> {
    let mut entries = Vec::new();
    let mut table = "";
    let mut in_multiline = false;
    for line in toml.lines() {
        let trimmed = line.trim();
        // A `"""` block (a long `description`) could hold text that looks like `key = "..."`.
        if trimmed.matches("\"\"\"").count() % 2 == 1 {
            in_multiline = !in_multiline;
            continue;
        }
        if in_multiline {
            continue;
        }
        if let Some(header) = trimmed.strip_prefix('[') {
            table = header
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim();
            continue;
        }
        if let Some((key, value)) = string_entry(trimmed) {
            entries.push((table, key, value));
        }
    }
    entries
}

/// Splits `key = "value"` (or `key = 'value'`); `None` for any other kind of line.
fn string_entry(line: &str) -> Option<(&str, String)> {
    let (key, rest) = line.split_once('=')?;
    let key = key.trim();
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return None;
    }
    let rest = rest.trim_start();
    if let Some(literal) = rest.strip_prefix('\'') {
        return Some((key, literal.split('\'').next()?.to_string()));
    }
    let mut chars = rest.strip_prefix('"')?.chars();
    let mut value = String::new();
    loop {
        match chars.next()? {
            '"' => return Some((key, value)),
            '\\' => match chars.next()? {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                c => value.push(c),
            },
            c => value.push(c),
        }
    }
}

/// Splits a registry directory name such as `proc-macro2-1.0.107` or `foo-1.0.0-rc.1` into
/// name and version: the version starts at the first `-` followed by `digits.`.
pub(crate) fn split_dir_name(dir_name: &str) -> Option<(&str, &str)> {
    dir_name.match_indices('-').find_map(|(at, _)| {
        let (name, version) = (&dir_name[..at], &dir_name[at + 1..]);
        (!name.is_empty() && Version::parse(version).is_some()).then_some((name, version))
    })
}

/// A semver version, ordered by semver precedence (build metadata ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<String>,
}

impl Version {
    pub(crate) fn parse(text: &str) -> Option<Version> {
        let text = text.split('+').next()?;
        let (core, pre) = match text.split_once('-') {
            Some((core, pre)) => (core, pre.split('.').map(str::to_string).collect()),
            None => (text, Vec::new()),
        };
        let mut numbers = core.split('.').map(|n| n.parse::<u64>().ok());
        let version = Version {
            major: numbers.next()??,
            minor: numbers.next()??,
            patch: numbers.next()??,
            pre,
        };
        numbers.next().is_none().then_some(version)
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                // A release is newer than any of its pre-releases.
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_pre(&self.pre, &other.pre),
            })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn compare_pre(a: &[String], b: &[String]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let ordering = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            (Err(_), Err(_)) => x.cmp(y),
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    a.len().cmp(&b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_package_fields_of_a_normalised_manifest() {
        let toml = r#"# THIS FILE IS AUTOMATICALLY GENERATED BY CARGO
[package]
edition = "2021"
name = "proc-macro2"
version = "1.0.107"
description = """
license = "GPL-3.0"
"""
keywords = [
    "macros",
]
license = "MIT OR Apache-2.0"

[dependencies.unicode-ident]
version = "1.0"
license = "not the package's"
"#;
        assert_eq!(
            package_fields(toml),
            PackageFields {
                name: Some("proc-macro2".into()),
                version: Some("1.0.107".into()),
                license: Some("MIT OR Apache-2.0".into()),
                license_file: None,
            }
        );
        let toml = "[package]\nname = 'odd'\nversion = \"0.1.0\"\nlicense-file = \"LICENSE\"\n";
        let fields = package_fields(toml);
        assert_eq!(fields.name.as_deref(), Some("odd"));
        assert_eq!(fields.license, None);
        assert_eq!(fields.license_file.as_deref(), Some("LICENSE"));
    }

    #[test]
    fn lockfile_lists_only_registry_packages() {
        let lock = r#"version = 4

[[package]]
name = "redraft"
version = "0.1.0"
dependencies = [
 "serde",
]

[[package]]
name = "serde"
version = "1.0.229"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "abc"

[[package]]
name = "from-git"
version = "0.2.0"
source = "git+https://example.com/x#123"

[[package]]
name = "syn"
version = "2.0.119"
source = "sparse+https://index.crates.io/"
"#;
        assert_eq!(
            locked_registry_packages(lock),
            vec![
                ("serde".to_string(), "1.0.229".to_string()),
                ("syn".to_string(), "2.0.119".to_string()),
            ]
        );
    }

    #[test]
    fn splits_registry_directory_names() {
        assert_eq!(
            split_dir_name("proc-macro2-1.0.107"),
            Some(("proc-macro2", "1.0.107"))
        );
        assert_eq!(
            split_dir_name("windows_x86_64_gnu-0.52.6"),
            Some(("windows_x86_64_gnu", "0.52.6"))
        );
        assert_eq!(
            split_dir_name("foo-2-1.0.0-rc.1"),
            Some(("foo-2", "1.0.0-rc.1"))
        );
        assert_eq!(split_dir_name("not-a-crate"), None);
    }

    #[test]
    fn orders_versions_by_semver_precedence() {
        let ordered = [
            "0.9.0",
            "1.2.0",
            "1.10.0-alpha",
            "1.10.0-alpha.1",
            "1.10.0-alpha.beta",
            "1.10.0-beta.2",
            "1.10.0-beta.11",
            "1.10.0-rc.1",
            "1.10.0",
            "2.0.0+build.5",
        ];
        let versions: Vec<Version> = ordered.iter().map(|v| Version::parse(v).unwrap()).collect();
        for pair in versions.windows(2) {
            assert!(pair[0] < pair[1], "{:?} < {:?}", pair[0], pair[1]);
        }
        assert_eq!(Version::parse("1.2"), None);
        assert_eq!(Version::parse("1.2.x"), None);
    }
}
