//! One blob's download into the cache: locked, resumable, verified, placed atomically (the
//! crate doc's "Downloads" says how).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use sha2::{Digest, Sha256};

use crate::cache::{is_sha256, RepoCache};
use crate::error::{Error, Result};
use crate::hub::{chain, FileMeta, Hub};
use crate::progress::Progress;

/// Attempts per download when the connection breaks (each resumes where the last stopped).
const ATTEMPTS: u32 = 5;
const CHUNK: usize = 256 * 1024;

/// What is being fetched, for messages.
pub struct Blob<'a> {
    pub repo: &'a str,
    pub file: &'a str,
    pub meta: &'a FileMeta,
}

/// Makes sure `blobs/<etag>` holds the file, downloading it if needed; returns its path.
pub fn fetch_blob(
    hub: &Hub,
    cache: &RepoCache,
    blob: &Blob<'_>,
    progress: &mut dyn Progress,
) -> Result<PathBuf> {
    let etag = blob.meta.etag.as_str();
    let target = cache.blob(etag);
    if is_whole(&target, blob.meta.size) {
        return Ok(target);
    }
    let lock_path = cache.lock_file(etag);
    for dir in [target.parent(), lock_path.parent()].into_iter().flatten() {
        std::fs::create_dir_all(dir).map_err(|e| Error::cache_write("create", dir, e))?;
    }
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::cache_write("open", &lock_path, e))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            // Another redraft or huggingface_hub is fetching this very blob: say so, then
            // wait for it (a killed one releases the lock, and its partial file is resumed).
            progress.waiting(blob.file);
            lock.lock().map_err(|e| Error::io("lock", &lock_path, e))?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock", &lock_path, e)),
    }
    // Whoever held the lock before may have finished this very blob.
    if is_whole(&target, blob.meta.size) {
        return Ok(target);
    }
    if target.symlink_metadata().is_ok() {
        // A blob of another size than the Hub's is not one redraft placed (it places only
        // verified files): cut short by a full disk or another tool's killed copy. Removed
        // under the lock, so no other download of it is under way.
        std::fs::remove_file(&target)
            .map_err(|e| Error::cache_write("remove the damaged", &target, e))?;
    }
    let partial = cache.incomplete(etag);
    progress.start(blob.file, blob.meta.size);
    let outcome = download(hub, blob, &partial, progress);
    progress.finish();
    outcome?;
    std::fs::rename(&partial, &target)
        .map_err(|e| Error::cache_write("move into place", &target, e))?;
    drop(lock);
    Ok(target)
}

/// A blob in place with the Hub's size (any size when the Hub gives none).
fn is_whole(blob: &Path, size: Option<u64>) -> bool {
    std::fs::metadata(blob).is_ok_and(|m| m.is_file() && size.is_none_or(|size| size == m.len()))
}

/// Fills `partial` with the whole, verified file.
fn download(hub: &Hub, blob: &Blob<'_>, partial: &Path, progress: &mut dyn Progress) -> Result<()> {
    let verify = is_sha256(&blob.meta.etag).then(|| blob.meta.etag.to_ascii_lowercase());
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(partial)
        .map_err(|e| Error::cache_write("open", partial, e))?;
    let mut hasher = Sha256::new();
    let mut have = hash_existing(&mut file, partial, &mut hasher)?;
    if blob.meta.size.is_some_and(|size| have > size) {
        have = restart(&mut file, partial, &mut hasher)?;
    }
    if have > 0 {
        progress.resume(have);
    }

    let mut last_failure = String::new();
    let mut finished = false;
    let mut had = None;
    for attempt in 0..ATTEMPTS {
        if blob.meta.size == Some(have) {
            finished = true;
            break;
        }
        // Back off only when the last attempt got nowhere; one that moved on resumes at once.
        if had == Some(have) {
            std::thread::sleep(Duration::from_millis(200 << attempt.min(4)));
        }
        had = Some(have);
        let response = match hub.open(&blob.meta.location, have) {
            Ok(response) => response,
            Err(Error::Network { message, .. }) => {
                last_failure = message;
                continue;
            }
            Err(other) => return Err(other),
        };
        match response.status() {
            StatusCode::PARTIAL_CONTENT => {
                if content_range_start(&response) != Some(have) {
                    // Not the bytes asked for: start over rather than splice wrong data.
                    have = restart(&mut file, partial, &mut hasher)?;
                    progress.start(blob.file, blob.meta.size);
                    last_failure = "the server sent another range than asked".to_string();
                    continue;
                }
            }
            StatusCode::OK => {
                if have > 0 {
                    have = restart(&mut file, partial, &mut hasher)?;
                    progress.start(blob.file, blob.meta.size);
                }
            }
            StatusCode::RANGE_NOT_SATISFIABLE => {
                have = restart(&mut file, partial, &mut hasher)?;
                progress.start(blob.file, blob.meta.size);
                last_failure = "the server refused to resume".to_string();
                continue;
            }
            status if crate::hub::is_busy(status) => {
                return Err(crate::hub::busy_error(
                    &response,
                    &blob.meta.location,
                    hub.has_token(),
                ))
            }
            status => {
                return Err(Error::Http {
                    url: blob.meta.location.to_string(),
                    status: status.as_u16(),
                    detail: format!(" while downloading {}", blob.file),
                })
            }
        }
        let expected = blob
            .meta
            .size
            .or_else(|| response.content_length().map(|n| n + have));
        match copy_body(response, &mut file, &mut hasher, progress) {
            Ok(copied) => {
                have += copied;
                if expected.is_none_or(|size| have >= size) {
                    finished = true;
                    break;
                }
                last_failure = "the connection closed early".to_string();
            }
            Err(CopyError::Read(e, copied)) => {
                have += copied;
                last_failure = chain(&e);
            }
            Err(CopyError::Write(e)) => return Err(Error::cache_write("write", partial, e)),
        }
    }
    file.sync_all()
        .map_err(|e| Error::cache_write("write", partial, e))?;
    drop(file);
    if !finished {
        return Err(Error::Interrupted {
            repo: blob.repo.to_string(),
            file: blob.file.to_string(),
            got: have,
            expected: blob.meta.size.map_or("?".to_string(), |s| s.to_string()),
            message: last_failure,
        });
    }
    if let Some(size) = blob.meta.size.filter(|size| *size != have) {
        discard(partial);
        return Err(Error::SizeMismatch {
            repo: blob.repo.to_string(),
            file: blob.file.to_string(),
            expected: size,
            actual: have,
        });
    }
    if let Some(expected) = verify {
        let actual = hex(&hasher.finalize());
        if actual != expected {
            discard(partial);
            return Err(Error::Checksum {
                repo: blob.repo.to_string(),
                file: blob.file.to_string(),
                expected,
                actual,
            });
        }
    }
    Ok(())
}

enum CopyError {
    /// The connection failed after this many bytes were written.
    Read(std::io::Error, u64),
    Write(std::io::Error),
}

fn copy_body(
    mut body: impl Read,
    file: &mut File,
    hasher: &mut Sha256,
    progress: &mut dyn Progress,
) -> std::result::Result<u64, CopyError> {
    let mut buffer = vec![0u8; CHUNK];
    let mut copied = 0u64;
    loop {
        let n = match body.read(&mut buffer) {
            Ok(0) => return Ok(copied),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e, copied)),
        };
        file.write_all(&buffer[..n]).map_err(CopyError::Write)?;
        hasher.update(&buffer[..n]);
        copied += n as u64;
        progress.advance(n as u64);
    }
}

/// Hashes what an earlier run left in the partial file; returns its length, with the file
/// positioned at its end for appending.
fn hash_existing(file: &mut File, path: &Path, hasher: &mut Sha256) -> Result<u64> {
    let mut buffer = vec![0u8; CHUNK];
    let mut total = 0u64;
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(|e| Error::io("read", path, e))?;
        if n == 0 {
            return Ok(total);
        }
        hasher.update(&buffer[..n]);
        total += n as u64;
    }
}

/// Empties the partial file (the server is sending the whole file again).
fn restart(file: &mut File, path: &Path, hasher: &mut Sha256) -> Result<u64> {
    file.set_len(0)
        .map_err(|e| Error::cache_write("truncate", path, e))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| Error::cache_write("truncate", path, e))?;
    *hasher = Sha256::new();
    Ok(0)
}

fn discard(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// The first byte of `Content-Range: bytes FIRST-LAST/TOTAL`.
fn content_range_start(response: &reqwest::blocking::Response) -> Option<u64> {
    let value = response
        .headers()
        .get(reqwest::header::CONTENT_RANGE)?
        .to_str()
        .ok()?;
    let range = value.trim().strip_prefix("bytes")?.trim_start();
    range.split('-').next()?.trim().parse().ok()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
