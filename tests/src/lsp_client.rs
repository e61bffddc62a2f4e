//! The test side of the wire: the real `redraft lsp` process driven by async-lsp's client main
//! loop (`Lsp`). Messages are raw JSON so tests can also send what a broken client would; `Raw`
//! writes bytes, for what no client library can send.

use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_lsp::router::Router;
use async_lsp::{AnyNotification, MainLoop, ResponseError, ServerSocket};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// Declares a request or notification whose params and result are plain JSON.
macro_rules! raw {
    (request $name:ident = $method:literal) => {
        pub enum $name {}
        impl async_lsp::lsp_types::request::Request for $name {
            type Params = Value;
            type Result = Value;
            const METHOD: &'static str = $method;
        }
    };
    (notification $name:ident = $method:literal) => {
        pub enum $name {}
        impl async_lsp::lsp_types::notification::Notification for $name {
            type Params = Value;
            const METHOD: &'static str = $method;
        }
    };
}

raw!(request Initialize = "initialize");
raw!(request Shutdown = "shutdown");
raw!(request InlineCompletion = "textDocument/inlineCompletion");
raw!(request Completion = "textDocument/completion");
raw!(request CopilotInlineEdit = "textDocument/copilotInlineEdit");
raw!(request ExecuteCommand = "workspace/executeCommand");
raw!(request Unknown = "redraft/noSuchMethod");
raw!(notification Initialized = "initialized");
raw!(notification Exit = "exit");
raw!(notification DidOpen = "textDocument/didOpen");
raw!(notification DidChange = "textDocument/didChange");
raw!(notification DidClose = "textDocument/didClose");
raw!(notification NotebookDidOpen = "notebookDocument/didOpen");
raw!(notification NotebookDidChange = "notebookDocument/didChange");
raw!(notification NotebookDidClose = "notebookDocument/didClose");
raw!(notification DidChangeConfiguration = "workspace/didChangeConfiguration");
raw!(notification DidChangeWorkspaceFolders = "workspace/didChangeWorkspaceFolders");
raw!(notification CancelRequest = "$/cancelRequest");
raw!(notification DidShowInlineEdit = "textDocument/didShowInlineEdit");

pub const CANCELLED: i32 = -32800;
pub const INVALID_PARAMS: i32 = -32602;

type Answer = Result<Value, async_lsp::Error>;

/// A request on its way: its JSON-RPC id (for `$/cancelRequest`) and its answer.
pub struct Pending {
    pub id: i32,
    pub sent: Instant,
    answer: Pin<Box<dyn Future<Output = Answer> + Send>>,
}

impl Pending {
    /// The result, or the error the server answered with (a transport failure fails the test).
    pub async fn answer(self) -> Result<Value, ResponseError> {
        match tokio::time::timeout(Duration::from_secs(120), self.answer).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(async_lsp::Error::Response(err))) => Err(err),
            Ok(Err(other)) => panic!("request {} failed on the transport: {other}", self.id),
            Err(_) => panic!("request {} got no answer in 120 s", self.id),
        }
    }
}

pub struct Lsp {
    socket: ServerSocket,
    /// The client's main loop; stopped when the client goes.
    mainloop: tokio::task::JoinHandle<()>,
    child: Child,
    /// async-lsp numbers outgoing requests 0, 1, 2... in the order they are queued; sending
    /// under this lock keeps our count equal to the id it assigns.
    next_id: tokio::sync::Mutex<i32>,
    pub notifications: Arc<Mutex<Vec<AnyNotification>>>,
    stderr: Arc<Mutex<String>>,
    pub initialize_result: Value,
}

/// How a test starts the server.
pub struct Start {
    pub options: Value,
    pub encodings: Option<Vec<&'static str>>,
    pub progress: bool,
    /// Whether the client announces inline completions (`textDocument.inlineCompletion`); a
    /// client without them (Helix) gets completion items.
    pub inline: bool,
    /// Wait until the model is loaded (or failed to load) before returning.
    pub wait_for_model: bool,
    /// `REDRAFT_STEP_DELAY_MS` for the server: a pause after every denoising step, so a test
    /// can act while a run is under way however fast the model is.
    pub step_delay_ms: Option<u64>,
    /// The workspace folder (`rootUri` and `workspaceFolders`), if any.
    pub root: Option<&'static str>,
    /// The server's environment beyond this process's: a value sets the variable, `None`
    /// removes it.
    pub env: Vec<(&'static str, Option<String>)>,
}

/// `options` with `minConfidence` 0 where they run the embedded default model and set no bar:
/// the bar a shipped model is tuned with (`fim_min_confidence`) is not what these tests are
/// about, and would make the ones that need a suggestion depend on it. (A test that names a
/// model and switches to the embedded one later sets its own.)
fn unbarred(mut options: Value) -> Value {
    let object = match options.get("redraft") {
        Some(Value::Object(_)) => options.get_mut("redraft").and_then(Value::as_object_mut),
        _ => options.as_object_mut(),
    };
    if let Some(object) = object {
        if !object.contains_key("model") && !object.contains_key("minConfidence") {
            object.insert("minConfidence".into(), json!(0));
        }
    }
    options
}

impl Default for Start {
    fn default() -> Start {
        Start {
            // Low effort and small canvases keep the tests fast on the tiny default model.
            options: json!({"effort": "low", "maxTokens": 12}),
            encodings: None,
            progress: true,
            inline: true,
            wait_for_model: true,
            step_delay_ms: None,
            root: None,
            env: Vec::new(),
        }
    }
}

impl Lsp {
    pub async fn start(start: Start) -> Lsp {
        let notifications: Arc<Mutex<Vec<AnyNotification>>> = Arc::default();
        let (mainloop, socket) = MainLoop::new_client(|_server| {
            let mut router = Router::new(notifications.clone());
            router
                .request::<async_lsp::lsp_types::request::WorkDoneProgressCreate, _>(|_, _| {
                    std::future::ready(Ok(()))
                })
                .unhandled_notification(|seen, notification| {
                    seen.lock().unwrap().push(notification);
                    ControlFlow::Continue(())
                });
            router
        });
        let (mut child, stderr, _) = spawn_server(start.step_delay_ms, &start.env);
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        // The loop holds a socket of its own while it runs: async-lsp's loop panics when every
        // socket is gone before it ends.
        let own = socket.clone();
        let mainloop = tokio::spawn(async move {
            let _own = own;
            // Ends with an error when the server exits; a protocol error (something on stdout
            // that is not LSP) shows up as a test waiting on an answer that never comes.
            if let Err(err) = mainloop
                .run_buffered(stdout.compat(), stdin.compat_write())
                .await
            {
                eprintln!("client main loop ended: {err}");
            }
        });
        let mut lsp = Lsp {
            socket,
            mainloop,
            child,
            next_id: tokio::sync::Mutex::new(0),
            notifications,
            stderr,
            initialize_result: Value::Null,
        };
        let mut general = json!({});
        if let Some(encodings) = &start.encodings {
            general["positionEncodings"] = json!(encodings);
        }
        let folders = start
            .root
            .map(|root| json!([{"uri": root, "name": "workspace"}]));
        let text_document = if start.inline {
            json!({"inlineCompletion": {"dynamicRegistration": false}})
        } else {
            json!({"completion": {"completionItem": {"snippetSupport": false}}})
        };
        let params = json!({
            "processId": std::process::id(),
            "rootUri": start.root,
            "workspaceFolders": folders,
            "capabilities": {
                "general": general,
                "window": {"workDoneProgress": start.progress},
                "textDocument": text_document,
            },
            "initializationOptions": unbarred(start.options),
        });
        lsp.initialize_result = lsp
            .send::<Initialize>(params)
            .await
            .answer()
            .await
            .expect("initialize succeeds");
        lsp.notify::<Initialized>(json!({}));
        if start.wait_for_model {
            lsp.wait_for_log(|m| m.contains("model loaded from") || m.contains("model not loaded"))
                .await;
        }
        lsp
    }

    /// Queues a request now (its id is fixed here) and returns the pending answer.
    pub async fn send<R>(&self, params: Value) -> Pending
    where
        R: async_lsp::lsp_types::request::Request<Params = Value, Result = Value>,
    {
        let mut next_id = self.next_id.lock().await;
        let socket = self.socket.clone();
        let mut answer: Pin<Box<dyn Future<Output = Answer> + Send>> =
            Box::pin(async move { socket.request::<R>(params).await });
        // One poll queues the request with the main loop, which numbers it. On a busy machine
        // this thread can lose its core between queueing and looking for the answer, long
        // enough for a quick answer (`shutdown`'s) to be back already.
        let sent = Instant::now();
        if let std::task::Poll::Ready(done) = futures::poll!(answer.as_mut()) {
            answer = Box::pin(std::future::ready(done));
        }
        let id = *next_id;
        *next_id += 1;
        Pending { id, sent, answer }
    }

    pub fn notify<N>(&self, params: Value)
    where
        N: async_lsp::lsp_types::notification::Notification<Params = Value>,
    {
        self.socket
            .notify::<N>(params)
            .expect("the client main loop runs");
    }

    pub fn cancel(&self, id: i32) {
        self.notify::<CancelRequest>(json!({"id": id}));
    }

    pub fn open(&self, uri: &str, language: &str, text: &str) {
        self.notify::<DidOpen>(json!({"textDocument": {
            "uri": uri, "languageId": language, "version": 0, "text": text,
        }}));
    }

    /// One incremental change: `range` = [[line, character], [line, character]].
    pub fn change(&self, uri: &str, version: i32, range: [[u32; 2]; 2], text: &str) {
        self.notify::<DidChange>(json!({
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{
                "range": {
                    "start": {"line": range[0][0], "character": range[0][1]},
                    "end": {"line": range[1][0], "character": range[1][1]},
                },
                "text": text,
            }],
        }));
    }

    pub async fn inline(&self, uri: &str, line: u32, character: u32, invoked: bool) -> Pending {
        self.send::<InlineCompletion>(json!({
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": character},
            "context": {"triggerKind": if invoked { 1 } else { 2 }},
        }))
        .await
    }

    /// A `textDocument/completion` request, as a client without inline completions asks while
    /// the user types (`TriggerForIncompleteCompletions`), or explicitly (`Invoked`).
    pub async fn completion(&self, uri: &str, line: u32, character: u32, invoked: bool) -> Pending {
        self.send::<Completion>(json!({
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": character},
            "context": {"triggerKind": if invoked { 1 } else { 3 }},
        }))
        .await
    }

    /// A next-edit request (Copilot's `textDocument/copilotInlineEdit`) for `version`.
    pub async fn next_edit(&self, uri: &str, version: i32, line: u32, character: u32) -> Pending {
        self.send::<CopilotInlineEdit>(json!({
            "textDocument": {"uri": uri, "version": version},
            "position": {"line": line, "character": character},
        }))
        .await
    }

    /// Notifications of `method` received so far.
    pub fn received(&self, method: &str) -> Vec<Value> {
        self.notifications
            .lock()
            .unwrap()
            .iter()
            .filter(|n| n.method == method)
            .map(|n| n.params.clone())
            .collect()
    }

    /// Waits (up to a minute) for a `window/logMessage` line matching `pred`.
    pub async fn wait_for_log(&self, pred: impl Fn(&str) -> bool) -> String {
        self.wait_for("window/logMessage", |p| {
            pred(p["message"].as_str().unwrap_or(""))
        })
        .await["message"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Waits (up to a minute) for a notification of `method` whose params match `pred`.
    pub async fn wait_for(&self, method: &str, pred: impl Fn(&Value) -> bool) -> Value {
        poll_until(
            Duration::from_secs(60),
            &format!("a matching {method}"),
            || self.stderr(),
            || self.received(method).into_iter().find(|p| pred(p)),
        )
        .await
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (up to a minute) until the server's stderr, as read so far, matches `pred`; all of
    /// it.
    pub async fn wait_for_stderr(&self, pred: impl Fn(&str) -> bool) -> String {
        poll_until(
            Duration::from_secs(60),
            "a matching stderr",
            || self.stderr(),
            || Some(self.stderr()).filter(|stderr| pred(stderr)),
        )
        .await
    }

    /// Resident memory of the server process, in bytes.
    pub fn rss(&self) -> usize {
        let pid = self.child.id().expect("the server is running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        let kb: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    }

    /// `shutdown` then `exit`; the process must end by itself with status 0.
    pub async fn shutdown(mut self) {
        let answer = self.send::<Shutdown>(Value::Null).await.answer().await;
        assert_eq!(answer.unwrap(), Value::Null);
        self.notify::<Exit>(Value::Null);
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the server exits after `exit`")
            .unwrap();
        assert!(
            status.success(),
            "exit status {status}; stderr:\n{}",
            self.stderr()
        );
    }
}

impl Drop for Lsp {
    fn drop(&mut self) {
        self.mainloop.abort();
    }
}

/// The items of an inline completion answer (an array, a list, or null).
pub fn items(answer: &Value) -> Vec<Value> {
    match answer {
        Value::Null => Vec::new(),
        Value::Array(items) => items.clone(),
        Value::Object(list) => list["items"].as_array().cloned().unwrap_or_default(),
        other => panic!("not an inline completion answer: {other}"),
    }
}

/// Spawns `redraft lsp` with piped stdio; its stderr is collected into the returned string by
/// the returned task, which ends when the process closes stderr.
pub fn spawn_server(
    step_delay_ms: Option<u64>,
    env: &[(&str, Option<String>)],
) -> (Child, Arc<Mutex<String>>, tokio::task::JoinHandle<()>) {
    let mut command = Command::new(crate::cli::redraft_binary());
    if let Some(ms) = step_delay_ms {
        command.env("REDRAFT_STEP_DELAY_MS", ms.to_string());
    }
    for (name, value) in env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let mut child = command
        .args(["lsp", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("redraft starts");
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stderr: Arc<Mutex<String>> = Arc::default();
    let reader = tokio::spawn({
        let stderr = stderr.clone();
        async move {
            let mut buf = vec![0u8; 64 << 10];
            while let Ok(n) = stderr_pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                stderr
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
    });
    (child, stderr, reader)
}

/// One frame of the base protocol around `body`.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    frame.extend_from_slice(body);
    frame
}

/// The real server driven with raw bytes on its stdin. Whatever it writes must be well-formed
/// frames of JSON (a reader task checks each one); they are kept in arrival order.
pub struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    received: Arc<Mutex<Vec<Value>>>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
    next_id: i64,
}

impl Raw {
    /// Starts the server, initializes it with `options` and waits for its model.
    pub async fn start(options: Value) -> Raw {
        Raw::start_stepping(options, None).await
    }

    /// [`Raw::start`] with a pause of `step_delay_ms` after every denoising step, so a request
    /// is still running when the next message comes.
    pub async fn start_stepping(options: Value, step_delay_ms: Option<u64>) -> Raw {
        let mut raw = Raw::uninitialized(step_delay_ms);
        let id = raw
            .request(
                "initialize",
                json!({"processId": null, "rootUri": null, "capabilities": {}, "initializationOptions": unbarred(options)}),
            )
            .await;
        let result = raw.answer(id).await;
        assert!(
            result.get("result").is_some(),
            "initialize failed: {result}"
        );
        raw.notify("initialized", json!({})).await;
        raw.wait_for_log(|m| m.contains("model loaded from") || m.contains("model not loaded"))
            .await;
        raw
    }

    /// The server started, nothing sent to it yet (not even `initialize`).
    pub fn uninitialized(step_delay_ms: Option<u64>) -> Raw {
        let (mut child, stderr, stderr_reader) = spawn_server(step_delay_ms, &[]);
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().unwrap();
        let received: Arc<Mutex<Vec<Value>>> = Arc::default();
        tokio::spawn({
            let received = received.clone();
            async move {
                let mut buf = Vec::new();
                let mut chunk = vec![0u8; 64 << 10];
                loop {
                    while let Some((body, used)) = Raw::parse_frame(&buf) {
                        let value: Value = serde_json::from_slice(body).unwrap_or_else(|err| {
                            panic!(
                                "the server wrote a body that is not JSON ({err}): {:?}",
                                String::from_utf8_lossy(body)
                            )
                        });
                        received.lock().unwrap().push(value);
                        buf.drain(..used);
                    }
                    match stdout.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                assert!(
                    buf.is_empty(),
                    "the server's output ended inside a frame: {:?}",
                    String::from_utf8_lossy(&buf)
                );
            }
        });
        Raw {
            child,
            stdin,
            received,
            stderr,
            stderr_reader: Some(stderr_reader),
            next_id: 0,
        }
    }

    /// A complete `Content-Length` frame at the start of `buf`: its body and the bytes it took.
    /// The server must write exactly `Content-Length: N\r\n\r\n`; anything else fails the test.
    fn parse_frame(buf: &[u8]) -> Option<(&[u8], usize)> {
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
        let header = std::str::from_utf8(&buf[..end]).expect("the server's header is ASCII");
        let len: usize = header
            .strip_prefix("Content-Length: ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("the server wrote a bad header: {header:?}"));
        let body = buf.get(end + 4..end + 4 + len)?;
        Some((body, end + 4 + len))
    }

    pub async fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(bytes)
            .await
            .expect("the server reads stdin");
        stdin.flush().await.unwrap();
    }

    pub async fn send(&mut self, message: Value) {
        self.write(&frame(message.to_string().as_bytes())).await;
    }

    /// The framed bytes of a request, and its id (for requests written by hand).
    pub fn request_bytes(&mut self, method: &str, params: Value) -> (Vec<u8>, i64) {
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        (frame(body.to_string().as_bytes()), id)
    }

    pub async fn request(&mut self, method: &str, params: Value) -> i64 {
        let (bytes, id) = self.request_bytes(method, params);
        self.write(&bytes).await;
        id
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// An inline completion request's framed bytes, and its id.
    pub fn inline_bytes(&mut self, uri: &str, line: u32, character: u32) -> (Vec<u8>, i64) {
        self.request_bytes(
            "textDocument/inlineCompletion",
            json!({
                "textDocument": {"uri": uri},
                "position": {"line": line, "character": character},
                "context": {"triggerKind": 2},
            }),
        )
    }

    /// The response to request `id` (waits up to two minutes).
    pub async fn answer(&self, id: i64) -> Value {
        self.wait_for(|m| {
            m["id"] == json!(id) && (m.get("result").is_some() || m.get("error").is_some())
        })
        .await
    }

    /// The response to request `id` if it has come already (no waiting).
    pub fn answered(&self, id: i64) -> Option<Value> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .find(|m| {
                m["id"] == json!(id) && (m.get("result").is_some() || m.get("error").is_some())
            })
            .cloned()
    }

    /// Waits (up to two minutes) until `count` error responses with a null id have come; all
    /// of them.
    pub async fn wait_for_unaddressed_errors(&self, count: usize) -> Vec<Value> {
        poll_until(
            Duration::from_secs(120),
            &format!("{count} error(s) with a null id"),
            || self.stderr(),
            || Some(self.unaddressed_errors()).filter(|errors| errors.len() >= count),
        )
        .await
    }

    /// Error responses with a null id (answers to what could not be read), received so far.
    pub fn unaddressed_errors(&self) -> Vec<Value> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m.get("id") == Some(&Value::Null) && m.get("error").is_some())
            .map(|m| m["error"].clone())
            .collect()
    }

    /// `window/logMessage` texts received so far.
    pub fn logs(&self) -> Vec<String> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m["method"] == "window/logMessage")
            .map(|m| m["params"]["message"].as_str().unwrap_or("").to_string())
            .collect()
    }

    pub async fn wait_for_log(&self, pred: impl Fn(&str) -> bool) -> String {
        let found = self
            .wait_for(|m| {
                m["method"] == "window/logMessage"
                    && pred(m["params"]["message"].as_str().unwrap_or(""))
            })
            .await;
        found["params"]["message"].as_str().unwrap().to_string()
    }

    pub async fn wait_for(&self, pred: impl Fn(&Value) -> bool) -> Value {
        poll_until(
            Duration::from_secs(120),
            "a matching message",
            || self.stderr(),
            || {
                self.received
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|m| pred(m))
                    .cloned()
            },
        )
        .await
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Closes stdin (the end of input).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits (up to 30 s) for the server to exit by itself; its exit code. All of its stderr
    /// has been read by then.
    pub async fn exit_code(&mut self) -> Option<i32> {
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the server did not exit; stderr:\n{}", self.stderr()))
            .unwrap();
        if let Some(reader) = self.stderr_reader.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), reader).await;
        }
        status.code()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// Polls `find` every 10 ms until it finds something; fails after `within`, naming `what` and
/// showing the server's stderr.
async fn poll_until<T>(
    within: Duration,
    what: &str,
    stderr: impl Fn() -> String,
    mut find: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = find() {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} within {within:?}; stderr:\n{}",
            stderr()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
