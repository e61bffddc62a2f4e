//! A backend's URL: the endpoints requests go to, and the URL as messages name it (no
//! credentials, secret query values redacted).

use percent_encoding::percent_decode_str;
use reqwest::Url;

use super::{BackendError, REDACTED};

/// The completions endpoint of a backend URL as a log or message may name it: no credentials,
/// and the values of query keys that look secret (`?api_key=...`) `[redacted]`.
pub fn shown_endpoint(url: &str) -> Result<String, BackendError> {
    let (completions, _) = endpoints(url)?;
    Ok(shown(completions.as_str(), &mut Vec::new()))
}

/// The completions and models endpoints of a backend URL: `http://h:p` and `http://h:p/v1`
/// gain `/v1/completions` (`/completions`); a URL already ending in `/completions` is kept.
/// Credentials in the URL (`http://user:password@host`) are left out: these URLs are the ones
/// messages name ([`Backend`](super::Backend) sends the credentials).
pub fn endpoints(url: &str) -> Result<(Url, Url), BackendError> {
    let bad = |message: &str| BackendError::BadUrl {
        url: shown(url, &mut Vec::new()),
        message: message.to_string(),
    };
    if !url.contains("://") {
        return Err(bad(
            "write it as http://HOST:PORT (or https://, with /v1 if the server wants it)",
        ));
    }
    let parsed = Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("only http:// and https:// backends are supported"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("it names no host"));
    }
    let path = parsed.path().trim_end_matches('/');
    if path.ends_with("/chat/completions") {
        return Err(bad(
            "a chat endpoint cannot fill a middle: give the server's base URL (http://HOST:PORT/v1)",
        ));
    }
    let (completions, models) = if let Some(base) = path.strip_suffix("/completions") {
        (path.to_string(), format!("{base}/models"))
    } else if path.ends_with("/v1") {
        (format!("{path}/completions"), format!("{path}/models"))
    } else {
        (
            format!("{path}/v1/completions"),
            format!("{path}/v1/models"),
        )
    };
    let with_path = |path: &str| {
        let mut url = parsed.clone();
        url.set_path(path);
        // Cannot fail: the URL has a host.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        url
    };
    Ok((with_path(&completions), with_path(&models)))
}

/// A query parameter's name that says its value is a credential (`?key=`, `api_key`,
/// `access_token`, `sig`, ...).
fn names_a_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["key", "token", "secret", "password", "sig", "auth"]
        .iter()
        .any(|word| name.contains(word))
}

/// `url` as messages name it, whether or not it parses: without the credentials before its
/// host, and each credential in its query (see [`names_a_secret`]) `[redacted]`; the values
/// redacted are added to `secrets` as written and decoded (a server may echo either).
pub(super) fn shown(url: &str, secrets: &mut Vec<String>) -> String {
    let (head, fragment) = url
        .split_once('#')
        .map_or((url, None), |(h, f)| (h, Some(f)));
    let (base, query) = head
        .split_once('?')
        .map_or((head, None), |(b, q)| (b, Some(q)));
    let mut shown = match base.split_once("://") {
        Some((scheme, rest)) => {
            let authority = rest.find('/').map_or(rest, |end| &rest[..end]);
            match authority.rfind('@') {
                Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
                None => base.to_string(),
            }
        }
        None => base.to_string(),
    };
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, value)) if !value.is_empty() && names_a_secret(name) => {
                    secrets.push(value.to_string());
                    secrets.push(percent_decode_str(value).decode_utf8_lossy().into_owned());
                    format!("{name}={REDACTED}")
                }
                _ => pair.to_string(),
            })
            .collect();
        shown = format!("{shown}?{}", pairs.join("&"));
    }
    match fragment {
        Some(fragment) => format!("{shown}#{fragment}"),
        None => shown,
    }
}
