//! The stdio transport, owned here rather than left to tower-lsp-server's `Server`: that read
//! loop ends at the first frame it cannot decode (tokio-util's `FramedRead` ends its stream
//! after a decoder error), and the server then exited with status 0 on one bad message. Here
//! nothing on stdin ends the session but the end of input or `exit`, and nothing is dropped
//! without a word: a notification whose params the service cannot read, which it ignores
//! silently, is a warning in the log (`notifications`).
//!
//! Three parts. A reader thread turns stdin's bytes into messages (`framing`: frames out of any
//! bytes, resynchronising on the next `Content-Length`; `body`: text as faithfully as UTF-8
//! allows, then JSON-RPC). The dispatcher, on the runtime, hands requests to the `LspService`
//! (up to `concurrency` at once, as tower-lsp's loop did), answers to the server's own requests
//! to its loopback, and answers what cannot be read with the JSON-RPC error it calls for; it
//! amends, answers or drops itself the requests the service would answer against the protocol
//! (`requests`: a `shutdown` with params or without an id, `$/` requests, requests after
//! `shutdown`). A writer thread writes one whole frame at a time to stdout, so those error
//! answers, the service's responses and the server's requests never interleave.
//!
//! The threads are plain threads, not the runtime's blocking pool: a read blocked on a stdin the
//! client keeps open after `exit` must not keep the process from ending.

mod body;
mod framing;
mod notifications;
mod requests;

use std::collections::HashSet;
use std::future::Future;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use futures::channel::mpsc as futures_mpsc;
use futures::future::{self, BoxFuture};
use futures::{FutureExt, SinkExt, StreamExt};
use tokio::sync::{mpsc, oneshot, Notify};
use tower::Service;
use tower_lsp_server::jsonrpc::{self, ErrorCode, Id, Request, Response};
use tower_lsp_server::{ClientSocket, ExitedError, LspService};

use self::body::{Message, Rejected, Repairs};
use self::framing::{Decoder, Frame, Skip};
pub use self::notifications::{unreadable, unreadable_params};
use self::requests::{answered_here, dropped_here, without_void_params};
use super::server::Server;

/// Messages read ahead of the dispatcher; a full queue makes the reader wait.
const INPUT_QUEUE: usize = 16;
/// Frames waiting for stdout; a client that stops reading holds the server up here.
const OUTPUT_QUEUE: usize = 64;
/// Requests handed to the service but not yet polled (tower-lsp's own queue size).
const TASK_QUEUE: usize = 100;
/// How long `exit` waits for requests still running (a `shutdown` sent just before it).
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// How a session that did not fail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The client sent `exit`.
    Exit,
    /// Stdin closed without `exit`.
    EndOfInput,
}

/// What the reader thread hands the dispatcher.
enum Input {
    Message {
        message: Result<Message, Rejected>,
        repairs: Repairs,
        /// `(body bytes, declared length)` when the next header cut the body short.
        short: Option<(usize, u64)>,
    },
    Skipped {
        bytes: usize,
        reason: Skip,
    },
    End,
    Failed(io::Error),
}

enum Outgoing {
    Response(Response),
    Request(Request),
}

/// Serves `service` on stdin/stdout until `exit` or the end of input; every response owed is
/// written before it returns. An error is a transport that cannot go on (stdin or stdout
/// failed).
pub async fn serve(
    service: &mut LspService<Server>,
    socket: ClientSocket,
    concurrency: usize,
) -> anyhow::Result<Ended> {
    let log = service.inner().log.clone();
    let (input_tx, mut input) = mpsc::channel(INPUT_QUEUE);
    std::thread::Builder::new()
        .name("redraft-stdin".into())
        .spawn(move || read_stdin(input_tx))
        .context("cannot start the stdin reader thread")?;
    let (output, output_rx) = mpsc::channel(OUTPUT_QUEUE);
    let (written_tx, written) = oneshot::channel();
    std::thread::Builder::new()
        .name("redraft-stdout".into())
        .spawn(move || {
            let _ = written_tx.send(write_stdout(output_rx));
        })
        .context("cannot start the stdout writer thread")?;

    let (client_requests, mut client_responses) = socket.split();
    let (client_requests, stop_client_requests) = futures::stream::abortable(client_requests);
    let (mut tasks, task_rx) =
        futures_mpsc::channel::<BoxFuture<'static, Option<Response>>>(TASK_QUEUE);
    let outstanding = Outstanding::default();

    let answers = {
        let output = output.clone();
        task_rx
            .buffer_unordered(concurrency)
            .filter_map(future::ready)
            .for_each(move |response| {
                let output = output.clone();
                async move {
                    // A closed output is noticed (and reported) by the read loop.
                    let _ = output.send(Outgoing::Response(response)).await;
                }
            })
    };
    let server_requests = {
        let output = output.clone();
        client_requests.for_each(move |request| {
            let output = output.clone();
            async move {
                let _ = output.send(Outgoing::Request(request)).await;
            }
        })
    };
    let read = async {
        // A `shutdown` was accepted: requests now get InvalidRequest (`requests`).
        let mut shut_down = false;
        // An `initialize` went on to the service: before one, a request is the service's to
        // answer -32002 (server not initialized), whatever its params.
        let mut initialize_sent = false;
        let ended = loop {
            let next = tokio::select! {
                next = input.recv() => next,
                () = output.closed() => break Err(None),
            };
            match next {
                Some(Input::Message {
                    message,
                    repairs,
                    short,
                }) => {
                    if let Some((bytes, declared)) = short {
                        log.warn(format!("a Content-Length of {declared} was longer than its message ({bytes} bytes, up to the next header): read as those {bytes} bytes"));
                    }
                    if repairs.any() {
                        log.info(format!("message read with repairs: {repairs}"));
                    }
                    match message {
                        Ok(Message::Request(request)) => {
                            if let Some(warning) = dropped_here(&request) {
                                log.warn(warning);
                                continue;
                            }
                            let (request, dropped) = without_void_params(request);
                            if dropped {
                                log.warn(format!(
                                    "`{}` came with params, which it takes none of: read without them",
                                    request.method()
                                ));
                            }
                            if let Some(answer) = answered_here(&request, shut_down) {
                                let _ = output.send(Outgoing::Response(answer)).await;
                                continue;
                            }
                            if let Some(id) = request.id().filter(|id| outstanding.running(id)) {
                                log.warn(format!(
                                    "`{}` reuses the id {id} of a request still running: refused",
                                    request.method()
                                ));
                                let _ = output.send(reply(id.clone(), id_in_use(id))).await;
                                continue;
                            }
                            // Ignored by the service without a word: the log says why.
                            if let Some(warning) = unreadable(&request) {
                                log.warn(warning);
                            }
                            // Refused by the service with serde's message alone: answered here
                            // naming the field (the service would act on it no more than that).
                            let initialize = request.method() == "initialize";
                            let checked = initialize != initialize_sent;
                            if let (Some(id), Some(why), true) =
                                (request.id(), unreadable_params(&request), checked)
                            {
                                let error = error(ErrorCode::InvalidParams, why);
                                let _ = output.send(reply(id.clone(), error)).await;
                                continue;
                            }
                            initialize_sent |= initialize;
                            if future::poll_fn(|cx| service.poll_ready(cx)).await.is_err() {
                                break Ok(Ended::Exit);
                            }
                            if matches!(request.method(), "initialize" | "shutdown") {
                                // Answered before anything after it is read (the service
                                // answers at once). `shutdown`: whether it was accepted decides
                                // how every later request is answered. `initialize`: the
                                // service takes notifications only once it has answered one,
                                // and drops those that come before without a word; a client
                                // that sends `initialized` on the heels of `initialize`, not
                                // waiting for the answer, had its session start with no log,
                                // no drafts and no word of its model's load.
                                let answer = service.call(request).await.unwrap_or(None);
                                if let Some(answer) = answer {
                                    let _ = output.send(Outgoing::Response(answer)).await;
                                }
                                shut_down = service.inner().was_shut_down();
                                continue;
                            }
                            // The protocol: nothing is read after `exit` (a client may keep
                            // stdin open).
                            let exit = request.method() == "exit";
                            if exit {
                                // `exit` aborts what is still running: let what was asked
                                // before it answer first (`shutdown` has been answered).
                                let drained = outstanding.drained();
                                if tokio::time::timeout(EXIT_GRACE, drained).await.is_err() {
                                    log.warn("requests still running at exit are abandoned");
                                }
                            }
                            let task =
                                outstanding.track(request.id().cloned(), service.call(request));
                            if tasks.send(task).await.is_err() || exit {
                                break Ok(Ended::Exit);
                            }
                        }
                        Ok(Message::Response(response)) => {
                            if client_responses.send(response).await.is_err() {
                                log.warn("a response came after exit; ignored");
                            }
                        }
                        Err(Rejected::NotJson(reason)) => {
                            log.warn(format!("a message that is not JSON: {reason}"));
                            let error = error(ErrorCode::ParseError, format!("not JSON: {reason}"));
                            let _ = output.send(reply(Id::Null, error)).await;
                        }
                        Err(Rejected::NotJsonRpc { id, reason }) => {
                            log.warn(format!("an invalid request: {reason}"));
                            let error = error(ErrorCode::InvalidRequest, reason);
                            let _ = output.send(reply(id, error)).await;
                        }
                    }
                }
                Some(Input::Skipped { bytes, reason }) => {
                    log.warn(format!("skipped {bytes} byte(s) of input: {reason}"));
                    let error = error(
                        ErrorCode::ParseError,
                        format!("skipped {bytes} byte(s): {reason}"),
                    );
                    let _ = output.send(reply(Id::Null, error)).await;
                }
                Some(Input::End) | None => break Ok(Ended::EndOfInput),
                Some(Input::Failed(err)) => break Err(Some(err)),
            }
        };
        tasks.disconnect();
        stop_client_requests.abort();
        ended
    };
    let ((), (), ended) = futures::join!(answers, server_requests, read);
    drop(output);
    let written = written
        .await
        .unwrap_or_else(|_| Err(io::Error::other("the stdout writer thread stopped")));
    match ended {
        Ok(ended) => {
            written.context("cannot write to stdout")?;
            Ok(ended)
        }
        Err(Some(read)) => Err(read).context("cannot read stdin"),
        Err(None) => Err(written
            .err()
            .unwrap_or_else(|| io::Error::other("stdout closed")))
        .context("cannot write to stdout"),
    }
}

/// Requests handed to the service and not yet answered.
#[derive(Clone, Default)]
struct Outstanding {
    count: Arc<AtomicUsize>,
    done: Arc<Notify>,
    /// The ids of those requests (notifications have none).
    ids: Arc<Mutex<HashSet<Id>>>,
}

impl Outstanding {
    fn track(
        &self,
        id: Option<Id>,
        task: impl Future<Output = Result<Option<Response>, ExitedError>> + Send + 'static,
    ) -> BoxFuture<'static, Option<Response>> {
        self.count.fetch_add(1, Ordering::SeqCst);
        if let Some(id) = &id {
            self.ids.lock().unwrap().insert(id.clone());
        }
        // Done when the task ends, or when its future is dropped unfinished.
        let done = Done {
            outstanding: self.clone(),
            id,
        };
        async move {
            let response = task.await.unwrap_or(None);
            // Before the answer is written: a client that has it may use the id again.
            drop(done);
            response
        }
        .boxed()
    }

    /// Whether a request with `id` is still running.
    fn running(&self, id: &Id) -> bool {
        self.ids.lock().unwrap().contains(id)
    }

    /// Resolves once nothing is outstanding.
    async fn drained(&self) {
        // `notify_one` leaves a permit when nobody waits, so a task finishing between the
        // check and the wait is not missed.
        while self.count.load(Ordering::SeqCst) > 0 {
            self.done.notified().await;
        }
    }
}

/// One tracked request ([`Outstanding::track`]): no longer outstanding once dropped.
struct Done {
    outstanding: Outstanding,
    id: Option<Id>,
}

impl Drop for Done {
    fn drop(&mut self) {
        if let Some(id) = &self.id {
            self.outstanding.ids.lock().unwrap().remove(id);
        }
        self.outstanding.count.fetch_sub(1, Ordering::SeqCst);
        self.outstanding.done.notify_one();
    }
}

fn error(code: ErrorCode, message: String) -> jsonrpc::Error {
    jsonrpc::Error {
        code,
        message: message.into(),
        data: None,
    }
}

/// The answer to a request reusing the id of one still running: JSON-RPC's ids tell a
/// client's requests apart, and tower-lsp-server, given one, answers it InvalidRequest only
/// after its layers have acted on it (a `shutdown` put the session in its shut-down state
/// without running, so every later request was refused and `exit` ended with status 1).
fn id_in_use(id: &Id) -> jsonrpc::Error {
    error(
        ErrorCode::InvalidRequest,
        format!("the id {id} is in use by a request still running: give each request its own"),
    )
}

fn reply(id: Id, error: jsonrpc::Error) -> Outgoing {
    Outgoing::Response(Response::from_error(id, error))
}

/// The reader thread: stdin's bytes to messages, until the end of input or a read error.
fn read_stdin(tx: mpsc::Sender<Input>) {
    let mut decoder = Decoder::default();
    let mut stdin = io::stdin().lock();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let read = match stdin.read(&mut chunk) {
            Ok(read) => read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => {
                let _ = tx.blocking_send(Input::Failed(err));
                return;
            }
        };
        if read == 0 {
            decoder.end();
        } else {
            decoder.feed(&chunk[..read]);
        }
        // Once the input at hand is used up, what was skipped of it is answered at once, not
        // when the next frame comes; the rest of that run is not answered again (`framing`).
        while let Some(frame) = decoder.next().or_else(|| decoder.skipped_so_far()) {
            let input = match frame {
                Frame::Body(bytes) => {
                    let (message, repairs) = body::decode(bytes);
                    Input::Message {
                        message,
                        repairs,
                        short: None,
                    }
                }
                Frame::ShortBody { body, declared } => {
                    let bytes = body.len();
                    let (message, repairs) = body::decode(body);
                    Input::Message {
                        message,
                        repairs,
                        short: Some((bytes, declared)),
                    }
                }
                Frame::Skipped { bytes, reason } => Input::Skipped { bytes, reason },
            };
            if tx.blocking_send(input).is_err() {
                return;
            }
        }
        if read == 0 {
            let _ = tx.blocking_send(Input::End);
            return;
        }
    }
}

/// The writer thread: one whole frame per message, flushed whenever the queue runs dry.
fn write_stdout(mut rx: mpsc::Receiver<Outgoing>) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    let mut frame = Vec::new();
    while let Some(message) = rx.blocking_recv() {
        let body = match &message {
            Outgoing::Response(response) => serde_json::to_vec(response),
            Outgoing::Request(request) => serde_json::to_vec(request),
        }
        .map_err(io::Error::other)?;
        frame.clear();
        write!(frame, "Content-Length: {}\r\n\r\n", body.len())?;
        frame.extend_from_slice(&body);
        stdout.write_all(&frame)?;
        if rx.is_empty() {
            stdout.flush()?;
        }
    }
    stdout.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tracked request is outstanding until its future ends or is dropped unfinished: its id
    /// may then be used again, and `exit` does not wait for it.
    #[tokio::test]
    async fn a_request_dropped_unfinished_is_no_longer_outstanding() {
        let outstanding = Outstanding::default();
        let (id, other) = (Id::Number(7), Id::Number(8));
        let never = outstanding.track(Some(id.clone()), future::pending());
        let ends = outstanding.track(Some(other.clone()), future::ready(Ok(None)));
        assert!(outstanding.running(&id) && outstanding.running(&other));
        assert_eq!(ends.await, None);
        assert!(!outstanding.running(&other));
        assert!(outstanding.running(&id));
        drop(never);
        assert!(!outstanding.running(&id));
        tokio::time::timeout(Duration::from_secs(5), outstanding.drained())
            .await
            .expect("nothing is outstanding");
    }
}
