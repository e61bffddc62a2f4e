//! The remote FIM backend (`redraft_runtime::backend`): against a
//! fake OpenAI-compatible server started here, which records each request exactly as it
//! arrived (the template around the planned prefix and suffix, `max_tokens`, `stop`, the
//! `Authorization` header) and answers as told, or never; then `redraft eval --backend` through
//! the real binary, against the fake, against `redraft serve` (the local engine's completions,
//! whatever the template) and against the real llama.cpp `llama-server` that
//! `scripts/setup-llama-server` builds, with its tiny random GGUF model.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use redraft_context::{Language, Source};
use redraft_engine::sampler::{Effort, SamplerConfig};
use redraft_runtime::backend::{self, Backend, BackendConfig, BackendError, FillRequest, Template};
use redraft_suggest::fim::{self, FimOptions};
use redraft_tests::cli::{benchmarks, lab_in_repo as redraft_in_repo, path};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// The fake server

/// One request as the fake server read it off the socket.
#[derive(Debug, Clone)]
struct Recorded {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Recorded {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("the client sends JSON")
    }
}

/// How the fake answers a request.
enum Reply {
    /// A status and a body (sent as JSON).
    Body(u16, String),
    /// Nothing, ever: the connection stays open until the client closes it.
    Hang,
}

fn ok_text(text: &str) -> Reply {
    Reply::Body(
        200,
        json!({
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 0,
            "model": "fake",
            "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": null}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        })
        .to_string(),
    )
}

struct Fake {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// A message each time a client closes a connection the fake was hanging on.
    closed: mpsc::Receiver<()>,
}

impl Fake {
    fn start(answer: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (closed_tx, closed) = mpsc::channel();
        let answer = Arc::new(answer);
        let recorded = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (answer, recorded, closed_tx) =
                    (answer.clone(), recorded.clone(), closed_tx.clone());
                std::thread::spawn(move || serve(stream, &*answer, &recorded, &closed_tx));
            }
        });
        Fake {
            addr,
            requests,
            closed,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The one completions request it got.
    fn completion_request(&self) -> Recorded {
        let requests: Vec<Recorded> = self
            .requests()
            .into_iter()
            .filter(|r| r.path == "/v1/completions")
            .collect();
        assert_eq!(requests.len(), 1, "{requests:#?}");
        requests.into_iter().next().unwrap()
    }
}

/// Answers requests on one connection (the client keeps it alive) until it closes.
fn serve(
    stream: TcpStream,
    answer: &(dyn Fn(&Recorded) -> Reply + Send + Sync),
    recorded: &Mutex<Vec<Recorded>>,
    closed: &mpsc::Sender<()>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let Some(request) = read_request(&mut reader) else {
            return;
        };
        recorded.lock().unwrap().push(request.clone());
        match answer(&request) {
            Reply::Body(status, body) => {
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                if writer
                    .write_all(head.as_bytes())
                    .and_then(|()| writer.write_all(body.as_bytes()))
                    .is_err()
                {
                    return;
                }
            }
            Reply::Hang => {
                // Until the client closes its end (read returns 0) or resets it.
                let mut byte = [0u8; 1];
                while matches!(reader.read(&mut byte), Ok(n) if n > 0) {}
                let _ = closed.send(());
                return;
            }
        }
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Recorded> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Recorded {
        method,
        path,
        headers,
        body: String::from_utf8(body).unwrap(),
    })
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn config(url: &str, template: Template) -> BackendConfig {
    BackendConfig {
        model: Some("served-model".into()),
        template,
        ..BackendConfig::new(url)
    }
}

fn options() -> FimOptions {
    FimOptions::new(32, SamplerConfig::effort(Effort::Medium))
}

/// A Rust fixture with `$0` at the cursor, as a document.
fn document(fixture: &str) -> (String, usize) {
    let cursor = fixture.find("$0").expect("a $0 cursor marker");
    (fixture.replace("$0", ""), cursor)
}

fn source(text: &str, cursor: usize) -> Source<'_> {
    Source {
        text,
        cursor,
        language: Language::Rust,
        tree: None,
    }
}

const ADD: &str = "fn add(a: i32, b: i32) -> i32 {\n    $0\n}\n";

/// The request a backend with `template` sends for `fixture`, and the plan it was made from:
/// the prompt must be exactly `expect_prompt` (with the plan's prefix and suffix, which the
/// fixture is small enough to keep whole).
fn check_request(template: Template, fixture: &str, expect_prompt: &str) -> Value {
    let fake = Fake::start(|_| ok_text("a + b"));
    let backend = Backend::new(BackendConfig {
        api_key: Some("sekrit".into()),
        ..config(&fake.url(), template)
    })
    .unwrap();
    let (text, cursor) = document(fixture);
    let prepared = backend.prepare(&source(&text, cursor), &[], &options());
    assert_eq!(
        prepared.plan.prefix,
        text[..cursor],
        "the plan keeps the whole prefix"
    );
    assert_eq!(
        prepared.plan.suffix,
        text[cursor..],
        "the plan keeps the whole suffix"
    );
    let fill = backend
        .fill(&FillRequest::for_prepared(&prepared), None)
        .unwrap();
    assert_eq!(fill.middles[0].text, "a + b");
    let request = fake.completion_request();
    assert_eq!(request.method, "POST");
    assert_eq!(request.header("authorization"), Some("Bearer sekrit"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    let body = request.json();
    assert_eq!(body["prompt"], expect_prompt, "{body:#}");
    assert_eq!(body["model"], "served-model");
    assert_eq!(body["max_tokens"], prepared.request.max_tokens);
    assert_eq!(
        body["max_tokens"], 32,
        "the canvas cap is the remote model's max_tokens"
    );
    assert_eq!(body["temperature"], 0.0);
    assert_eq!(body["stream"], false);
    let stops: Vec<&str> = body["stop"]
        .as_array()
        .map(|s| s.iter().map(|v| v.as_str().unwrap()).collect())
        .unwrap_or_default();
    assert_eq!(stops, template.stops());
    body
}

// ---------------------------------------------------------------------------------------------
// Requests

#[test]
fn each_template_wraps_the_planned_prefix_and_suffix() {
    let p = "fn add(a: i32, b: i32) -> i32 {\n    ";
    let s = "\n}\n";
    let cases = [
        (
            Template::Qwen,
            format!("<|fim_prefix|>{p}<|fim_suffix|>{s}<|fim_middle|>"),
        ),
        (
            Template::StarCoder,
            format!("<fim_prefix>{p}<fim_suffix>{s}<fim_middle>"),
        ),
        (Template::CodeLlama, format!("<PRE> {p} <SUF>{s} <MID>")),
        (
            Template::DeepSeek,
            format!("<｜fim▁begin｜>{p}<｜fim▁hole｜>{s}<｜fim▁end｜>"),
        ),
        (Template::Codestral, format!("[SUFFIX]{s}[PREFIX]{p}")),
    ];
    for (template, prompt) in cases {
        let body = check_request(template, ADD, &prompt);
        assert!(body.get("suffix").is_none(), "{template}: {body:#}");
    }
}

#[test]
fn suffix_mode_sends_the_prefix_as_prompt_and_the_suffix_field() {
    let body = check_request(
        Template::Suffix,
        ADD,
        "fn add(a: i32, b: i32) -> i32 {\n    ",
    );
    assert_eq!(body["suffix"], "\n}\n");
    assert!(
        body.get("stop").is_none(),
        "no template, no stops: {body:#}"
    );
}

#[test]
fn sampling_sends_the_temperature_the_seed_and_extra_stops() {
    let fake = Fake::start(|_| ok_text("x"));
    let backend = Backend::new(config(&fake.url(), Template::Qwen)).unwrap();
    let request = FillRequest {
        prefix: "a",
        suffix: "b",
        max_tokens: 7,
        temperature: 0.5,
        seed: Some(42),
        stop: vec!["\n\n".into()],
        n: 3,
    };
    backend.fill(&request, None).unwrap();
    let body = fake.completion_request().json();
    assert_eq!(body["max_tokens"], 7);
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["seed"], 42);
    assert_eq!(body["n"], 3);
    assert_eq!(body["stop"].as_array().unwrap().last().unwrap(), "\n\n");
    assert!(fake.completion_request().header("authorization").is_none());
}

#[test]
fn the_only_listed_model_is_named_when_none_is_configured() {
    let fake = Fake::start(|request| match request.path.as_str() {
        "/v1/models" => Reply::Body(
            200,
            json!({"object": "list", "data": [{"id": "qwen2.5-coder-7b", "object": "model"}]})
                .to_string(),
        ),
        _ => ok_text("x"),
    });
    let backend = Backend::new(BackendConfig::new(format!("{}/v1/", fake.url()))).unwrap();
    assert_eq!(
        backend.resolve_model(None).unwrap().as_deref(),
        Some("qwen2.5-coder-7b")
    );
    backend
        .fill(
            &FillRequest::for_prepared(&backend.prepare(&source("a", 1), &[], &options())),
            None,
        )
        .unwrap();
    assert_eq!(
        fake.completion_request().json()["model"],
        "qwen2.5-coder-7b"
    );
    let models = fake
        .requests()
        .iter()
        .filter(|r| r.path == "/v1/models")
        .count();
    assert_eq!(models, 1, "the list is asked once");

    let several =
        Fake::start(|_| Reply::Body(200, json!({"data": [{"id": "a"}, {"id": "b"}]}).to_string()));
    let backend = Backend::new(BackendConfig::new(several.url())).unwrap();
    let err = backend.resolve_model(None).unwrap_err().to_string();
    assert!(
        err.contains("serves several models (a, b)") && err.contains("--backend-model"),
        "{err}"
    );

    // One model under several names (`redraft serve` lists its aliases, each with the root it
    // serves) is named by its root; names serving different roots are several models.
    let aliased = Fake::start(|_| {
        let data = json!([
            {"id": "small-model", "root": "small-model"},
            {"id": "qwen2.5-coder:redraft", "root": "small-model"},
        ]);
        Reply::Body(200, json!({ "data": data }).to_string())
    });
    let backend = Backend::new(BackendConfig::new(aliased.url())).unwrap();
    assert_eq!(
        backend.resolve_model(None).unwrap().as_deref(),
        Some("small-model")
    );
    let two_roots = Fake::start(|_| {
        let data = json!([{"id": "a", "root": "a"}, {"id": "b", "root": "b"}]);
        Reply::Body(200, json!({ "data": data }).to_string())
    });
    let backend = Backend::new(BackendConfig::new(two_roots.url())).unwrap();
    let err = backend.resolve_model(None).unwrap_err().to_string();
    assert!(err.contains("serves several models (a, b)"), "{err}");

    // A server without the endpoint is sent no model name.
    let unlisted = Fake::start(|request| match request.path.as_str() {
        "/v1/models" => Reply::Body(404, "{}".into()),
        _ => ok_text("x"),
    });
    let backend = Backend::new(BackendConfig::new(unlisted.url())).unwrap();
    backend
        .fill(
            &FillRequest::for_prepared(&backend.prepare(&source("a", 1), &[], &options())),
            None,
        )
        .unwrap();
    assert!(unlisted.completion_request().json().get("model").is_none());
}

#[test]
fn backend_urls_name_the_completions_endpoint() {
    let check = |url: &str, completions: &str, models: &str| {
        let (c, m) = backend::endpoints(url).unwrap();
        assert_eq!((c.as_str(), m.as_str()), (completions, models), "{url}");
    };
    check(
        "http://gpu:8000",
        "http://gpu:8000/v1/completions",
        "http://gpu:8000/v1/models",
    );
    check(
        "http://gpu:8000/v1/",
        "http://gpu:8000/v1/completions",
        "http://gpu:8000/v1/models",
    );
    check(
        "https://gpu.example/v1/completions",
        "https://gpu.example/v1/completions",
        "https://gpu.example/v1/models",
    );
    check(
        "http://gpu/team/openai/v1",
        "http://gpu/team/openai/v1/completions",
        "http://gpu/team/openai/v1/models",
    );
    for (url, says) in [
        ("gpu:8000", "write it as http://HOST:PORT"),
        ("ftp://gpu/v1", "only http:// and https://"),
        ("http://", "empty host"),
    ] {
        let err = backend::endpoints(url).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("backend URL `{url}`")) && err.contains(says),
            "{err}"
        );
    }
}

#[test]
fn templates_parse_by_name_and_alias() {
    for template in Template::ALL {
        assert_eq!(template.name().parse::<Template>(), Ok(template));
    }
    assert_eq!("star_coder".parse::<Template>(), Ok(Template::StarCoder));
    assert_eq!("code-llama".parse::<Template>(), Ok(Template::CodeLlama));
    assert_eq!("DeepSeek_Coder".parse::<Template>(), Ok(Template::DeepSeek));
    assert_eq!(
        "gpt".parse::<Template>().unwrap_err(),
        "unknown FIM template `gpt` (one of: qwen, starcoder, codellama, deepseek, codestral, glm, suffix)"
    );
}

// ---------------------------------------------------------------------------------------------
// Answers

#[test]
fn the_answer_goes_through_finish_like_a_local_middle() {
    // The model wrote the statement, then went on past the body's end: finish keeps the
    // statement, exactly as it does for the local engine's middle.
    let raw = "a + b\n}\n\nfn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n";
    let fake = Fake::start(move |_| ok_text(raw));
    let backend = Backend::new(config(&fake.url(), Template::Qwen)).unwrap();
    let (text, cursor) = document(ADD);
    let outcome = backend
        .complete(&source(&text, cursor), &[], &options(), None)
        .unwrap();
    assert_eq!(outcome.fill.middles[0].text, raw);
    assert_eq!(outcome.fill.completion_tokens, Some(3));
    assert_eq!(outcome.fill.prompt_tokens, Some(10));
    assert_eq!(
        outcome.texts,
        fim::finish_middles([raw], &outcome.prepared.plan),
        "the same post-processing as a local middle"
    );
    assert_eq!(outcome.texts, ["a + b"]);
}

#[test]
fn a_middle_is_cut_at_a_stop_string_the_server_sent_back() {
    let fake = Fake::start(|_| ok_text("a + b<|endoftext|><|fim_prefix|>junk"));
    let backend = Backend::new(config(&fake.url(), Template::Qwen)).unwrap();
    let fill = backend
        .fill(
            &FillRequest::for_prepared(&backend.prepare(&source("a", 1), &[], &options())),
            None,
        )
        .unwrap();
    assert_eq!(fill.middles[0].text, "a + b");
    assert!(fill.middles[0].ended());
}

/// The error a fill against a fake answering `reply` returns, as a message.
fn error_for(reply: impl Fn() -> Reply + Send + Sync + 'static) -> String {
    let fake = Fake::start(move |_| reply());
    let backend = Backend::new(config(&fake.url(), Template::Qwen)).unwrap();
    let request = FillRequest {
        prefix: "a",
        suffix: "b",
        max_tokens: 4,
        temperature: 0.0,
        seed: None,
        stop: Vec::new(),
        n: 1,
    };
    let err = backend.fill(&request, None).unwrap_err();
    assert_ne!(err, BackendError::Cancelled);
    err.to_string().replace(&fake.url(), "URL")
}

#[test]
fn server_errors_and_malformed_answers_are_clear() {
    type Answer = Box<dyn Fn() -> Reply + Send + Sync>;
    let cases: Vec<(Answer, &str)> = vec![
        (
            Box::new(|| {
                Reply::Body(
                    500,
                    json!({"error": {"message": "CUDA out of memory", "type": "server_error"}})
                        .to_string(),
                )
            }),
            "URL/v1/completions answered HTTP 500: CUDA out of memory",
        ),
        (
            Box::new(|| Reply::Body(401, json!({"error": "invalid api key"}).to_string())),
            "URL/v1/completions answered HTTP 401: invalid api key (check the API key)",
        ),
        (
            Box::new(|| Reply::Body(404, json!({"detail": "Not Found"}).to_string())),
            "URL/v1/completions answered HTTP 404: Not Found (is this an OpenAI-compatible server? requests go to URL/v1/completions)",
        ),
        (
            Box::new(|| Reply::Body(503, "upstream overloaded".into())),
            "URL/v1/completions answered HTTP 503: upstream overloaded",
        ),
        (
            Box::new(|| Reply::Body(200, "<html>welcome</html>".into())),
            "URL/v1/completions: the answer is not JSON (expected value at line 1 column 1): <html>welcome</html>",
        ),
        (
            Box::new(|| Reply::Body(200, json!({"choices": []}).to_string())),
            "URL/v1/completions: the answer has no `choices[0].text` (is this an OpenAI-compatible completions endpoint?): {\"choices\":[]}",
        ),
        (
            Box::new(|| {
                Reply::Body(200, json!({"choices": [{"message": {"content": "x"}}]}).to_string())
            }),
            "URL/v1/completions: the answer has no `choices[0].text` (is this an OpenAI-compatible completions endpoint?): {\"choices\":[{\"message\":{\"content\":\"x\"}}]}",
        ),
    ];
    for (reply, expect) in cases {
        assert_eq!(error_for(reply), expect);
    }
}

#[test]
fn a_refused_connection_and_a_timeout_are_clear() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let backend = Backend::new(config(&url, Template::Qwen)).unwrap();
    let err = backend
        .fill(
            &FillRequest::for_prepared(&backend.prepare(&source("a", 1), &[], &options())),
            None,
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{url}/v1/completions: connection refused: is the server running and listening there?"
        )
    );

    let fake = Fake::start(|_| Reply::Hang);
    let backend = Backend::new(BackendConfig {
        timeout: Duration::from_millis(300),
        ..config(&fake.url(), Template::Qwen)
    })
    .unwrap();
    let err = backend
        .fill(
            &FillRequest::for_prepared(&backend.prepare(&source("a", 1), &[], &options())),
            None,
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}/v1/completions: no answer within 0.3 s: the server is busy or stuck, or the timeout is too short",
            fake.url()
        )
    );
}

// ---------------------------------------------------------------------------------------------
// Cancellation

#[test]
fn a_raised_cancel_flag_closes_the_request() {
    let fake = Fake::start(|request| match request.path.as_str() {
        "/v1/completions" if request.body.contains("hang") => Reply::Hang,
        _ => ok_text("after"),
    });
    let backend = Backend::new(config(&fake.url(), Template::Qwen)).unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let raiser = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            cancel.store(true, Ordering::SeqCst);
            Instant::now()
        })
    };
    let hang = FillRequest {
        prefix: "hang",
        suffix: "",
        max_tokens: 4,
        temperature: 0.0,
        seed: None,
        stop: Vec::new(),
        n: 1,
    };
    let result = backend.fill(&hang, Some(&cancel));
    let returned = Instant::now();
    let raised = raiser.join().unwrap();
    assert_eq!(result, Err(BackendError::Cancelled));
    assert!(
        returned.duration_since(raised) < Duration::from_millis(500),
        "returned {:?} after the flag",
        returned.duration_since(raised)
    );
    // The request's connection is closed, not left open on the server.
    fake.closed
        .recv_timeout(Duration::from_secs(5))
        .expect("the fake server saw the connection closed");
    assert_eq!(fake.requests().len(), 1);

    // The same client goes on working (a fresh connection).
    let after = FillRequest {
        prefix: "next",
        ..hang.clone()
    };
    assert_eq!(
        backend
            .fill(&after, Some(&AtomicBool::new(false)))
            .unwrap()
            .middles[0]
            .text,
        "after"
    );

    // A flag raised before the call sends nothing.
    let raised = AtomicBool::new(true);
    assert_eq!(
        backend.fill(&after, Some(&raised)),
        Err(BackendError::Cancelled)
    );
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn a_backend_dropped_inside_an_async_task_does_not_panic() {
    // The language server may replace its backend in a settings handler.
    let backend = Backend::new(BackendConfig::new("http://127.0.0.1:9")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async move { drop(backend) });
}

// ---------------------------------------------------------------------------------------------
// `redraft eval --backend`

/// Two match-scored Rust tasks (no tests to run).
fn write_tasks(dir: &Path) -> PathBuf {
    let tasks = [
        json!({"task_id": "Add/0", "language": "rust",
               "prompt": "fn add(a: i32, b: i32) -> i32 {\n    ", "suffix": "\n}\n",
               "canonical_solution": "a + b"}),
        json!({"task_id": "Mul/0", "language": "rust",
               "prompt": "fn mul(a: i32, b: i32) -> i32 {\n    ", "suffix": "\n}\n",
               "canonical_solution": "a * b"}),
    ];
    let file = dir.join("tasks.jsonl");
    let lines: Vec<String> = tasks.iter().map(Value::to_string).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    file
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `eval` of `tasks` through the backend at `url`, its results written to `out`, with `extra`
/// flags.
fn eval_through(url: &str, tasks: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "eval",
        "--tasks",
        path(tasks),
        "--out",
        path(out),
        "--backend",
        url,
    ];
    args.extend_from_slice(extra);
    redraft_in_repo(&args)
}

#[test]
fn eval_fills_fim_tasks_through_a_backend_and_records_it() {
    // The fake writes the right body for `add` and runs on past it (finish cuts it), a wrong
    // one for `mul`.
    let fake = Fake::start(|request| {
        let prompt = request.json()["prompt"].as_str().unwrap_or("").to_string();
        if prompt.contains("fn add") {
            ok_text("a + b\n}\n\nfn next() {}\n")
        } else {
            ok_text("a - b")
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let tasks = write_tasks(dir.path());
    let out = dir.path().join("out");
    let url = fake.url();
    let eval =
        |extra: &[&str]| eval_through(&url, &tasks, &out, &[&["--jobs", "1"], extra].concat());
    let output = eval(&["--backend-model", "served-model", "--backend-api-key", "k1"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(table.contains("backend served-model"), "{table}");

    let results = lines(&out.join("tasks.jsonl"));
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["task_id"], "Add/0");
    assert_eq!(
        results[0]["completion"], "a + b",
        "the raw middle went through finish"
    );
    assert_eq!(results[0]["exact_match"], true);
    assert_eq!(results[0]["raw_middle"], "a + b\n}\n\nfn next() {}\n");
    assert_eq!(results[0]["middle_tokens"], 3, "the server's usage");
    assert_eq!(results[1]["completion"], "a - b");
    assert_eq!(results[1]["exact_match"], false);

    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        2,
        "one request per task, the model named: {requests:#?}"
    );
    for request in &requests {
        assert_eq!(request.header("authorization"), Some("Bearer k1"));
        let body = request.json();
        assert_eq!(body["model"], "served-model");
        assert_eq!(body["max_tokens"], redraft_runtime::DEFAULT_MAX_TOKENS);
        assert!(
            body["prompt"]
                .as_str()
                .unwrap()
                .starts_with("<|fim_prefix|>fn "),
            "{body:#}"
        );
    }

    let run = read_json(&out.join("run.json"));
    assert_eq!(
        run["backend"],
        json!({"url": format!("{}/v1/completions", fake.url()), "model": "served-model",
               "template": "qwen", "context_tokens": 2048})
    );
    assert_eq!(run["source"], format!("{}/v1/completions", fake.url()));
    let summary = read_json(&out.join("summary.json"));
    assert_eq!(summary["setting"], "backend served-model");

    // Resuming the same run asks for nothing more; another template is another run.
    let output = eval(&["--backend-model", "served-model"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(fake.requests().len(), 2);
    let output = eval(&[
        "--backend-model",
        "served-model",
        "--backend-template",
        "starcoder",
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("holds results of another run"),
        "{}",
        stderr(&output)
    );
}

/// A server that lists no model is named by its host and port: never by the URL's
/// credentials, which no output of the run may hold.
#[test]
fn eval_names_an_unlisted_backend_by_host_without_its_credentials() {
    let fake = Fake::start(|request| {
        if request.method == "GET" {
            Reply::Body(404, "{}".to_string())
        } else {
            ok_text("a + b")
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let tasks = write_tasks(dir.path());
    let out = dir.path().join("out");
    let host = fake.url().trim_start_matches("http://").to_string();
    let url = format!("http://user:s3cret@{host}/v1");
    let output = eval_through(&url, &tasks, &out, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = read_json(&out.join("summary.json"));
    assert_eq!(summary["setting"], format!("backend {host}"));
    let mut seen = String::from_utf8_lossy(&output.stdout).into_owned() + &stderr(&output);
    for file in std::fs::read_dir(&out).unwrap() {
        seen += &std::fs::read_to_string(file.unwrap().path()).unwrap_or_default();
    }
    assert!(!seen.contains("s3cret"), "{seen}");
    let sent = fake.requests();
    assert!(
        sent.iter().all(|r| r
            .header("authorization")
            .is_some_and(|a| a.starts_with("Basic "))),
        "the credentials are still sent: {sent:?}"
    );
}

#[test]
fn eval_with_a_failing_backend_says_which_task_and_why() {
    let fake = Fake::start(|_| {
        Reply::Body(
            400,
            json!({"error": {"message": "prompt is too long"}}).to_string(),
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let tasks = write_tasks(dir.path());
    let url = fake.url();
    let out = dir.path().join("out");
    let output = eval_through(&url, &tasks, &out, &["--backend-model", "m"]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(
        err.contains(&format!(
            "task `Add/0`: {url}/v1/completions answered HTTP 400: prompt is too long"
        )),
        "{err}"
    );

    let output = redraft_in_repo(&[
        "eval",
        "--tasks",
        path(&tasks),
        "--backend",
        "http://127.0.0.1:9",
        "--effort",
        "low",
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output)
            .contains("the argument '--backend <URL>' cannot be used with '--effort <EFFORT>'"),
        "{}",
        stderr(&output)
    );
    let output = redraft_in_repo(&[
        "eval",
        "--tasks",
        path(&tasks),
        "--backend",
        &url,
        "--sweep",
        "--tau 0.5",
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("--tau is a local-engine flag"),
        "{}",
        stderr(&output)
    );
}

// ---------------------------------------------------------------------------------------------
// End to end against llama.cpp's llama-server

/// `llama-server` and the tiny model from scripts/setup-llama-server (see [`cli::llama`]).
fn llama_server() -> Option<(PathBuf, PathBuf)> {
    Some((
        redraft_tests::cli::llama("REDRAFT_LLAMA_SERVER")?,
        redraft_tests::cli::llama("REDRAFT_LLAMA_MODEL")?,
    ))
}

/// A running llama-server, killed on drop.
struct LlamaServer {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LlamaServer {
    fn start(server: &Path, model: &Path, dir: &Path) -> LlamaServer {
        assert!(
            server.is_file(),
            "{} is missing: rerun scripts/setup-llama-server",
            server.display()
        );
        assert!(
            model.is_file(),
            "{} is missing: rerun scripts/setup-llama-server",
            model.display()
        );
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let log = dir.join("llama-server.log");
        let child = Command::new(server)
            .args([
                "--model",
                path(model),
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .args([
                "--ctx-size",
                "4096",
                "--parallel",
                "1",
                "--threads",
                "1",
                "--no-webui",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
            .stderr(Stdio::from(
                std::fs::File::create(dir.join("llama-server.err")).unwrap(),
            ))
            .spawn()
            .unwrap();
        let mut server = LlamaServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        };
        server.wait_healthy(dir);
        server
    }

    /// Until `/health` answers 200 (the model is loaded).
    fn wait_healthy(&mut self, dir: &Path) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(120) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "llama-server exited ({status}): {}",
                    std::fs::read_to_string(dir.join("llama-server.err")).unwrap_or_default()
                );
            }
            let addr = self.url.trim_start_matches("http://").to_string();
            if let Ok(mut stream) = TcpStream::connect(&addr) {
                let _ = write!(
                    stream,
                    "GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
                );
                let mut answer = String::new();
                let _ = stream.read_to_string(&mut answer);
                if answer.starts_with("HTTP/1.1 200") {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "llama-server at {} not healthy after 120 s: {} {}",
            self.url,
            std::fs::read_to_string(&self.log).unwrap_or_default(),
            std::fs::read_to_string(dir.join("llama-server.err")).unwrap_or_default()
        );
    }
}

#[test]
fn eval_runs_fim_tasks_through_a_real_llama_server() {
    let Some((server, model)) = llama_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let llama = LlamaServer::start(&server, &model, dir.path());
    let tasks = benchmarks().join("humaneval-infilling/HumanEval-SingleLineInfilling.jsonl.gz");
    let out = dir.path().join("out");
    let output = redraft_in_repo(&[
        "eval",
        "--tasks",
        path(&tasks),
        "--limit",
        "2",
        "--jobs",
        "1",
        "--out",
        path(&out),
        "--backend",
        &llama.url,
        "--max-tokens",
        "16",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = String::from_utf8(output.stdout).unwrap();
    let model_name = model.file_name().unwrap().to_str().unwrap();
    assert!(
        table.contains("pass@1") && table.contains(&format!("backend {model_name}")),
        "{table}"
    );

    let results = lines(&out.join("tasks.jsonl"));
    assert_eq!(results.len(), 2);
    for result in &results {
        // Random weights write gibberish: what matters is that each task got a middle from
        // the server (at most 16 tokens) and an outcome.
        assert!(
            !result["raw_middle"].as_str().unwrap().is_empty(),
            "{result:#}"
        );
        assert!(result["completion"].is_string(), "{result:#}");
        let tokens = result["middle_tokens"].as_u64().unwrap();
        assert!((1..=16).contains(&tokens), "{result:#}");
        assert!(result["outcome"].is_string(), "{result:#}");
    }
    let run = read_json(&out.join("run.json"));
    assert_eq!(
        run["backend"]["url"],
        format!("{}/v1/completions", llama.url)
    );
    assert_eq!(run["backend"]["template"], "qwen");
    let listed = run["backend"]["model"].as_str().unwrap();
    assert!(
        listed.contains(model_name.trim_end_matches(".gguf")),
        "{run:#}"
    );

    // Suffix mode is accepted too (this llama-server ignores the `suffix` field on
    // /v1/completions, so docs/evaluation.md recommends a token template with it).
    let suffix_out = dir.path().join("suffix");
    let output = redraft_in_repo(&[
        "eval",
        "--tasks",
        path(&tasks),
        "--limit",
        "1",
        "--out",
        path(&suffix_out),
        "--backend",
        &llama.url,
        "--backend-template",
        "suffix",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        read_json(&suffix_out.join("run.json"))["backend"]["template"],
        "suffix"
    );
}

// ---------------------------------------------------------------------------------------------
// End to end against `redraft serve`

/// A running `redraft serve` on a free port, killed on drop.
struct RedraftServe {
    child: Child,
    url: String,
}

impl Drop for RedraftServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RedraftServe {
    fn start() -> RedraftServe {
        let child = Command::new(env!("CARGO_BIN_EXE_redraft-lab"))
            // Exact: a request's cache realigned from the last one's is close, not equal, and
            // these tests hold the server's middles to the local engine's.
            .args(["serve", "--bind", "127.0.0.1:0", "--edit-reuse", "off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Owned by the guard at once, so any failure below still kills and reaps it.
        let mut serve = RedraftServe {
            child,
            url: String::new(),
        };
        let mut stderr = BufReader::new(serve.child.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            if stderr.read_line(&mut line).unwrap() == 0 {
                panic!("redraft serve ended before listening: {seen}");
            }
            seen.push_str(&line);
            if let Some(at) = line.find("listening on ") {
                serve.url = line[at + "listening on ".len()..].trim().to_string();
                // Keep draining its log so it never blocks on a full pipe.
                std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
                return serve;
            }
        }
    }
}

#[test]
fn eval_through_redraft_serve_matches_the_local_engine() {
    // The same embedded model behind HTTP: each template is split back into prefix and suffix
    // by the server, so every middle must be the one the local engine writes.
    let serve = RedraftServe::start();
    let dir = tempfile::tempdir().unwrap();
    let tasks = benchmarks().join("humaneval-infilling/HumanEval-SingleLineInfilling.jsonl.gz");
    let completions = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "eval",
            "--tasks",
            path(&tasks),
            "--limit",
            "3",
            "--jobs",
            "1",
            "--out",
            path(out),
        ];
        args.extend_from_slice(extra);
        let output = redraft_in_repo(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        lines(&out.join("tasks.jsonl"))
            .iter()
            .map(|r| r["completion"].as_str().unwrap().to_string())
            .collect::<Vec<String>>()
    };
    let local = completions(&dir.path().join("local"), &[]);
    assert_eq!(local.len(), 3);
    for template in ["qwen", "codestral", "suffix"] {
        let remote = completions(
            &dir.path().join(template),
            &[
                "--backend",
                &serve.url,
                "--backend-model",
                "redraft-default",
                "--backend-template",
                template,
            ],
        );
        assert_eq!(remote, local, "template {template}");
    }
}
