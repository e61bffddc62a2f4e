//! A Hugging Face Hub on loopback, serving repositories held in memory: the model-info API by
//! revision, `resolve` URLs (LFS files answer with a relative 302 to `/cdn/<sha256>` whose own
//! headers carry `X-Linked-Etag`, `X-Linked-Size` and `X-Repo-Commit`, as the real Hub's do),
//! `Range` requests on the CDN path, and faults on demand: a body cut short, a corrupted body,
//! `Range` ignored, a slow body, a required token, a gated or renamed repository, busy answers
//! (429, 5xx) with `Retry-After`, a CDN on another origin. Every request is recorded.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};

/// One request as the fake saw it (header names lowercased).
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    /// (repo, commit) -> path -> content.
    commits: HashMap<(String, String), BTreeMap<String, Vec<u8>>>,
    /// (repo, revision) -> commit.
    refs: HashMap<(String, String), String>,
    requests: Vec<Recorded>,
    /// file path -> (body bytes sent before the connection drops, how many more times).
    cut: HashMap<String, (usize, usize)>,
    corrupt: Vec<String>,
    ignore_range: bool,
    slow: Option<Duration>,
    token: Option<String>,
    /// Repositories answered 403 `GatedRepo`.
    gated: Vec<String>,
    /// old repo -> new repo: the old name's API and resolve URLs answer a relative 307.
    renamed: HashMap<String, String>,
    /// (status, Retry-After, how many more times): the next requests are answered so.
    busy: Option<(u16, Option<u64>, usize)>,
    /// Where LFS files are served from instead of this server's `/cdn/`.
    cdn: Option<String>,
}

/// The server; it runs until the test process ends.
pub struct FakeHub {
    pub url: String,
    state: Arc<Mutex<State>>,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Files the Hub stores in LFS (and so names by sha256 and serves from a CDN).
pub fn is_lfs(path: &str) -> bool {
    path.ends_with(".safetensors") || path.ends_with(".gguf") || path.ends_with(".bin")
}

/// The ETag the fake gives a file: the sha256 for LFS files, a 40-hex git-like id otherwise.
pub fn etag_of(path: &str, content: &[u8]) -> String {
    if is_lfs(path) {
        sha256_hex(content)
    } else {
        let mut blob = format!("blob {}\0", content.len()).into_bytes();
        blob.extend_from_slice(content);
        sha256_hex(&blob)[..40].to_string()
    }
}

impl FakeHub {
    pub fn start() -> FakeHub {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        FakeHub { url, state }
    }

    /// Adds commit `commit` of `repo` with `files`.
    pub fn add_commit(&self, repo: &str, commit: &str, files: &[(&str, Vec<u8>)]) {
        let files = files
            .iter()
            .map(|(p, c)| (p.to_string(), c.clone()))
            .collect();
        self.state()
            .commits
            .insert((repo.to_string(), commit.to_string()), files);
    }

    pub fn set_ref(&self, repo: &str, revision: &str, commit: &str) {
        self.state()
            .refs
            .insert((repo.to_string(), revision.to_string()), commit.to_string());
    }

    /// The next `times` downloads of `path` stop after `bytes` bytes of body.
    pub fn cut_after(&self, path: &str, bytes: usize, times: usize) {
        self.state().cut.insert(path.to_string(), (bytes, times));
    }

    /// Every download of `path` has one byte flipped (its headers still name the true sha256).
    pub fn corrupt(&self, path: &str) {
        self.state().corrupt.push(path.to_string());
    }

    /// Answer `Range` requests with the whole file and 200.
    pub fn ignore_range(&self) {
        self.state().ignore_range = true;
    }

    /// Send CDN bodies in 16 KiB pieces, `delay` apart.
    pub fn slow(&self, delay: Duration) {
        self.state().slow = Some(delay);
    }

    /// Answer 401 to API and resolve requests without `Authorization: Bearer <token>`.
    pub fn require_token(&self, token: &str) {
        self.state().token = Some(token.to_string());
    }

    /// Answer 403 with `X-Error-Code: GatedRepo` for `repo`, token or not (terms not accepted).
    pub fn gate(&self, repo: &str) {
        self.state().gated.push(repo.to_string());
    }

    /// `old`'s API and resolve URLs redirect (307, relative) to `new`'s, as the Hub does for a
    /// renamed repository or a name in another case.
    pub fn rename(&self, old: &str, new: &str) {
        self.state()
            .renamed
            .insert(old.to_string(), new.to_string());
    }

    /// The next `times` requests get `status`, with `Retry-After: retry_after` when given.
    pub fn busy(&self, status: u16, retry_after: Option<u64>, times: usize) {
        self.state().busy = Some((status, retry_after, times));
    }

    /// LFS files redirect to `base` (another fake's URL: another origin) instead of here.
    pub fn cdn_at(&self, base: &str) {
        self.state().cdn = Some(base.to_string());
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state().requests.clone()
    }

    pub fn clear_requests(&self) {
        self.state().requests.clear();
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake hub state")
    }
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Drop the connection after this many body bytes.
    cut: Option<usize>,
    slow: Option<Duration>,
}

impl Answer {
    fn new(status: u16, body: impl Into<Vec<u8>>) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: body.into(),
            cut: None,
            slow: None,
        }
    }

    fn header(mut self, name: &str, value: impl ToString) -> Answer {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return;
    };
    let (method, path) = (method.to_string(), path.to_string());
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let request = Recorded {
        method,
        path,
        headers,
    };
    let answer = {
        let mut state = state.lock().expect("fake hub state");
        state.requests.push(request.clone());
        answer(&mut state, &request)
    };
    write_answer(stream, &request.method, answer);
}

fn answer(state: &mut State, request: &Recorded) -> Answer {
    let segments: Vec<String> = request.path.split('/').skip(1).map(decode).collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    if let Some((status, retry_after, times)) = &mut state.busy {
        if *times > 0 {
            *times -= 1;
            let answer = Answer::new(*status, "busy");
            return match retry_after {
                Some(seconds) => answer.header("Retry-After", seconds),
                None => answer,
            };
        }
    }
    let sent = request.header("authorization");
    let unauthorized = match &state.token {
        Some(token) if sent == Some(&format!("Bearer {token}")) => None,
        // What the Hub says to a token it does not know.
        Some(_) if sent.is_some() => Some(Answer::new(401, "invalid credentials").header(
            "X-Error-Message",
            "Invalid credentials in Authorization header",
        )),
        Some(_) => Some(Answer::new(401, "unauthorized")),
        None => None,
    };
    let repo_of = |segments: &[&str]| match segments {
        ["api", "models", org, repo, ..] | [org, repo, "resolve", ..] => {
            Some(format!("{org}/{repo}"))
        }
        _ => None,
    };
    if let Some(repo) = repo_of(&segments) {
        if let Some(new) = state.renamed.get(&repo) {
            let location = request
                .path
                .replacen(&format!("/{repo}/"), &format!("/{new}/"), 1);
            return Answer::new(307, "moved").header("Location", location);
        }
        if state.gated.contains(&repo) {
            return Answer::new(403, "gated")
                .header("X-Error-Code", "GatedRepo")
                .header(
                    "X-Error-Message",
                    format!("Access to model {repo} is restricted"),
                );
        }
    }
    match segments.as_slice() {
        ["api", "models", org, repo, "revision", revision] => {
            if let Some(refusal) = unauthorized {
                return refusal;
            }
            let repo = format!("{org}/{repo}");
            let Some((commit, files)) = lookup(state, &repo, revision) else {
                return Answer::new(404, "not found").header("X-Error-Code", "RepoNotFound");
            };
            let siblings: Vec<_> = files
                .keys()
                .map(|f| serde_json::json!({ "rfilename": f }))
                .collect();
            let body = serde_json::json!({ "id": repo, "sha": commit, "siblings": siblings });
            Answer::new(200, body.to_string()).header("Content-Type", "application/json")
        }
        [org, repo, "resolve", revision, path @ ..] => {
            if let Some(refusal) = unauthorized {
                return refusal;
            }
            let repo = format!("{org}/{repo}");
            let path = path.join("/");
            let Some((commit, files)) = lookup(state, &repo, revision) else {
                return Answer::new(404, "not found").header("X-Error-Code", "RevisionNotFound");
            };
            let Some(content) = files.get(&path) else {
                return Answer::new(404, "not found").header("X-Error-Code", "EntryNotFound");
            };
            let etag = etag_of(&path, content);
            if is_lfs(&path) {
                // The CDN's own ETag differs; the file's identity is in the X-Linked headers.
                let cdn = state.cdn.clone().unwrap_or_default();
                Answer::new(302, format!("Found. Redirecting to /cdn/{etag}"))
                    .header(
                        "Location",
                        format!("{cdn}/cdn/{etag}?file={}", encode(&path)),
                    )
                    .header("X-Repo-Commit", &commit)
                    .header("X-Linked-Etag", format!("\"{etag}\""))
                    .header("X-Linked-Size", content.len())
                    .header("ETag", "\"not-the-file\"")
            } else {
                let mut answer = Answer::new(200, content.clone())
                    .header("X-Repo-Commit", &commit)
                    .header("ETag", format!("\"{etag}\""));
                apply_faults(state, &path, &mut answer);
                answer
            }
        }
        ["cdn", rest] => {
            let (sha, file) = rest.split_once("?file=").unwrap_or((rest, ""));
            let Some(content) = state
                .commits
                .values()
                .flat_map(|files| files.values())
                .find(|content| sha256_hex(content) == sha)
                .cloned()
            else {
                return Answer::new(404, "no such blob");
            };
            let start = request
                .header("range")
                .and_then(|r| r.strip_prefix("bytes="))
                .and_then(|r| r.strip_suffix('-'))
                .and_then(|r| r.parse::<usize>().ok())
                .filter(|_| !state.ignore_range);
            let mut answer = match start {
                Some(start) if start >= content.len() => Answer::new(416, "")
                    .header("Content-Range", format!("bytes */{}", content.len())),
                Some(start) => Answer::new(206, content[start..].to_vec()).header(
                    "Content-Range",
                    format!("bytes {start}-{}/{}", content.len() - 1, content.len()),
                ),
                None => Answer::new(200, content),
            };
            answer = answer
                .header("Accept-Ranges", "bytes")
                .header("ETag", "\"cdn-etag\"");
            answer.slow = state.slow;
            apply_faults(state, &decode(file), &mut answer);
            answer
        }
        _ => Answer::new(404, "no route"),
    }
}

fn apply_faults(state: &mut State, path: &str, answer: &mut Answer) {
    if state.corrupt.iter().any(|p| p == path) && !answer.body.is_empty() {
        let middle = answer.body.len() / 2;
        answer.body[middle] ^= 0xff;
    }
    if let Some((bytes, times)) = state.cut.get_mut(path) {
        if *times > 0 {
            *times -= 1;
            answer.cut = Some(*bytes);
        }
    }
}

fn lookup(
    state: &State,
    repo: &str,
    revision: &str,
) -> Option<(String, BTreeMap<String, Vec<u8>>)> {
    let commit = state
        .refs
        .get(&(repo.to_string(), revision.to_string()))
        .cloned()
        .unwrap_or_else(|| revision.to_string());
    let files = state.commits.get(&(repo.to_string(), commit.clone()))?;
    Some((commit, files.clone()))
}

fn write_answer(mut stream: TcpStream, method: &str, answer: Answer) {
    let mut head = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", answer.status);
    head.push_str(&format!("Content-Length: {}\r\n", answer.body.len()));
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    if stream.write_all(head.as_bytes()).is_err() || method == "HEAD" {
        return;
    }
    let body = match answer.cut {
        Some(cut) => &answer.body[..cut.min(answer.body.len())],
        None => &answer.body[..],
    };
    let piece = if answer.slow.is_some() {
        16 * 1024
    } else {
        body.len().max(1)
    };
    for chunk in body.chunks(piece) {
        if stream.write_all(chunk).is_err() {
            return;
        }
        let _ = stream.flush();
        if let Some(delay) = answer.slow {
            std::thread::sleep(delay);
        }
    }
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Both);
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Deterministic bytes that do not repeat in short cycles (so a corrupted or misplaced range
/// changes the sha256).
pub fn weights(len: usize, seed: u32) -> Vec<u8> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 24) as u8
        })
        .collect()
}
