//! The server in process, for this crate's tests: the real [`Server`] behind tower-lsp-server's
//! service, fed one message at a time as the transport's single task feeds it, so a test decides
//! exactly how handlers interleave (a request run up to its first `.await`, then an edit, then
//! the rest of the request). What the server sends the client is kept; its next-edit jobs go to
//! the test ([`Jobs`]), which answers each by hand, instead of to a model. (End-to-end tests of
//! the real binary over stdio are in `cli/tests/cli/lsp/`.)

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tower::Service;
use tower_lsp_server::jsonrpc::{Request, Response};
use tower_lsp_server::{ExitedError, LspService};

use crate::document_key::DocumentKey;
use crate::inference::{EditJob, EditRunner, JobError, NextEdit, Pending};
use crate::server::Server;

/// The longest a test waits for something the server must do: a bound on failing, never a
/// pause (a passing test goes on as soon as it happens), so slow machines only fail later.
const PATIENCE: Duration = Duration::from_secs(30);

/// A next-edit job the server started: what it asked, and the answer the test gives it.
pub struct ScriptedJob {
    pub job: EditJob,
    answer: oneshot::Sender<Result<NextEdit, JobError>>,
}

impl ScriptedJob {
    /// The job's cancel flag is up (the runtime would stop it at its next step).
    pub fn cancelled(&self) -> bool {
        self.job.cancel.load(Ordering::Relaxed)
    }

    pub fn answer(self, result: Result<NextEdit, JobError>) {
        let _ = self.answer.send(result);
    }
}

/// Hands each job to the test.
struct ScriptedRunner(mpsc::UnboundedSender<ScriptedJob>);

impl EditRunner for ScriptedRunner {
    fn submit_edit(&self, job: EditJob) -> Pending<NextEdit> {
        let (answer, rx) = oneshot::channel();
        let _ = self.0.send(ScriptedJob { job, answer });
        // A job the test drops unanswered ends as a cancelled one does in the runtime.
        async move { rx.await.unwrap_or(Err(JobError::Cancelled)) }.boxed()
    }
}

/// The next-edit jobs the server starts, in order.
pub struct Jobs(mpsc::UnboundedReceiver<ScriptedJob>);

impl Jobs {
    pub async fn next(&mut self) -> ScriptedJob {
        tokio::time::timeout(PATIENCE, self.0.recv())
            .await
            .expect("a next-edit job starts")
            .expect("the server is still running")
    }

    /// Fails if a job was started that the test has not taken yet.
    pub fn assert_none_started(&mut self) {
        if let Ok(job) = self.0.try_recv() {
            panic!(
                "a next-edit job started: {} v{} @{}",
                job.job.document.uri.as_str(),
                job.job.document.version,
                job.job.cursor
            );
        }
    }
}

/// A request's answer: its result, or its error's code.
pub type Answer = Result<Value, i64>;

/// A request on its way (see [`TestServer::request`]).
pub struct Call {
    pub id: i64,
    answer: BoxFuture<'static, Result<Option<Response>, ExitedError>>,
}

impl Call {
    pub async fn answer(self) -> Answer {
        let response = tokio::time::timeout(PATIENCE, self.answer)
            .await
            .unwrap_or_else(|_| panic!("request {} is not answered", self.id))
            .expect("the server has not exited")
            .expect("a request is answered");
        match response.into_parts().1 {
            Ok(value) => Ok(value),
            Err(err) => Err(err.code.code()),
        }
    }
}

/// `future`, run up to its first `.await` (the rest runs when it is awaited).
pub fn begin<F: std::future::Future>(future: F) -> std::pin::Pin<Box<F>> {
    let mut future = Box::pin(future);
    let waker = futures::task::noop_waker();
    let _ = future.as_mut().poll(&mut Context::from_waker(&waker));
    future
}

pub struct TestServer {
    service: LspService<Server>,
    /// The requests and notifications the server sent the client, as `{method, params}`.
    sent: Arc<Mutex<Vec<Value>>>,
    next_id: i64,
}

pub const CANCELLED: i64 = -32800;

impl TestServer {
    /// An initialized server with `options` (debug logging on, a model path that does not
    /// load: next edits never reach a model here, and inline completions answer nothing).
    pub async fn start(mut options: Value) -> (TestServer, Jobs) {
        let (tx, rx) = mpsc::unbounded_channel();
        let runner: Arc<dyn EditRunner> = Arc::new(ScriptedRunner(tx));
        let (service, socket) =
            crate::service(|client| Server::with_edit_runner(client, true, Some(runner)));
        let sent: Arc<Mutex<Vec<Value>>> = Arc::default();
        let (mut requests, mut responses) = socket.split();
        tokio::spawn({
            let sent = sent.clone();
            async move {
                while let Some(request) = requests.next().await {
                    let (method, id, params) = request.into_parts();
                    sent.lock()
                        .unwrap()
                        .push(json!({"method": method, "params": params}));
                    if let Some(id) = id {
                        let _ = responses.send(Response::from_ok(id, Value::Null)).await;
                    }
                }
            }
        });
        let mut server = TestServer {
            service,
            sent,
            next_id: 0,
        };
        options["model"] = json!("/nonexistent/redraft-test-model");
        let initialize = server
            .request(
                "initialize",
                json!({"processId": null, "rootUri": "file:///w", "capabilities": {},
                       "initializationOptions": options}),
            )
            .await;
        initialize.answer().await.expect("initialize succeeds");
        server.notify("initialized", json!({})).await;
        (server, Jobs(rx))
    }

    pub fn server(&self) -> &Server {
        self.service.inner()
    }

    async fn call(
        &mut self,
        request: Request,
    ) -> BoxFuture<'static, Result<Option<Response>, ExitedError>> {
        futures::future::poll_fn(|cx| self.service.poll_ready(cx))
            .await
            .expect("the server has not exited");
        // As the transport does.
        if let Some(warning) = crate::transport::unreadable(&request) {
            self.server().log.warn(warning);
        }
        self.service.call(request)
    }

    /// Sends a request. Its handler has run up to its first `.await` when this returns, as the
    /// transport's task polls a new handler at once; the rest runs while the answer is awaited.
    pub async fn request(&mut self, method: &'static str, params: Value) -> Call {
        let id = self.next_id;
        self.next_id += 1;
        let request = Request::build(method).id(id).params(params).finish();
        let mut answer = self.call(request).await;
        let waker = futures::task::noop_waker();
        if let Poll::Ready(done) = answer.as_mut().poll(&mut Context::from_waker(&waker)) {
            answer = futures::future::ready(done).boxed();
        }
        Call { id, answer }
    }

    /// Sends a notification and runs its handler to the end.
    pub async fn notify(&mut self, method: &'static str, params: Value) {
        let request = Request::build(method).params(params).finish();
        let handled = self.call(request).await;
        handled.await.expect("the server has not exited");
    }

    pub async fn open(&mut self, uri: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "rust", "version": 0, "text": text}}),
        )
        .await;
    }

    /// Replaces `[line, character]..[line, character]` with `text`; `None`: the whole text.
    pub async fn change(
        &mut self,
        uri: &str,
        version: i32,
        range: Option<[[u32; 2]; 2]>,
        text: &str,
    ) {
        let change = match range {
            Some([[l0, c0], [l1, c1]]) => json!({
                "range": {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}},
                "text": text,
            }),
            None => json!({"text": text}),
        };
        self.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}),
        )
        .await;
    }

    pub async fn next_edit(&mut self, uri: &str, version: i32, line: u32, character: u32) -> Call {
        self.request(
            "textDocument/copilotInlineEdit",
            json!({"textDocument": {"uri": uri, "version": version},
                   "position": {"line": line, "character": character}}),
        )
        .await
    }

    pub async fn inline(&mut self, uri: &str, line: u32, character: u32) -> Call {
        self.request(
            "textDocument/inlineCompletion",
            json!({"textDocument": {"uri": uri},
                   "position": {"line": line, "character": character},
                   "context": {"triggerKind": 2}}),
        )
        .await
    }

    pub async fn cancel(&mut self, id: i64) {
        self.notify("$/cancelRequest", json!({"id": id})).await;
    }

    /// Holds the document owner until the returned guard is dropped (see
    /// [`crate::documents::Documents::hold`]): a request sent meanwhile is still waiting for its
    /// snapshot after [`request`](Self::request).
    pub fn hold_documents(&self) -> std::sync::mpsc::Sender<()> {
        self.server().documents.hold()
    }

    /// Returns once the document owner has handled everything sent before (its queue is in
    /// order), answers to snapshots included.
    pub async fn settled(&self, uri: &str) {
        let _ = self
            .server()
            .documents
            .snapshot(DocumentKey::parse(uri), false)
            .await;
    }

    pub fn logs(&self) -> Vec<String> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m["method"] == "window/logMessage")
            .map(|m| m["params"]["message"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// Waits for a log line containing `text`.
    pub async fn wait_for_log(&self, text: &str) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(line) = self.logs().into_iter().find(|l| l.contains(text)) {
                return line;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no log line with {text:?}; the log:\n{}",
                self.logs().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}
