//! The task schema: HumanEval-infilling JSON Lines (plain or gzip), one fill-in-the-middle task
//! per line. Every builder writes it and every scorer reads it, so tasks from OpenAI's files, the
//! HumanEvalPack-Rust builder and `--from-dir` are interchangeable.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One task: `prompt` + middle + `suffix` is the program; `test` checks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub task_id: String,
    /// The code before the middle (the prefix).
    pub prompt: String,
    #[serde(default)]
    pub suffix: String,
    /// The middle that was cut out.
    pub canonical_solution: String,
    /// Python: defines `check(candidate)`; Rust: a `#[cfg(test)]` module. Empty: no execution,
    /// the task is scored by exact match and edit similarity only.
    #[serde(default)]
    pub test: String,
    #[serde(default)]
    pub entry_point: String,
    /// Absent in OpenAI's files (Python, recognised by their ids); the builders always write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<TaskLanguage>,
}

/// The languages the scorer can execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskLanguage {
    Python,
    Rust,
}

impl std::str::FromStr for TaskLanguage {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<TaskLanguage, String> {
        match s {
            "python" => Ok(TaskLanguage::Python),
            "rust" => Ok(TaskLanguage::Rust),
            other => Err(format!("unknown language `{other}` (python or rust)")),
        }
    }
}

impl std::fmt::Display for TaskLanguage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TaskLanguage::Python => "python",
            TaskLanguage::Rust => "rust",
        })
    }
}

impl Task {
    /// The task's language: its own field, else `fallback` (`--language`), else what its id
    /// says (`Rust...` ids are HumanEvalPack-Rust's, `...HumanEval...` ones OpenAI's Python).
    pub fn language(&self, fallback: Option<TaskLanguage>) -> Result<TaskLanguage> {
        if let Some(language) = self.language.or(fallback) {
            return Ok(language);
        }
        if self.task_id.starts_with("Rust") {
            Ok(TaskLanguage::Rust)
        } else if self.task_id.contains("HumanEval") {
            Ok(TaskLanguage::Python)
        } else {
            Err(Error::UnknownLanguage {
                task_id: self.task_id.clone(),
            })
        }
    }

    /// Whether the task can be executed (it has a test).
    pub fn is_executable(&self) -> bool {
        !self.test.trim().is_empty()
    }
}

/// Reads a JSONL file of tasks; gzip is recognised by its magic bytes, whatever the name says.
/// Blank lines are skipped; a bad line is an error naming its number; ids must be unique.
pub fn read_tasks(path: &Path) -> Result<Vec<Task>> {
    let rows: Vec<Task> = read_jsonl(path)?;
    let mut seen = HashSet::new();
    for task in &rows {
        if !seen.insert(task.task_id.as_str()) {
            return Err(Error::Input {
                path: path.to_path_buf(),
                message: format!("task id `{}` appears twice", task.task_id),
            });
        }
    }
    Ok(rows)
}

/// Reads any JSONL file (plain or gzip) into `T`s. Every mistake names its line: one that is not
/// JSON or not an object, bytes that are not UTF-8 (serde says where in the line), a gzip stream
/// that ends early (a file cut short, whose lines before it are no whole task set).
pub fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let mut reader = open_maybe_gzip(path)?;
    let mut rows = Vec::new();
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(|e| Error::Input {
            path: path.to_path_buf(),
            message: match e.kind() {
                std::io::ErrorKind::UnexpectedEof => format!(
                    "line {number}: {e}: the gzip file is cut short (an interrupted download or copy?)"
                ),
                _ => format!("line {number}: {e}"),
            },
        })?;
        if read == 0 {
            break;
        }
        let mut text = line.trim_ascii();
        if number == 1 {
            // A byte-order mark, as some Windows editors save UTF-8.
            text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        }
        if text.is_empty() {
            continue;
        }
        // serde takes a JSON array for a struct too, field by field in order.
        if !text.starts_with(b"{") {
            return Err(Error::Input {
                path: path.to_path_buf(),
                message: format!("line {number}: not a JSON object (one row per line)"),
            });
        }
        let row = serde_json::from_slice(text).map_err(|e| Error::Input {
            path: path.to_path_buf(),
            message: format!("line {number}: {e}"),
        })?;
        rows.push(row);
    }
    Ok(rows)
}

fn open_maybe_gzip(path: &Path) -> Result<Box<dyn BufRead>> {
    let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(|e| Error::io(path, e))?;
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    Ok(if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(file)))
    } else {
        Box::new(BufReader::new(file))
    })
}

/// Writes `rows` as JSONL, gzip-compressed when the name ends in `.gz` (with a zero timestamp,
/// so the same tasks give the same bytes). Written to a temporary name, then renamed, so a
/// reader never sees half a file.
pub fn write_jsonl<T: Serialize>(path: &Path, rows: &[T]) -> Result<()> {
    let mut text = Vec::new();
    for row in rows {
        serde_json::to_writer(&mut text, row).map_err(|e| Error::Input {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        text.push(b'\n');
    }
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        let mut encoder = flate2::GzBuilder::new()
            .mtime(0)
            .write(Vec::new(), flate2::Compression::best());
        encoder.write_all(&text).map_err(|e| Error::io(path, e))?;
        encoder.finish().map_err(|e| Error::io(path, e))?
    } else {
        text
    };
    write_atomic(path, &bytes)
}

/// Writes `bytes` to a temporary file beside `path` and renames it over `path`, so a reader (or
/// a run killed mid-write) sees the old file or the new one; a failed write removes its
/// temporary file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    // The mode a plain `File::create` gives (0666 less the umask), not a temporary file's 0600.
    let mut file = tempfile::Builder::new()
        .prefix(".redraft-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|e| Error::io(path, e))?;
    file.write_all(bytes).map_err(|e| Error::io(path, e))?;
    file.as_file().sync_all().map_err(|e| Error::io(path, e))?;
    file.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}
