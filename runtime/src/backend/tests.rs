//! A backend against upstreams that misbehave, each a raw socket on loopback scripted here: an
//! answer that never ends, claims gigabytes or trickles; an error message a megabyte long or
//! echoing the key; a redirect; credentials written in the URL. What must hold: memory stays
//! bounded, the timeout bounds the body as well as the head, no secret is quoted, and nothing is
//! sent anywhere the user did not name.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;

/// One request an upstream read.
#[derive(Debug, Clone)]
struct Heard {
    method: String,
    path: String,
    /// Every `Authorization` header, in order.
    authorization: Vec<String>,
}

/// An upstream on loopback: each connection's first request is recorded and handed to `answer`
/// with the connection, on a thread of its own. Its base URL and what it heard.
fn upstream(
    answer: impl Fn(&Heard, &mut TcpStream) + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<Heard>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let heard: Arc<Mutex<Vec<Heard>>> = Arc::default();
    let log = Arc::clone(&heard);
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (answer, log) = (Arc::clone(&answer), Arc::clone(&log));
            std::thread::spawn(move || {
                let Some(request) = read_request(&stream) else {
                    return;
                };
                log.lock().unwrap().push(request.clone());
                answer(&request, &mut stream);
            });
        }
    });
    (url, heard)
}

fn read_request(stream: &TcpStream) -> Option<Heard> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let (mut length, mut authorization) = (0, Vec::new());
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let Some((name, value)) = header.trim_end().split_once(':') else {
            break;
        };
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "authorization" => authorization.push(value.trim().to_string()),
            _ => {}
        }
    }
    reader.read_exact(&mut vec![0; length]).ok()?;
    Some(Heard {
        method,
        path,
        authorization,
    })
}

/// Writes a whole answer with `status` and `body`.
fn reply(stream: &mut TcpStream, status: u16, extra: &str, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Holds the connection open, sending nothing more, until the client closes it.
fn stall(stream: &mut TcpStream) {
    let _ = stream.read(&mut [0; 1]);
}

fn completion(text: &str) -> String {
    json!({"choices": [{"text": text, "finish_reason": "stop"}]}).to_string()
}

/// An OpenAI-shaped error answer quoting `message`.
fn error_body(message: &str) -> String {
    json!({"error": {"message": message}}).to_string()
}

/// A backend for `url` with a model named (so no listing is asked first) and `timeout`.
fn backend(url: &str, timeout: Duration, api_key: Option<&str>) -> Backend {
    Backend::new(BackendConfig {
        model: Some("m".into()),
        api_key: api_key.map(str::to_string),
        timeout,
        ..BackendConfig::new(url)
    })
    .unwrap()
}

fn fill(backend: &Backend) -> Result<Fill, BackendError> {
    let request = FillRequest {
        prefix: "fn main() {",
        suffix: "}",
        max_tokens: 8,
        temperature: 0.0,
        seed: None,
        stop: Vec::new(),
        n: 1,
    };
    backend.fill(&request, None)
}

/// Long enough that no test here ends by it unless the upstream stalls.
const PATIENT: Duration = Duration::from_secs(60);

#[test]
fn an_answer_longer_than_the_limit_is_refused_not_read_into_memory() {
    // A completion one byte per `a` past the limit, chunked so no length warns of it first.
    let (url, _) = upstream(|_, stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        );
        let mut chunk = |data: &[u8]| {
            let frame = [format!("{:x}\r\n", data.len()).as_bytes(), data, b"\r\n"].concat();
            stream.write_all(&frame)
        };
        let text = vec![b'a'; 1 << 20];
        let mut sent = chunk(br#"{"choices": [{"text": ""#).is_ok();
        for _ in 0..=(MAX_ANSWER_BYTES >> 20) {
            sent = sent && chunk(&text).is_ok();
        }
        if sent && chunk(br#""}]}"#).is_ok() {
            let _ = stream.write_all(b"0\r\n\r\n");
        }
    });
    let err = fill(&backend(&url, PATIENT, None)).unwrap_err();
    assert_eq!(
        err,
        BackendError::TooLarge {
            url: format!("{url}/v1/completions"),
            limit: MAX_ANSWER_BYTES
        }
    );
    assert!(
        err.to_string()
            .ends_with("is this an OpenAI-compatible completions endpoint?"),
        "{err}"
    );
}

#[test]
fn an_answer_that_never_ends_is_cut_at_the_limit_not_at_the_timeout() {
    // Spaces (valid JSON so far) until the client hangs up, but never more than 4 limits' worth,
    // so that a client that reads on does not fill the machine before its timeout.
    let (url, _) = upstream(|_, stream| {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        let frame = [b"100000\r\n".as_slice(), &[b' '; 1 << 20], b"\r\n"].concat();
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        for _ in 0..4 * (MAX_ANSWER_BYTES >> 20) {
            if stream.write_all(&frame).is_err() {
                return;
            }
        }
        stall(stream);
    });
    let err = fill(&backend(&url, Duration::from_secs(10), None)).unwrap_err();
    assert!(matches!(err, BackendError::TooLarge { .. }), "{err}");
}

#[test]
fn an_answer_claiming_two_gigabytes_is_refused_before_its_body() {
    let (url, _) = upstream(|_, stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2147483648\r\n\r\n{",
        );
        stall(stream);
    });
    let err = fill(&backend(&url, PATIENT, None)).unwrap_err();
    assert!(matches!(err, BackendError::TooLarge { .. }), "{err}");
}

#[test]
fn the_timeout_bounds_a_body_that_stalls_or_trickles() {
    let (stalls, _) = upstream(|_, stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"ch",
        );
        stall(stream);
    });
    let (trickles, _) = upstream(|_, stream| {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        let mut open = stream.write_all(head.as_bytes()).is_ok();
        while open {
            open = stream.write_all(b"1\r\n \r\n").is_ok();
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    for url in [stalls, trickles] {
        let err = fill(&backend(&url, Duration::from_secs(1), None)).unwrap_err();
        assert!(matches!(err, BackendError::Timeout { .. }), "{url}: {err}");
    }
}

#[test]
fn an_error_message_is_quoted_short_and_without_the_key() {
    let (url, _) = upstream(|heard, stream| {
        let key = heard.authorization.join(" ");
        let message = format!("Incorrect API key provided: {key}; {}", "x".repeat(200_000));
        reply(stream, 401, "", &error_body(&message));
    });
    let err = fill(&backend(&url, PATIENT, Some("sk-live-1234"))).unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "{url}/v1/completions answered HTTP 401: Incorrect API key provided: Bearer [redacted]; xxx"
        )) && message.ends_with("... (check the API key)"),
        "{message}"
    );
    assert!(message.len() < 2 * QUOTED_BYTES, "{} bytes", message.len());

    // A body that is not the JSON of a completion is quoted without the key as well.
    let (url, _) = upstream(|heard, stream| {
        reply(stream, 200, "", &format!("echo {:?}", heard.authorization));
    });
    let err = fill(&backend(&url, PATIENT, Some("sk-live-1234"))).unwrap_err();
    assert!(
        matches!(err, BackendError::Malformed { .. }) && !err.to_string().contains("sk-live"),
        "{err}"
    );
}

#[test]
fn a_redirect_is_an_error_naming_its_target_and_is_not_followed() {
    let (elsewhere, heard_elsewhere) =
        upstream(|_, stream| reply(stream, 200, "", &completion("x")));
    for status in [301, 307] {
        let location = format!("{elsewhere}/v1/completions");
        let (url, _) = upstream(move |_, stream| {
            reply(stream, status, &format!("location: {location}\r\n"), "");
        });
        let err = fill(&backend(&url, PATIENT, Some("sk-live-1234"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{url}/v1/completions answered HTTP {status}: a redirect to {elsewhere}/v1/completions \
                 (redirects are not followed: give the backend URL it points to)"
            )
        );
    }
    assert!(
        heard_elsewhere.lock().unwrap().is_empty(),
        "the redirect was followed: {:?}",
        heard_elsewhere.lock().unwrap()
    );
}

#[test]
fn credentials_in_the_url_are_sent_as_basic_auth_and_never_shown() {
    let (url, heard) = upstream(|heard, stream| {
        // A server that echoes what it was sent, and the password itself.
        let message = format!("bad credentials {:?} for pass%word", heard.authorization);
        reply(stream, 403, "", &error_body(&message));
    });
    let with_credentials = url.replace("http://", "http://team:pass%25word@");
    let backend = backend(&with_credentials, PATIENT, None);
    assert_eq!(backend.endpoint(), format!("{url}/v1/completions"));
    assert_eq!(backend.spec().url, format!("{url}/v1/completions"));
    let err = fill(&backend).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{url}/v1/completions answered HTTP 403: bad credentials [\"Basic [redacted]\"] \
             for [redacted] (check the API key)"
        ),
        "the password neither in the URL named nor as the server quoted it, plain or as basic auth"
    );
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0].method, "POST");
    assert_eq!(heard[0].path, "/v1/completions");
    assert_eq!(
        heard[0].authorization,
        ["Basic dGVhbTpwYXNzJXdvcmQ="],
        "team:pass%word"
    );
    let (completions, models) = endpoints(&with_credentials).unwrap();
    assert_eq!(
        (completions.as_str(), models.as_str()),
        (
            format!("{url}/v1/completions").as_str(),
            format!("{url}/v1/models").as_str()
        ),
        "the endpoints a door logs name no credentials"
    );
}

/// A key in the URL's query (`?key=`, as some gateways take it) is sent and never shown: not
/// in the URL a message names, nor where the server quotes it back.
#[test]
fn a_key_in_the_query_is_sent_and_never_shown() {
    let (url, heard) = upstream(|heard, stream| {
        let message = format!("no such key: {}", heard.path);
        reply(stream, 401, "", &error_body(&message));
    });
    let backend = backend(
        &format!("{url}/v1?api-version=2024-10&key=s3cret%2Bkey"),
        PATIENT,
        None,
    );
    let shown = format!("{url}/v1/completions?api-version=2024-10&key=[redacted]");
    assert_eq!(backend.endpoint(), shown);
    assert_eq!(backend.spec().url, shown);
    let err = fill(&backend).unwrap_err().to_string();
    assert!(!err.contains("s3cret"), "{err}");
    assert!(
        err.starts_with(&format!(
            "{shown} answered HTTP 401: no such key: /v1/completions?api-version=2024-10&key=[redacted]"
        )),
        "{err}"
    );
    let heard = heard.lock().unwrap().clone();
    assert_eq!(
        heard[0].path,
        "/v1/completions?api-version=2024-10&key=s3cret%2Bkey"
    );
}

#[test]
fn an_api_key_beside_credentials_in_the_url_is_the_one_authorization_sent() {
    let (url, heard) = upstream(|_, stream| reply(stream, 200, "", &completion("a + b")));
    let with_credentials = url.replace("http://", "http://team:secret@");
    let fill = fill(&backend(&with_credentials, PATIENT, Some("sk-live-1234"))).unwrap();
    assert_eq!(fill.middles[0].text, "a + b");
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard[0].authorization, ["Bearer sk-live-1234"], "{heard:?}");
}

/// The first call without a model named asks `/v1/models` first: the timeout bounds the two
/// requests together (each had the whole timeout, so the call could take twice it).
#[test]
fn the_timeout_bounds_the_listing_and_the_completion_together() {
    let slow = |delay: Duration| {
        upstream(move |heard, stream| {
            std::thread::sleep(delay);
            if heard.path.ends_with("/models") {
                reply(
                    stream,
                    200,
                    "",
                    &json!({"data": [{"id": "only"}]}).to_string(),
                );
            } else {
                reply(stream, 200, "", &completion("x"));
            }
        })
    };
    let unnamed = |url: &str| {
        Backend::new(BackendConfig {
            timeout: Duration::from_millis(1500),
            ..BackendConfig::new(url)
        })
        .unwrap()
    };
    // 1 s each: each within the timeout, both past it.
    let (url, heard) = slow(Duration::from_millis(1000));
    let err = fill(&unnamed(&url)).unwrap_err();
    assert!(matches!(err, BackendError::Timeout { .. }), "{err}");
    assert_eq!(
        heard.lock().unwrap().len(),
        2,
        "the listing, then the completion"
    );
    // Quick ones: the listed model is named in the completion request.
    let (url, _) = slow(Duration::from_millis(50));
    assert_eq!(fill(&unnamed(&url)).unwrap().middles[0].text, "x");
}

#[test]
fn a_gateway_listing_hundreds_of_models_is_named_in_a_few() {
    let (url, _) = upstream(|_, stream| {
        let data: Vec<Value> = (0..300)
            .map(|i| json!({"id": format!("model-{i}")}))
            .collect();
        reply(stream, 200, "", &json!({"data": data}).to_string());
    });
    let backend = Backend::new(BackendConfig::new(url.as_str())).unwrap();
    let err = backend.resolve_model(None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{url}/v1/models serves several models (model-0, model-1, model-2, model-3, model-4, \
             model-5, model-6, model-7, and 292 more): name one (--backend-model)"
        )
    );
}

#[test]
fn a_chat_completions_url_is_refused_before_any_request() {
    for url in [
        "https://api.example/v1/chat/completions",
        "http://gpu:8000/v1/chat/completions/",
    ] {
        let err = endpoints(url).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "backend URL `{url}`: a chat endpoint cannot fill a middle: give the server's base URL \
                 (http://HOST:PORT/v1)"
            )
        );
    }
}

/// A short key (llama-server's `--api-key test`) is redacted where the server quotes it, not
/// inside the words of an ordinary message.
#[test]
fn a_short_key_is_redacted_as_a_word_not_inside_words() {
    let (url, _) = upstream(|_, stream| {
        let message = "model `latest` is not loaded; testing keys: test, (test)";
        reply(stream, 404, "", &error_body(message));
    });
    let err = fill(&backend(&url, PATIENT, Some("test")))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "model `latest` is not loaded; testing keys: [redacted], ([redacted]) (is this"
        ),
        "{err}"
    );
}

/// The key is redacted before the message is cut short: one the cut falls inside is not
/// shown in part.
#[test]
fn a_key_where_the_message_is_cut_is_not_shown_in_part() {
    let (url, _) = upstream(|heard, stream| {
        let key = heard.authorization.join(" ");
        let message = format!("{} {key}", "x".repeat(QUOTED_BYTES - 16));
        reply(stream, 401, "", &error_body(&message));
    });
    let err = fill(&backend(&url, PATIENT, Some("sk-live-1234567890")))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("xxx Bearer ") && !err.contains("sk-l"),
        "{err}"
    );
}

/// A URL refused before any request is named without its password.
#[test]
fn a_refused_url_is_named_without_its_credentials() {
    let err = Backend::new(BackendConfig::new(
        "http://team:s3cret@gpu:8000/v1/chat/completions",
    ))
    .unwrap_err()
    .to_string();
    assert!(!err.contains("s3cret"), "{err}");
    assert!(
        err.starts_with("backend URL `http://gpu:8000/v1/chat/completions`"),
        "{err}"
    );
    // Nor with a key in its query.
    let err = Backend::new(BackendConfig::new(
        "http://gpu:8000/v1/chat/completions?key=s3cret",
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("backend URL `http://gpu:8000/v1/chat/completions?key=[redacted]`"),
        "{err}"
    );
}
