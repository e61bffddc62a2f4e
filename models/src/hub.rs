//! The Hugging Face Hub's HTTP API, the three calls redraft needs:
//!
//! - `GET {endpoint}/api/models/{repo}/revision/{rev}`: the commit sha and the file list;
//! - `HEAD {endpoint}/{repo}/resolve/{commit}/{path}`: a file's ETag (`X-Linked-Etag`, the
//!   sha256, for LFS files), size and download location, read from the first answer even when
//!   it is a redirect to a CDN (as huggingface_hub's `get_hf_file_metadata` does);
//! - `GET` of that location, from a byte offset when resuming.
//!
//! Redirects are followed by hand so that the token goes only to the endpoint's own origin,
//! never to a CDN (whose URLs are pre-signed). The API's own redirects (a renamed repository, a
//! name in another case) are followed too, as huggingface_hub follows them.
//!
//! A busy server (429, 500, 502, 503, 504) is asked again a few times, after its `Retry-After`
//! when it gives one no longer than [`MAX_RETRY_WAIT`]; a longer wait is the error's advice.

use std::time::Duration;

use reqwest::blocking::{Client, Response};
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};

use crate::cache::{is_commit, is_safe_etag};
use crate::error::{Error, Result};
use crate::settings::{HfToken, Settings};

const MAX_REDIRECTS: usize = 10;
const MAX_INFO_BYTES: u64 = 64 << 20;
/// Times a busy answer is asked again.
const BUSY_RETRIES: u32 = 3;
/// The longest `Retry-After` waited out; a server asking for more gets an error saying so.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);

/// A blocking client for one Hub endpoint.
pub struct Hub {
    http: Client,
    endpoint: Url,
    endpoint_text: String,
    token: Option<HfToken>,
}

/// A revision's commit and files.
#[derive(Debug, Clone)]
pub struct RepoInfo {
    pub commit: String,
    pub files: Vec<String>,
}

/// What a `HEAD` on a file's resolve URL says.
#[derive(Debug, Clone)]
pub struct FileMeta {
    /// The blob's name in the cache: the sha256 for LFS files, the git blob sha otherwise.
    pub etag: String,
    /// The file's size, when the Hub says it (`X-Linked-Size`, or the length of a direct answer).
    pub size: Option<u64>,
    /// Where to `GET` the bytes (the CDN location of a redirect).
    pub location: Url,
}

impl Hub {
    pub fn new(settings: &Settings) -> Result<Hub> {
        let endpoint_text = settings.endpoint.trim_end_matches('/').to_string();
        let endpoint = Url::parse(&endpoint_text).map_err(|e| Error::InvalidEndpoint {
            value: endpoint_text.clone(),
            reason: e.to_string(),
        })?;
        // reqwest is built without a default TLS provider (that would be aws-lc-rs); install
        // ring's, as the rest of redraft does. A provider installed first by the caller stays.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = Client::builder()
            .user_agent(concat!("redraft/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(30))
            // In the blocking client this bounds the wait for the headers and for each read,
            // not the whole download.
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Error::Network {
                url: endpoint_text.clone(),
                message: chain(&e),
            })?;
        Ok(Hub {
            http,
            endpoint,
            endpoint_text,
            token: settings.token.clone(),
        })
    }

    /// `sha` and `siblings` of `GET /api/models/{repo}/revision/{revision}`.
    pub fn repo_info(&self, repo: &str, revision: &str) -> Result<RepoInfo> {
        #[derive(serde::Deserialize)]
        struct Info {
            sha: Option<String>,
            #[serde(default)]
            siblings: Vec<Sibling>,
        }
        #[derive(serde::Deserialize)]
        struct Sibling {
            rfilename: String,
        }
        let url = self.url(&format!("api/models/{repo}/revision/{}", encode(revision)))?;
        let (response, url) = self.follow(reqwest::Method::GET, &url, 0)?;
        let response = self.check(response, &url, repo, revision)?;
        let mut body = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(response, MAX_INFO_BYTES),
            &mut body,
        )
        .map_err(|e| Error::Network {
            url: url.to_string(),
            message: e.to_string(),
        })?;
        let info: Info = serde_json::from_slice(&body).map_err(|e| Error::Malformed {
            url: url.to_string(),
            what: e.to_string(),
        })?;
        let commit = info
            .sha
            .filter(|sha| is_commit(sha))
            .ok_or_else(|| Error::Malformed {
                url: url.to_string(),
                what: "no commit sha".to_string(),
            })?;
        Ok(RepoInfo {
            commit,
            files: info.siblings.into_iter().map(|s| s.rfilename).collect(),
        })
    }

    /// The metadata of `path` at `commit`: a `HEAD` that stops at the first answer carrying an
    /// ETag (a CDN redirect's own headers count), following only redirects without one (a
    /// renamed repository).
    pub fn file_meta(&self, repo: &str, commit: &str, path: &str) -> Result<FileMeta> {
        let mut url = self.resolve_url(repo, commit, path)?;
        for _ in 0..MAX_REDIRECTS {
            let response = self.send(reqwest::Method::HEAD, &url, None)?;
            let headers = response.headers();
            let etag = header_text(headers, "x-linked-etag")
                .or_else(|| header_text(headers, header::ETAG.as_str()))
                .map(normalize_etag);
            let status = response.status();
            if status.is_redirection() && etag.is_none() {
                url = location(&response, &url)?;
                continue;
            }
            let response = self.check(response, &url, repo, commit)?;
            let headers = response.headers();
            let etag = etag
                .filter(|e| is_safe_etag(e))
                .ok_or_else(|| Error::Malformed {
                    url: url.to_string(),
                    what: "no usable ETag header".to_string(),
                })?;
            // A redirect's own Content-Length is the length of its (empty) body, not the file's.
            let size = header_text(headers, "x-linked-size")
                .or_else(|| {
                    status
                        .is_success()
                        .then(|| header_text(headers, header::CONTENT_LENGTH.as_str()))
                        .flatten()
                })
                .and_then(|s| s.parse().ok());
            let location = if status.is_redirection() {
                location(&response, &url)?
            } else {
                url.clone()
            };
            return Ok(FileMeta {
                etag,
                size,
                location,
            });
        }
        Err(Error::Malformed {
            url: url.to_string(),
            what: "too many redirects".to_string(),
        })
    }

    /// `GET url` from byte `from` (a `Range` request when `from > 0`), following redirects.
    /// The caller checks the status (200, 206 or 416).
    pub fn open(&self, url: &Url, from: u64) -> Result<Response> {
        self.follow(reqwest::Method::GET, url, from)
            .map(|(response, _)| response)
    }

    /// `method url` (from byte `from` when `from > 0`), following redirects; the last answer
    /// and its URL.
    fn follow(&self, method: reqwest::Method, url: &Url, from: u64) -> Result<(Response, Url)> {
        let mut url = url.clone();
        for _ in 0..MAX_REDIRECTS {
            let response = self.send(method.clone(), &url, (from > 0).then_some(from))?;
            if !response.status().is_redirection() {
                return Ok((response, url));
            }
            url = location(&response, &url)?;
        }
        Err(Error::Malformed {
            url: url.to_string(),
            what: "too many redirects".to_string(),
        })
    }

    /// Whether requests carry a token (for the advice in errors).
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// `text` with the token, should a server echo it, cut out.
    fn redact(&self, text: &str) -> String {
        match &self.token {
            Some(token) => text.replace(token.secret(), "<token>"),
            None => text.to_string(),
        }
    }

    fn resolve_url(&self, repo: &str, commit: &str, path: &str) -> Result<Url> {
        let path: Vec<String> = path.split('/').map(encode).collect();
        self.url(&format!(
            "{repo}/resolve/{}/{}",
            encode(commit),
            path.join("/")
        ))
    }

    fn url(&self, path: &str) -> Result<Url> {
        let text = format!("{}/{path}", self.endpoint_text);
        Url::parse(&text).map_err(|e| Error::Malformed {
            url: text,
            what: e.to_string(),
        })
    }

    /// One request, asked again while the server says it is busy (see the module doc).
    fn send(&self, method: reqwest::Method, url: &Url, from: Option<u64>) -> Result<Response> {
        let mut retries = 0;
        loop {
            let response = self.send_once(method.clone(), url, from)?;
            if !is_busy(response.status()) || retries == BUSY_RETRIES {
                return Ok(response);
            }
            let wait = match retry_after(&response) {
                Some(wait) if wait > MAX_RETRY_WAIT => return Ok(response),
                Some(wait) => wait,
                None => Duration::from_secs(1 << retries),
            };
            drop(response);
            std::thread::sleep(wait);
            retries += 1;
        }
    }

    fn send_once(&self, method: reqwest::Method, url: &Url, from: Option<u64>) -> Result<Response> {
        let mut request = self
            .http
            .request(method, url.clone())
            .header(header::ACCEPT_ENCODING, "identity");
        if let Some(from) = from {
            request = request.header(header::RANGE, format!("bytes={from}-"));
        }
        if let Some(token) = self
            .token
            .as_ref()
            .filter(|_| same_origin(url, &self.endpoint))
        {
            if let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {}", token.secret())) {
                value.set_sensitive(true);
                request = request.header(header::AUTHORIZATION, value);
            }
        }
        request.send().map_err(|e| Error::Network {
            url: url.to_string(),
            message: chain(&e),
        })
    }

    /// Turns an error status into the error the user can act on.
    fn check(&self, response: Response, url: &Url, repo: &str, revision: &str) -> Result<Response> {
        let status = response.status();
        if status.is_success() || status.is_redirection() {
            return Ok(response);
        }
        let has_token = self.token.is_some();
        if is_busy(status) {
            return Err(busy_error(&response, url, has_token));
        }
        match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                let headers = response.headers();
                let gated = header_text(headers, "x-error-code").as_deref() == Some("GatedRepo");
                let hint = match (gated, has_token, status) {
                    (true, true, _) => {
                        "; it is gated: accept its terms on its Hub page, signed in as the \
                         token's owner"
                    }
                    (true, false, _) => {
                        "; it is gated: accept its terms on its Hub page, then set HF_TOKEN to a \
                         token of that account"
                    }
                    // The Hub answers 401 to a token it does not know (mistyped, revoked,
                    // expired); one it knows but that may not read the repository gets 403.
                    (false, true, StatusCode::UNAUTHORIZED) => {
                        "; the Hub did not accept the token (HF_TOKEN, or the one `hf auth \
                         login` saved): check that it is whole and not revoked, or check the name"
                    }
                    (false, true, _) => {
                        "; check the name, and for a gated repository accept its terms on its Hub \
                         page"
                    }
                    (false, false, _) => {
                        "; check the name, or set HF_TOKEN if the repository is gated or private"
                    }
                };
                let detail = header_text(headers, "x-error-message")
                    .map(|m| format!(": {}", self.redact(&m)))
                    .unwrap_or_default();
                Err(Error::Unauthorized {
                    repo: repo.to_string(),
                    endpoint: self.endpoint_text.clone(),
                    status: status.as_u16(),
                    detail,
                    hint,
                })
            }
            StatusCode::NOT_FOUND => Err(Error::NotFound {
                repo: repo.to_string(),
                revision: revision.to_string(),
                endpoint: self.endpoint_text.clone(),
                hint: if has_token {
                    "; check the repository name and the revision"
                } else {
                    "; check the repository name and the revision, or set HF_TOKEN if it is private"
                },
            }),
            _ => {
                let detail = header_text(response.headers(), "x-error-message")
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                Err(Error::Http {
                    url: url.to_string(),
                    status: status.as_u16(),
                    detail,
                })
            }
        }
    }
}

/// A status that says "not now" rather than "no".
pub fn is_busy(status: StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 500 | 502 | 503 | 504)
}

/// `Retry-After` in seconds (an HTTP date is not read: the default back-off applies).
fn retry_after(response: &Response) -> Option<Duration> {
    header_text(response.headers(), header::RETRY_AFTER.as_str())?
        .trim()
        .parse()
        .ok()
        .map(Duration::from_secs)
}

/// The error for a busy answer that outlasted the retries (or asked for a long wait).
pub fn busy_error(response: &Response, url: &Url, has_token: bool) -> Error {
    let status = response.status();
    let mut advice = match retry_after(response) {
        Some(wait) if wait > MAX_RETRY_WAIT => format!(
            " and asks to wait {} s; run again after that",
            wait.as_secs()
        ),
        _ => format!(" {} times in a row; run again later", BUSY_RETRIES + 1),
    };
    if status == StatusCode::TOO_MANY_REQUESTS && !has_token {
        advice.push_str(" (requests with HF_TOKEN set get a higher rate limit)");
    }
    Error::Busy {
        url: url.to_string(),
        status: status.as_u16(),
        advice,
    }
}

fn location(response: &Response, base: &Url) -> Result<Url> {
    let target = header_text(response.headers(), header::LOCATION.as_str()).ok_or_else(|| {
        Error::Malformed {
            url: base.to_string(),
            what: "a redirect without Location".to_string(),
        }
    })?;
    base.join(&target).map_err(|e| Error::Malformed {
        url: base.to_string(),
        what: e.to_string(),
    })
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name)?.to_str().ok().map(str::to_string)
}

/// `W/"abc"` -> `abc`.
pub fn normalize_etag(etag: String) -> String {
    let etag = etag.trim();
    let etag = etag.strip_prefix("W/").unwrap_or(etag);
    etag.trim_matches('"').to_string()
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// Percent-encodes everything but RFC 3986's unreserved characters (a revision's `/` too, as
/// huggingface_hub does).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// An error and its causes on one line (reqwest's own message is only the outermost).
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let shown = cause.to_string();
        if !text.contains(&shown) {
            text.push_str(": ");
            text.push_str(&shown);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_and_encoding() {
        assert_eq!(normalize_etag("W/\"abc\"".to_string()), "abc");
        assert_eq!(normalize_etag("\"abc\"".to_string()), "abc");
        assert_eq!(encode("refs/pr/1"), "refs%2Fpr%2F1");
        assert_eq!(encode("v1.0_a-b~"), "v1.0_a-b~");
    }

    #[test]
    fn token_goes_to_the_endpoint_origin_only() {
        let hub = Url::parse("https://huggingface.co").unwrap();
        assert!(same_origin(
            &Url::parse("https://huggingface.co:443/x").unwrap(),
            &hub
        ));
        assert!(!same_origin(
            &Url::parse("https://cdn-lfs.hf.co/x").unwrap(),
            &hub
        ));
        assert!(!same_origin(
            &Url::parse("http://huggingface.co/x").unwrap(),
            &hub
        ));
    }
}
