//! What a request must pass before its body is read: the checks that keep a keyless local server
//! (the default on loopback) out of reach of web pages, and the key check.
//!
//! - `Host` must be a name the server answers to ([`Hosts`]): loopback names, the address it
//!   listens on, and `--allow-host` names (the request target's authority counts instead when
//!   it has one, `GET http://name/path`, as RFC 9112 section 3.2.2 says). A page whose own DNS
//!   name was rebound to 127.0.0.1 sends its name, not ours (Ollama's CVE-2024-28224;
//!   llama.cpp's server and Jupyter check the same), so it is refused before it can read an
//!   answer.
//! - A request carrying `Origin` comes from a web page; unless `--allow-origin` names that page,
//!   it is refused (the page cannot read the answer anyway, but a POST would still run). With
//!   `--allow-origin`, CORS is answered for those pages only (tower-http's `CorsLayer`, preflights
//!   included); without it there are no CORS headers at all. Both compare origins as
//!   [`normalize_origin`] writes them, so whatever `admit` lets through gets its CORS headers.
//! - A JSON route's POST ([`JSON_ROUTES`]) must say it is JSON (`application/json` or `+json`):
//!   `text/plain` and form bodies are what a page may send anywhere without a preflight.
//! - Headers the server would have to guess about are 400: no or two `Host`s, two
//!   `Authorization`s or `Content-Type`s (which one counts would depend on their order), and
//!   any `Transfer-Encoding` (hyper frames a body with both it and `Content-Length` by the
//!   former and drops the latter before a handler could see it, the shape of request
//!   smuggling; JSON clients send `Content-Length`).
//! - With a key, `Authorization: Bearer KEY` on every route but `/health`.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context};
use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{header, HeaderMap, HeaderValue, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::error::{ApiError, Dialect};
use super::Shared;

/// The environment variable that holds the API key (what the README recommends: a flag's value
/// shows in the process list).
pub const KEY_VARIABLE: &str = "REDRAFT_API_KEY";

/// The host names a request's `Host` may carry.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// Lowercase names (IPv6 addresses in brackets), each with the one port it allows, or any.
    names: Vec<(String, Option<u16>)>,
    /// Listening on every address (`0.0.0.0`, `::`): any IP address is one of ours. A DNS name
    /// can be rebound; an address typed as such cannot.
    any_address: bool,
}

impl Hosts {
    /// Loopback names with any port, the address `bound` with any port, and `extra`
    /// (`--allow-host`: `NAME` for any port, `NAME:PORT` for one). The unspecified addresses
    /// count as loopback: connecting to `0.0.0.0` reaches this machine, and ollama-python sends
    /// `Host: 0.0.0.0:PORT` when `OLLAMA_HOST` is the `0.0.0.0` an Ollama server is often
    /// started with; an address typed as such cannot be rebound, and a page's request to it
    /// carries an `Origin`, refused by its own check.
    pub fn new(bound: SocketAddr, extra: &[String]) -> anyhow::Result<Hosts> {
        let loopback = ["localhost", "127.0.0.1", "[::1]", "0.0.0.0", "[::]"];
        let mut names: Vec<(String, Option<u16>)> =
            loopback.iter().map(|n| (n.to_string(), None)).collect();
        names.push((bracketed(bound.ip()), None));
        for name in extra {
            let authority = parse_authority(name).with_context(|| {
                format!("--allow-host `{name}` is not a host name (NAME or NAME:PORT; IPv6 in brackets)")
            })?;
            if authority.host().contains('*') {
                bail!(
                    "--allow-host `{name}`: wildcards are not accepted (a `Host` allow-list that \
                     lets any name in lets in web pages that rebind their name to this machine): \
                     name each host"
                );
            }
            // (`http` reads a port past 65535 as none, which here would allow every port.)
            let Ok(port) = port(&authority) else {
                bail!(
                    "--allow-host `{name}`: `{}` is not a port (0 to 65535); give NAME for any \
                     port or NAME:PORT for one",
                    authority.as_str()[authority.host().len()..].trim_start_matches(':')
                );
            };
            names.push((authority.host().to_ascii_lowercase(), port));
        }
        Ok(Hosts {
            names,
            any_address: bound.ip().is_unspecified(),
        })
    }

    /// Whether a `Host` value names this server.
    pub fn allows(&self, host: &str) -> bool {
        let Ok(authority) = parse_authority(host) else {
            return false;
        };
        let name = authority.host().to_ascii_lowercase();
        let Ok(port) = port(&authority) else {
            return false;
        };
        if self.any_address && address(&name).is_some() {
            return true;
        }
        self.names
            .iter()
            .any(|(allowed, only)| *allowed == name && only.is_none_or(|p| Some(p) == port))
    }
}

/// `host[:port]` as a `Host` header carries it (no user, no path).
fn parse_authority(text: &str) -> anyhow::Result<Authority> {
    let authority = Authority::from_str(text.trim())?;
    if authority.as_str().contains('@') || authority.host().is_empty() {
        bail!("not a host");
    }
    Ok(authority)
}

/// The port `authority` names, `None` for none; `Err` for text after the host that is not a
/// port (past 65535, empty), which `Authority::port_u16` reads as none.
fn port(authority: &Authority) -> Result<Option<u16>, ()> {
    match authority.as_str().strip_prefix(authority.host()) {
        Some("") => Ok(None),
        Some(rest) => rest
            .strip_prefix(':')
            .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse().ok())
            .map(Some)
            .ok_or(()),
        None => Err(()),
    }
}

/// An IP address as a `Host` spells it (IPv6 in brackets).
fn bracketed(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// The address a host name spells, if it is one.
fn address(name: &str) -> Option<IpAddr> {
    let bare = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    bare.parse().ok()
}

/// An origin as [`origins`] keeps it and as `Origin` is compared with it: `scheme://host[:port]`,
/// lowercase, no path, the scheme's default port left out (browsers send
/// `https://example.com`, never `:443`); `None` for what is no web page's origin (`null`, `*`,
/// a path or a query).
pub fn normalize_origin(origin: &str) -> Option<String> {
    let uri: Uri = origin.trim().parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() || authority.as_str().contains('@')
    {
        return None;
    }
    let host = authority.host().to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    Some(match port(authority).ok()? {
        Some(port) if Some(port) != default_port => format!("{scheme}://{host}:{port}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// The web pages (`--allow-origin`) that may use the server, as [`normalize_origin`] writes
/// them.
pub fn origins(given: &[String]) -> anyhow::Result<Vec<String>> {
    given
        .iter()
        .map(|origin| {
            normalize_origin(origin).with_context(|| {
                format!(
                    "--allow-origin `{origin}` is not a web page's origin: give it as the \
                     browser sends it, e.g. https://example.com or http://localhost:3000 \
                     (`*` is not accepted: name each page)"
                )
            })
        })
        .collect()
}

/// Whether a request's `Origin` is one of the allowed pages (`admit` and CORS ask the same).
fn origin_allowed(allowed: &[String], origin: &HeaderValue) -> bool {
    origin
        .to_str()
        .ok()
        .and_then(normalize_origin)
        .is_some_and(|origin| allowed.contains(&origin))
}

/// CORS for the `--allow-origin` pages, preflights answered here (before the key check:
/// browsers send no credentials on a preflight); `None` without any.
pub fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allowed = origins.to_vec();
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::predicate(move |origin, _| {
                origin_allowed(&allowed, origin)
            }))
            .allow_methods([Method::GET, Method::POST])
            .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
            .expose_headers([header::RETRY_AFTER])
            .max_age(Duration::from_secs(600)),
    )
}

/// The API key: `--api-key`, `--api-key-file` (its contents, trimmed) or [`KEY_VARIABLE`], in that
/// order; `None` for none. A key that is empty, or that a header cannot carry, is an error:
/// an empty key must never quietly mean "no key". A flag's key over a set variable is said on
/// stderr: clients sending the variable's key would meet 401s with no clue why.
pub fn api_key(flag: Option<&str>, file: Option<&Path>) -> anyhow::Result<Option<String>> {
    let used = match (flag, file) {
        (Some(_), _) => Some("--api-key"),
        (None, Some(_)) => Some("--api-key-file"),
        (None, None) => None,
    };
    if let Some(used) = used.filter(|_| std::env::var_os(KEY_VARIABLE).is_some()) {
        redraft_runtime::stderr_line(format_args!(
            "redraft serve: note: {KEY_VARIABLE} is set too and not used: the key of {used} is \
             the one clients must send"
        ));
    }
    let (key, from) = if let Some(key) = flag {
        redraft_runtime::stderr_line(format_args!(
            "redraft serve: note: --api-key shows the key to every user of this machine in the \
             process list; prefer {KEY_VARIABLE} or --api-key-file"
        ));
        (key.to_string(), "--api-key".to_string())
    } else if let Some(path) = file {
        let key = std::fs::read_to_string(path)
            .with_context(|| format!("reading the API key file {}", path.display()))?;
        (key, format!("the API key file {}", path.display()))
    } else {
        match std::env::var(KEY_VARIABLE) {
            Ok(key) => (key, KEY_VARIABLE.to_string()),
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                bail!("{KEY_VARIABLE} is not UTF-8: set it to a key of printable ASCII")
            }
        }
    };
    let key = key.trim();
    if key.is_empty() {
        bail!(
            "{from} is empty: give a key (or, to serve without one, leave out --api-key, \
             --api-key-file and {KEY_VARIABLE})"
        );
    }
    if !key.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "the key from {from} has spaces, control or non-ASCII characters, which an \
             `Authorization` header cannot carry: use printable ASCII"
        );
    }
    Ok(Some(key.to_string()))
}

/// The checks every request passes first: `Host`, `Origin`, then the headers the server will
/// not guess about.
pub async fn admit(State(app): State<Shared>, request: Request, next: Next) -> Response {
    let dialect = Dialect::of_path(request.uri().path());
    let refuse = |error: ApiError| error.in_dialect(dialect).into_response();
    let headers = request.headers();
    let hosts: Vec<&HeaderValue> = headers.get_all(header::HOST).iter().collect();
    let host = match (hosts.as_slice(), request.uri().authority()) {
        // An absolute-form target (`GET http://name/path`): its authority is the host asked
        // for, whatever `Host` says (RFC 9112 section 3.2.2).
        ([_], Some(authority)) | ([], Some(authority)) => authority.as_str().to_string(),
        ([one], None) => one.to_str().unwrap_or("\u{fffd}").to_string(),
        ([], None) => return refuse(ApiError::bad_headers("a `Host` header is required")),
        _ => return refuse(ApiError::bad_headers("one `Host` header, not several")),
    };
    if !app.hosts.allows(&host) {
        return refuse(ApiError::host_not_allowed(&host));
    }
    for origin in headers.get_all(header::ORIGIN) {
        if !origin_allowed(&app.origins, origin) {
            return refuse(ApiError::origin_not_allowed(
                origin.to_str().unwrap_or("\u{fffd}"),
            ));
        }
    }
    // Which of two would count depends on the order they are read in.
    for (name, spelled) in [
        (header::AUTHORIZATION, "Authorization"),
        (header::CONTENT_TYPE, "Content-Type"),
    ] {
        if headers.get_all(name).iter().count() > 1 {
            return refuse(ApiError::bad_headers(format!(
                "one `{spelled}` header, not several"
            )));
        }
    }
    if headers.contains_key(header::TRANSFER_ENCODING) {
        let mut response = refuse(ApiError::bad_headers(
            "a body framed with `Transfer-Encoding` is refused: send it with `Content-Length`",
        ));
        // What else came on this connection cannot be told apart from the body.
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    next.run(request).await
}

/// `Authorization: Bearer KEY` when the server has a key; `/health` is always open (load
/// balancers probe it).
pub async fn authorize(State(app): State<Shared>, request: Request, next: Next) -> Response {
    let Some(key) = &app.api_key else {
        return next.run(request).await;
    };
    if request.uri().path() == "/health" || bearer_matches(request.headers(), key) {
        return next.run(request).await;
    }
    ApiError::unauthorized()
        .in_dialect(Dialect::of_path(request.uri().path()))
        .into_response()
}

/// The routes that take a JSON body (POST).
pub const JSON_ROUTES: &[&str] = &[
    "/v1/completions",
    "/v1/fim/completions",
    "/v1/edit/completions",
    "/api/generate",
    "/api/show",
];

/// A POST to a JSON route must say it carries JSON: 415 before the body is read. (Other
/// methods and paths go on to their 405 or 404.)
pub async fn require_json(request: Request, next: Next) -> Response {
    if request.method() != Method::POST || !JSON_ROUTES.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let content_type = request.headers().get(header::CONTENT_TYPE);
    let is_json = content_type
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<mime::Mime>().ok())
        .is_some_and(|m| {
            m.type_() == mime::APPLICATION
                && (m.subtype() == mime::JSON || m.suffix() == Some(mime::JSON))
        });
    if is_json {
        return next.run(request).await;
    }
    let shown = content_type.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    ApiError::not_json(shown.as_deref())
        .in_dialect(Dialect::of_path(request.uri().path()))
        .into_response()
}

/// A `Content-Length` past `--max-body` is 413 before any of the body is read (the body
/// limit itself only trips once that much has arrived).
pub async fn refuse_oversized(State(app): State<Shared>, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > app.max_body as u64) {
        return ApiError::too_large(app.max_body)
            .in_dialect(Dialect::of_path(request.uri().path()))
            .into_response();
    }
    next.run(request).await
}

fn bearer_matches(headers: &HeaderMap, key: &str) -> bool {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some((scheme, token)) = value.trim().split_once(' ') else {
        return false;
    };
    // The same time whatever the token, so the key cannot be guessed a byte at a time.
    let (token, key) = (token.trim().as_bytes(), key.as_bytes());
    scheme.eq_ignore_ascii_case("bearer")
        && token.len() == key.len()
        && token.iter().zip(key).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_keys_are_compared_whole() {
        let mut headers = HeaderMap::new();
        assert!(!bearer_matches(&headers, "k3y"));
        headers.insert(header::AUTHORIZATION, "Bearer k3y".parse().unwrap());
        assert!(bearer_matches(&headers, "k3y"));
        assert!(!bearer_matches(&headers, "k3"));
        assert!(!bearer_matches(&headers, "k3yy"));
        headers.insert(header::AUTHORIZATION, "bearer  k3y ".parse().unwrap());
        assert!(bearer_matches(&headers, "k3y"));
        headers.insert(header::AUTHORIZATION, "Basic k3y".parse().unwrap());
        assert!(!bearer_matches(&headers, "k3y"));
    }

    #[test]
    fn hosts_are_loopback_names_the_bound_address_and_the_allowed() {
        let loopback = Hosts::new("127.0.0.1:8717".parse().unwrap(), &[]).unwrap();
        for host in [
            "localhost",
            "LOCALHOST:8717",
            "127.0.0.1:1",
            "[::1]:8717",
            "[::1]",
            "0.0.0.0:8717",
            "[::]:8717",
        ] {
            assert!(loopback.allows(host), "{host}");
        }
        for host in [
            "attacker.example",
            "attacker.example:8717",
            "localhost.attacker.example",
            "10.0.0.2:8717",
            "user@localhost",
            "localhost/x",
            "",
        ] {
            assert!(!loopback.allows(host), "{host}");
        }
        let named = Hosts::new(
            "192.168.1.5:8717".parse().unwrap(),
            &["gpu-box".into(), "Proxy.Example:443".into()],
        )
        .unwrap();
        for host in ["192.168.1.5:8717", "gpu-box:8717", "proxy.example:443"] {
            assert!(named.allows(host), "{host}");
        }
        for host in ["192.168.1.6:8717", "proxy.example:80", "proxy.example"] {
            assert!(!named.allows(host), "{host}");
        }
        // Every address: any address typed as one, still no other name.
        let every = Hosts::new("0.0.0.0:8717".parse().unwrap(), &[]).unwrap();
        assert!(every.allows("192.168.1.5:8717") && every.allows("[fe80::1]:8717"));
        assert!(!every.allows("attacker.example:8717"));
        assert!(Hosts::new("127.0.0.1:1".parse().unwrap(), &["a b".into()]).is_err());
        // A port `http` reads as none would allow every port; a wildcard only `Host: *`.
        for bad in [
            "evil.com:99999",
            "evil.com:",
            "*",
            "*.example.com",
            "*:8717",
        ] {
            let refused = Hosts::new("127.0.0.1:1".parse().unwrap(), &[bad.into()]);
            assert!(refused.is_err(), "{bad}");
        }
        assert!(!loopback.allows("localhost:99999"));
    }

    #[test]
    fn origins_are_given_as_browsers_send_them() {
        assert_eq!(
            origins(&[
                "https://Example.com/".into(),
                "http://localhost:3000".into()
            ])
            .unwrap(),
            ["https://example.com", "http://localhost:3000"]
        );
        for bad in [
            "*",
            "null",
            "example.com",
            "https://example.com/app",
            "https://example.com:99999",
            "https://user@example.com",
        ] {
            assert!(origins(&[bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_origin_is_one_spelling_whatever_its_case_slash_or_default_port() {
        for (given, normal) in [
            ("https://example.com:443", "https://example.com"),
            ("HTTPS://Example.COM/", "https://example.com"),
            ("http://ok.example:80", "http://ok.example"),
            ("https://ok.example:80", "https://ok.example:80"),
            ("http://localhost:3000/", "http://localhost:3000"),
            ("http://[::1]:80", "http://[::1]"),
            ("app://obsidian.md", "app://obsidian.md"),
        ] {
            assert_eq!(normalize_origin(given).as_deref(), Some(normal), "{given}");
        }
        let allowed = origins(&["https://example.com:443".into()]).unwrap();
        for (origin, passes) in [
            ("https://example.com", true),
            ("https://EXAMPLE.com/", true),
            ("http://example.com", false),
            ("https://example.com:8443", false),
        ] {
            let origin = HeaderValue::from_static(origin);
            assert_eq!(origin_allowed(&allowed, &origin), passes, "{origin:?}");
        }
    }
}
