//! What a request must pass before its body is read: web pages (a rebinding `Host`, a foreign
//! `Origin`, a body a page may send without a preflight), keys (empty, from a file, doubled),
//! framing a proxy and the server could read two ways, and errors that would echo what the
//! client sent.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::client::{refused_start, Response, Server, Start};
use super::PREFIX;

#[track_caller]
fn error_code(response: &Response, status: u16) -> String {
    assert_eq!(response.status, status, "{}", response.text());
    let body = response.json();
    body["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("an OpenAI-shaped error: {body}"))
        .to_string()
}

/// A request as bytes, with exactly the headers given (no Host unless among them).
fn request_bytes(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    [head.as_bytes(), body.as_bytes()].concat()
}

fn completion() -> String {
    json!({"prompt": PREFIX, "max_tokens": 4}).to_string()
}

/// DNS rebinding: a page at `attacker.example:PORT` whose name now resolves to 127.0.0.1 sends
/// its own name as `Host`. Refused on every route, before any body; loopback names (`0.0.0.0`
/// among them) and the bound address pass, and `--allow-host` adds a name.
#[test]
fn a_rebinding_host_is_refused_with_the_flag_that_allows_it() {
    let server = Server::start(&[]);
    let port = server.addr.port();
    let attacker = format!("attacker.example:{port}");
    let json = ("Content-Type", "application/json");
    for (method, path, body) in [
        ("GET", "/v1/models", String::new()),
        ("GET", "/health", String::new()),
        ("GET", "/metrics", String::new()),
        ("POST", "/v1/completions", completion()),
    ] {
        let response = server.raw(&request_bytes(
            method,
            path,
            &[("Host", &attacker), json],
            &body,
        ));
        assert_eq!(
            error_code(&response, 403),
            "host_not_allowed",
            "{method} {path}"
        );
        let message = response.json()["error"]["message"].to_string();
        assert!(message.contains("--allow-host"), "{message}");
    }
    let ollama = server.raw(&request_bytes(
        "POST",
        "/api/generate",
        &[("Host", &attacker), json],
        &completion(),
    ));
    assert_eq!(ollama.status, 403);
    assert!(ollama.json()["error"].is_string(), "{}", ollama.text());
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        "localhost".to_string(),
        // ollama-python with `OLLAMA_HOST=0.0.0.0:PORT`.
        format!("0.0.0.0:{port}"),
    ] {
        let response = server.raw(&request_bytes(
            "POST",
            "/v1/completions",
            &[("Host", &host), json],
            &completion(),
        ));
        assert_eq!(response.status, 200, "{host}: {}", response.text());
    }
    // A page that sends its request to 0.0.0.0 (which reaches this machine) still says whose
    // page it is.
    let page = server.raw(&request_bytes(
        "POST",
        "/v1/completions",
        &[
            ("Host", &format!("0.0.0.0:{port}")),
            ("Origin", "https://attacker.example"),
            json,
        ],
        &completion(),
    ));
    assert_eq!(error_code(&page, 403), "origin_not_allowed");
    // An absolute-form target names the host asked for, whatever `Host` says (RFC 9112
    // section 3.2.2): the target's is checked.
    let absolute = server.raw(&request_bytes(
        "GET",
        &format!("http://{attacker}/health"),
        &[("Host", "localhost")],
        "",
    ));
    assert_eq!(error_code(&absolute, 403), "host_not_allowed");
    let ours = server.raw(&request_bytes(
        "GET",
        &format!("http://localhost:{port}/v1/models"),
        &[("Host", &attacker)],
        "",
    ));
    assert_eq!(ours.status, 200, "{}", ours.text());
    // No Host, or two, is not a request to guess about.
    let none = server.raw(&request_bytes("GET", "/v1/models", &[], ""));
    assert_eq!(error_code(&none, 400), "bad_headers");
    let two = server.raw(&request_bytes(
        "GET",
        "/v1/models",
        &[("Host", "localhost"), ("Host", &attacker)],
        "",
    ));
    assert_eq!(error_code(&two, 400), "bad_headers");

    let allowed = Server::start(&["--allow-host", "attacker.example"]);
    let port = allowed.addr.port();
    let response = allowed.raw(&request_bytes(
        "GET",
        "/v1/models",
        &[("Host", &format!("attacker.example:{port}"))],
        "",
    ));
    assert_eq!(response.status, 200, "{}", response.text());
}

/// A request from a web page carries `Origin`: refused unless `--allow-origin` names the page;
/// without it no response carries CORS headers. A named page gets CORS, its preflight answered
/// without the key (browsers send none on a preflight).
#[test]
fn web_pages_are_refused_unless_allowed_and_then_get_cors() {
    let server = Server::start(&[]);
    let json = ("Content-Type", "application/json");
    for origin in ["https://evil.example", "null", "http://127.0.0.1:1"] {
        let response = server.request(
            "POST",
            "/v1/completions",
            &[("Origin", origin), json],
            completion().as_bytes(),
        );
        assert_eq!(error_code(&response, 403), "origin_not_allowed", "{origin}");
        assert!(response.header("access-control-allow-origin").is_none());
        let message = response.json()["error"]["message"].to_string();
        assert!(message.contains("--allow-origin"), "{message}");
    }
    let plain = server.post(
        "/v1/completions",
        &json!({"prompt": PREFIX, "max_tokens": 4}),
    );
    assert_eq!(plain.status, 200);
    assert!(plain.header("access-control-allow-origin").is_none());

    let page = "https://app.example";
    let server = Server::start(&["--allow-origin", page, "--api-key", "s3cret"]);
    let preflight = server.request(
        "OPTIONS",
        "/v1/completions",
        &[
            ("Origin", page),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization, content-type",
            ),
        ],
        b"",
    );
    assert!(
        (200..300).contains(&preflight.status),
        "{}",
        preflight.text()
    );
    assert_eq!(preflight.header("access-control-allow-origin"), Some(page));
    let methods = preflight.header("access-control-allow-methods").unwrap();
    assert!(methods.contains("POST"), "{methods}");
    let headers = preflight
        .header("access-control-allow-headers")
        .unwrap()
        .to_ascii_lowercase();
    assert!(headers.contains("authorization") && headers.contains("content-type"));
    let answer = server.request(
        "POST",
        "/v1/completions",
        &[("Origin", page), ("Authorization", "Bearer s3cret"), json],
        completion().as_bytes(),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("access-control-allow-origin"), Some(page));
    let other = server.request(
        "OPTIONS",
        "/v1/completions",
        &[
            ("Origin", "https://evil.example"),
            ("Access-Control-Request-Method", "POST"),
        ],
        b"",
    );
    assert_eq!(error_code(&other, 403), "origin_not_allowed");
    assert!(other.header("access-control-allow-origin").is_none());
}

/// `--allow-origin` and `Origin` are compared as browsers mean them: a scheme's default port
/// (`https://example.com:443`) is the origin without it, and an `Origin` spelled in capitals or
/// with a trailing `/` that passes the check gets its CORS headers too, rather than running
/// without them.
#[test]
fn origins_match_whatever_the_default_port_case_or_trailing_slash() {
    let server = Server::start(&[
        "--allow-origin",
        "https://example.com:443",
        "--allow-origin",
        "http://OK.example",
    ]);
    let post = |origin: &str| {
        server.request(
            "POST",
            "/v1/completions",
            &[("Origin", origin), ("Content-Type", "application/json")],
            completion().as_bytes(),
        )
    };
    for origin in [
        "https://example.com",
        "https://EXAMPLE.com/",
        "http://ok.example:80",
        "http://OK.example/",
    ] {
        let answer = post(origin);
        assert_eq!(answer.status, 200, "{origin}: {}", answer.text());
        assert_eq!(
            answer.header("access-control-allow-origin"),
            Some(origin),
            "{origin}"
        );
        let preflight = server.request(
            "OPTIONS",
            "/v1/completions",
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
            ],
            b"",
        );
        assert!((200..300).contains(&preflight.status), "{origin}");
        assert_eq!(
            preflight.header("access-control-allow-origin"),
            Some(origin)
        );
    }
    for origin in [
        "http://example.com",
        "https://example.com:8443",
        "https://ok.example",
    ] {
        let response = post(origin);
        assert_eq!(error_code(&response, 403), "origin_not_allowed", "{origin}");
        assert!(response.header("access-control-allow-origin").is_none());
    }
}

/// A page may POST `text/plain`, a form or a typeless blob anywhere without a preflight: a JSON
/// route refuses them (415) from the head alone, before the body arrives.
#[test]
fn bodies_not_sent_as_json_are_415_before_they_are_read() {
    let server = Server::start(&[]);
    let host = server.addr.to_string();
    for content_type in [
        Some("text/plain"),
        Some("text/plain; charset=utf-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        for path in ["/v1/completions", "/api/generate", "/v1/fim/completions"] {
            let mut socket = server.connect();
            let mut head =
                format!("POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100\r\n");
            if let Some(content_type) = content_type {
                head.push_str(&format!("Content-Type: {content_type}\r\n"));
            }
            head.push_str("\r\n");
            // The head only: the answer comes without the body.
            socket.write_all(head.as_bytes()).unwrap();
            socket
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut answer = [0u8; 12];
            socket.read_exact(&mut answer).unwrap();
            assert_eq!(&answer, b"HTTP/1.1 415", "{content_type:?} {path}");
        }
    }
    for content_type in [
        "application/json; charset=utf-8",
        "application/vnd.api+json",
    ] {
        let response = server.request(
            "POST",
            "/v1/completions",
            &[("Content-Type", content_type)],
            completion().as_bytes(),
        );
        assert_eq!(response.status, 200, "{content_type}: {}", response.text());
    }
    let response = server.request(
        "POST",
        "/v1/completions",
        &[("Content-Type", "text/plain")],
        completion().as_bytes(),
    );
    assert_eq!(error_code(&response, 415), "unsupported_media_type");
    // Routes that take no body keep their own answers.
    let plain = [("Content-Type", "text/plain")];
    let wrong_method = server.request("POST", "/v1/models", &plain, b"x");
    assert_eq!(error_code(&wrong_method, 405), "method_not_allowed");
    let unknown = server.request("POST", "/v1/chat/completions", &plain, b"x");
    assert_eq!(error_code(&unknown, 404), "unknown_route");
}

/// A value of `--allow-origin`, `--allow-host` or `--backend*` the server cannot use is a
/// mistake on the command line: exit status 2 with what is wrong (docs/cli.md), before a model
/// is loaded, as clap's own mistakes are.
#[test]
fn flag_values_the_server_cannot_use_are_command_line_mistakes() {
    for (args, says) in [
        (
            &["--allow-origin", "*"][..],
            "--allow-origin `*` is not a web page's origin",
        ),
        (&["--allow-host", ""], "--allow-host `` is not a host name"),
        // Read as no port, it would have allowed every port.
        (
            &["--allow-host", "evil.com:99999"],
            "--allow-host `evil.com:99999`: `99999` is not a port",
        ),
        (
            &["--allow-host", "*"],
            "--allow-host `*`: wildcards are not accepted",
        ),
        (
            &[
                "--backend",
                "http://127.0.0.1:1",
                "--backend-timeout-s",
                "1e30",
            ],
            "--backend-timeout-s 1e30 is longer than any timer can wait",
        ),
        (&["--backend", "notaurl"], "write it as http://HOST:PORT"),
        (
            &["--backend", "http://h:1", "--backend-timeout-s", "0"],
            "--backend-timeout-s must be a positive number of seconds",
        ),
    ] {
        let (status, stderr) = refused_start(args, &[]);
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(says),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("loaded from"), "{args:?}: {stderr}");
    }
}

/// An empty key would mean no key at all: refused at start-up, wherever it comes from. A key
/// file is read trimmed.
#[test]
fn an_empty_key_is_a_start_up_error_and_a_key_file_is_read_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, " \n").unwrap();
    let empty = empty.to_str().unwrap();
    for (args, env, says) in [
        (vec!["--api-key", ""], vec![], "--api-key is empty"),
        (vec!["--api-key", "  "], vec![], "--api-key is empty"),
        (
            vec![],
            vec![("REDRAFT_API_KEY", "")],
            "REDRAFT_API_KEY is empty",
        ),
        (vec!["--api-key-file", empty], vec![], "is empty"),
        (
            vec!["--api-key-file", "/nonexistent/key"],
            vec![],
            "/nonexistent/key",
        ),
        (vec!["--api-key", "two words"], vec![], "printable ASCII"),
    ] {
        let (status, stderr) = refused_start(&args, &env);
        assert!(!status.success(), "{args:?} {env:?}");
        assert!(stderr.contains(says), "{args:?} {env:?}: {stderr}");
        assert!(!stderr.contains("listening on"), "{stderr}");
    }
    let file = dir.path().join("key");
    std::fs::write(&file, "  s3cret\n").unwrap();
    let server = Server::start(&["--api-key-file", file.to_str().unwrap()]);
    let body = completion();
    let json = ("Content-Type", "application/json");
    let ask = |key: &str| {
        server
            .request(
                "POST",
                "/v1/completions",
                &[("Authorization", key), json],
                body.as_bytes(),
            )
            .status
    };
    assert_eq!(ask("Bearer s3cret"), 200);
    assert_eq!(ask("Bearer   s3cret  "), 200);
    assert_eq!(ask("Bearer s3cre"), 401);
    assert!(!server.stderr().contains("process list"));
    // The flag works, and says where the key shows.
    let flagged = Server::start(&["--api-key", "s3cret"]);
    assert!(
        flagged.stderr().contains("process list"),
        "{}",
        flagged.stderr()
    );
}

/// Two `Authorization` or two `Content-Type` headers: which counts would depend on their order.
/// 400 either way.
#[test]
fn a_second_authorization_or_content_type_header_is_400_in_either_order() {
    let server = Server::start(&["--api-key", "s3cret"]);
    let host = server.addr.to_string();
    let body = completion();
    let key = ("Authorization", "Bearer s3cret");
    let json = ("Content-Type", "application/json");
    for (name, pair, other) in [
        ("Authorization", ["Bearer s3cret", "Bearer wrong"], json),
        ("Authorization", ["Bearer wrong", "Bearer s3cret"], json),
        ("Content-Type", ["application/json", "text/plain"], key),
        ("Content-Type", ["text/plain", "application/json"], key),
    ] {
        let response = server.raw(&request_bytes(
            "POST",
            "/v1/completions",
            &[("Host", &host), other, (name, pair[0]), (name, pair[1])],
            &body,
        ));
        assert_eq!(error_code(&response, 400), "bad_headers", "{name} {pair:?}");
        let message = response.json()["error"]["message"].to_string();
        assert!(
            message.contains(&format!("one `{name}` header")),
            "{message}"
        );
    }
}

/// A length and a chunked framing together is how a request is smuggled past a proxy that
/// reads the other one: 400 and the connection closed, in either order (hyper alone would
/// read the chunks and drop the length).
#[test]
fn content_length_with_transfer_encoding_is_400() {
    let server = Server::start(&[]);
    let host = server.addr.to_string();
    let body = completion();
    let chunked = format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    for framing in [
        format!(
            "Content-Length: {}\r\nTransfer-Encoding: chunked\r\n",
            chunked.len()
        ),
        format!(
            "Transfer-Encoding: chunked\r\nContent-Length: {}\r\n",
            chunked.len()
        ),
    ] {
        let mut socket = server.connect();
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        // Keep-alive, with a second request after the first: nothing more is read.
        let request = format!(
            "POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{framing}\r\n{chunked}"
        );
        let next = format!("GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n");
        socket.write_all(request.as_bytes()).unwrap();
        socket.write_all(next.as_bytes()).unwrap();
        let mut answer = Vec::new();
        let _ = socket.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 400"), "{framing:?}: {answer}");
        assert!(answer.contains("bad_headers"), "{answer}");
        assert_eq!(
            answer.matches("HTTP/1.1").count(),
            1,
            "one answer, then the connection closes: {answer}"
        );
    }
}

/// An error quotes at most a short prefix of what the client sent: a 100 KB model name, field,
/// effort or role, or a 10 KB path, does not come back whole.
#[test]
fn errors_quote_only_a_short_prefix_of_what_the_client_sent() {
    let server = Server::start(&[]);
    let long = "m".repeat(100_000);
    let check = |response: &Response, status: u16| -> Value {
        assert_eq!(response.status, status, "{}", &response.text()[..200]);
        assert!(
            response.body.len() < 2_000,
            "{} bytes: {}",
            response.body.len(),
            &response.text()[..200]
        );
        let body = response.json();
        let message = body["error"]["message"]
            .as_str()
            .or(body["error"].as_str())
            .unwrap()
            .to_string();
        assert!(
            message.contains(&format!("{}…", "m".repeat(64))),
            "{message}"
        );
        assert!(!message.contains(&"m".repeat(65)), "{message}");
        body
    };
    check(
        &server.post("/v1/completions", &json!({"model": long, "prompt": PREFIX})),
        404,
    );
    check(
        &server.post("/api/generate", &json!({"model": long, "prompt": PREFIX})),
        404,
    );
    check(
        &server.post(
            "/v1/completions",
            &json!({"prompt": PREFIX, "effort": long}),
        ),
        400,
    );
    check(
        &server.post(
            "/v1/completions",
            &json!({"prompt": PREFIX, "max_tokens": long}),
        ),
        400,
    );
    // (hyper refuses a path past 64 KB itself: 414.)
    let route = server.get(&format!("/{}", &long[..10_000]));
    assert_eq!(route.status, 404);
    assert!(route.body.len() < 2_000, "{} bytes", route.body.len());
    assert!(route.text().contains(&format!("/{}…", "m".repeat(63))));
    let started = Instant::now();
    check(
        &server.post(
            "/v1/edit/completions",
            &json!({"messages": [{"role": long, "content": "x"}]}),
        ),
        400,
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// The README's first way to give the key works: the environment variable.
#[test]
fn the_key_from_the_environment_is_required() {
    let server = Server::start_with(Start {
        env: &[("REDRAFT_API_KEY", " s3cret ")],
        ..Start::default()
    });
    let response = server.post("/v1/completions", &json!({"prompt": PREFIX}));
    assert_eq!(error_code(&response, 401), "invalid_api_key");
    assert!(!server.stderr().contains("process list"));
    assert!(!server.stderr().contains("is set too"));
}

/// A flag's key wins over the variable's, and the server says so at start-up: clients still
/// sending the variable's key would otherwise meet 401s with no clue why.
#[test]
fn a_flags_key_wins_over_the_variables_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("key");
    std::fs::write(&file, "from-file\n").unwrap();
    for (args, used) in [
        (vec!["--api-key-file", file.to_str().unwrap()], "from-file"),
        (vec!["--api-key", "from-flag"], "from-flag"),
    ] {
        let server = Server::start_with(Start {
            args: &args,
            env: &[("REDRAFT_API_KEY", "from-env")],
            ..Start::default()
        });
        let stderr = server.stderr();
        assert!(
            stderr.contains(&format!(
                "note: REDRAFT_API_KEY is set too and not used: the key of {} is the one clients must send",
                args[0]
            )),
            "{args:?}: {stderr}"
        );
        let ask = |key: &str| {
            let bearer = format!("Bearer {key}");
            let response = server.request(
                "POST",
                "/v1/completions",
                &[
                    ("Authorization", bearer.as_str()),
                    ("Content-Type", "application/json"),
                ],
                completion().as_bytes(),
            );
            response.status
        };
        assert_eq!(ask(used), 200, "{args:?}");
        assert_eq!(ask("from-env"), 401, "{args:?}");
    }
}
