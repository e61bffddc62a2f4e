//! Connections: accepted while fewer than `--max-connections` are open (past that they wait in
//! the kernel's backlog) and closed at once when their address already holds
//! `--max-connections-per-peer`; each served by hyper's HTTP/1.1 with a header read timeout (a
//! request head that has not arrived in `--header-timeout-ms` closes its connection, which also
//! bounds how long an idle keep-alive connection is kept) and a body read deadline
//! ([`BodyDeadline`]: the whole body within `--body-timeout-ms` of its head, else 408), and a
//! client that stops taking a response's bytes for `--write-timeout-ms` is closed ([`Written`]:
//! else a client that pipelines requests and never reads their answers holds its connection,
//! and one address's share of them, for ever).
//!
//! Stopping: [`Stop::stopping`] ends the accept loop, closes every connection that is not
//! answering a request (idle, or a head still arriving) at once, and fails body reads still
//! waiting (their requests answer 503), so stalled clients never hold the shutdown; a
//! connection that is answering one, from its head until the response's last byte is written
//! to the socket ([`Activity`]), finishes it (hyper's graceful shutdown: no request after it).
//! [`Stop::cut`] drops whatever is left.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::response::Response;
use axum::Router;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tower::Service;

use redraft_runtime::metrics::Metrics;

/// How long a client may take and how many connections it may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A request head must arrive within this (from the connection's start, or the end of the
    /// previous response on a kept-alive one).
    pub header_timeout: Duration,
    /// A request body must arrive within this of its head.
    pub body_timeout: Duration,
    /// A response's bytes must keep being taken by the client: a write that makes no progress
    /// for this long closes the connection.
    pub write_timeout: Duration,
    /// Open connections at most; past that new ones wait to be accepted.
    pub max_connections: usize,
    /// Open connections from one IP address at most; past that new ones are closed at once.
    pub per_peer: usize,
}

/// The shutdown's two moments, as the server's signal task raises them.
#[derive(Clone)]
pub struct Stop {
    /// No new connections or requests; close what has no request in a handler.
    pub stopping: watch::Receiver<bool>,
    /// Drop every connection still open.
    pub cut: watch::Receiver<bool>,
}

/// Resolves once `flag` is raised (or its sender is gone).
async fn raised(mut flag: watch::Receiver<bool>) {
    let _ = flag.wait_for(|raised| *raised).await;
}

/// Serves `router` on `listener` until [`Stop::stopping`], then until every connection has
/// closed (or [`Stop::cut`]).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stop: Stop,
    metrics: Arc<Metrics>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let peers = Peers::default();
    let mut connections = JoinSet::new();
    let mut last_refusal_logged: Option<Instant> = None;
    loop {
        let slot = tokio::select! {
            biased;
            () = raised(stop.stopping.clone()) => break,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            biased;
            () = raised(stop.stopping.clone()) => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: pause rather than spin.
                    redraft_runtime::stderr_line(format_args!("redraft serve: accepting a connection failed: {err}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Some(peer_slot) = peers.take(peer.ip(), limits.per_peer) else {
            metrics.refused_connections.inc();
            if last_refusal_logged.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
                redraft_runtime::stderr_line(format_args!(
                    "redraft serve: {} already holds {} connections (--max-connections-per-peer): closing its new ones",
                    peer.ip(),
                    limits.per_peer
                ));
                last_refusal_logged = Some(Instant::now());
            }
            drop(stream);
            continue;
        };
        let open = OpenConnection {
            _slot: slot,
            _peer: peer_slot,
            metrics: Arc::clone(&metrics),
        };
        metrics.open_connections.inc();
        connections.spawn(connection(
            stream,
            router.clone(),
            limits,
            stop.clone(),
            open,
        ));
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// What an open connection holds: its place among all and among its address's.
struct OpenConnection {
    _slot: tokio::sync::OwnedSemaphorePermit,
    _peer: PeerSlot,
    metrics: Arc<Metrics>,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.metrics.open_connections.dec();
    }
}

/// Open connections per client address.
#[derive(Default, Clone)]
struct Peers(Arc<Mutex<HashMap<IpAddr, usize>>>);

impl Peers {
    /// A place for one more connection from `ip`, if it holds fewer than `limit`.
    fn take(&self, ip: IpAddr, limit: usize) -> Option<PeerSlot> {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(ip).or_insert(0);
        if *count >= limit.max(1) {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            peers: self.clone(),
            ip,
        })
    }
}

struct PeerSlot {
    peers: Peers,
    ip: IpAddr,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.peers.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// One connection, served until it ends or the shutdown ends it.
async fn connection(
    stream: TcpStream,
    router: Router,
    limits: Limits,
    stop: Stop,
    open: OpenConnection,
) {
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(Activity::default());
    let service = {
        let activity = Arc::clone(&activity);
        let stopping = stop.stopping.clone();
        service_fn(move |request: Request<Incoming>| {
            let guard = Busy::enter(&activity);
            let request = request.map(|body| {
                Body::new(BodyDeadline::new(
                    body,
                    limits.body_timeout,
                    stopping.clone(),
                ))
            });
            let mut router = router.clone();
            async move {
                let response: Response = match router.call(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                Ok::<_, Infallible>(response.map(|body| Guarded { body, _busy: guard }))
            }
        })
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let socket = Written {
        io: TokioIo::new(stream),
        activity: Arc::clone(&activity),
        stall: Stall::new(limits.write_timeout, Arc::clone(&open.metrics)),
    };
    let conn = builder.serve_connection(socket, service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = raised(stop.stopping.clone()) => {}
    }
    if activity.is_idle() {
        // Idle, or a head still arriving: nothing accepted here, so nothing to finish.
        return;
    }
    conn.as_mut().graceful_shutdown();
    tokio::select! {
        _ = conn.as_mut() => {}
        () = raised(stop.cut.clone()) => {}
    }
}

/// Whether a connection is answering a request, which a shutdown lets it finish: from the
/// request's head until the response's last byte is written to the socket. Dropping the
/// connection any earlier loses what hyper still holds: a large body is taken from the handler
/// in one frame and then written as fast as the client reads.
#[derive(Default)]
struct Activity {
    /// Requests in a handler or whose response body hyper is still taking ([`Busy`]).
    busy: AtomicUsize,
    /// Whether hyper has bytes it has not yet seen flushed to the socket ([`Written`]).
    unwritten: AtomicBool,
}

impl Activity {
    fn is_idle(&self) -> bool {
        self.busy.load(Ordering::SeqCst) == 0 && !self.unwritten.load(Ordering::SeqCst)
    }
}

/// Counts a request as busy from its head until hyper has taken its response body.
struct Busy(Arc<Activity>);

impl Busy {
    fn enter(activity: &Arc<Activity>) -> Busy {
        activity.busy.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(activity))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request counted as busy until hyper has taken all of it (or
/// dropped it: a client that hung up); what hyper took may still be on its way ([`Written`]).
struct Guarded {
    body: Body,
    _busy: Busy,
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The connection's socket, noting whether what hyper writes has all reached it: hyper flushes
/// the socket only once its own buffer is empty, and always tries to after it writes, so bytes
/// written and not yet followed by a completed flush are a response still on its way. A write
/// the client's window holds up for `--write-timeout-ms` fails ([`Stall`]), which ends the
/// connection: nothing else would, since hyper's timeouts are for reading.
struct Written<I> {
    io: I,
    activity: Arc<Activity>,
    stall: Stall,
}

/// How long the socket has refused hyper's bytes: armed by the first write that waits, reset by
/// any write that goes through. Its timer wakes the connection's task, so hyper tries the write
/// again and sees it fail.
struct Stall {
    limit: Duration,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    metrics: Arc<Metrics>,
}

impl Stall {
    fn new(limit: Duration, metrics: Arc<Metrics>) -> Stall {
        Stall {
            limit,
            deadline: None,
            metrics,
        }
    }

    /// `write`'s outcome, or a timeout once writes have waited for `limit`.
    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        write: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if write.is_ready() {
            self.deadline = None;
            return write;
        }
        let limit = self.limit;
        let deadline = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if deadline.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.deadline = None;
        self.metrics.write_timeouts.inc();
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the client took none of the response for {} ms",
                limit.as_millis()
            ),
        )))
    }
}

impl<I: Read + Unpin> Read for Written<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: Write + Unpin> Write for Written<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.activity.unwritten.store(true, Ordering::SeqCst);
        let this = &mut *self;
        let written = Pin::new(&mut this.io).poll_write(cx, buf);
        this.stall.check(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.activity.unwritten.store(true, Ordering::SeqCst);
        let this = &mut *self;
        let written = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.stall.check(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        // hyper queues a body's frames rather than copying them only for a vectored socket.
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let flushed = Pin::new(&mut this.io).poll_flush(cx);
        let flushed = std::task::ready!(this.stall.check(cx, flushed));
        if flushed.is_ok() {
            self.activity.unwritten.store(false, Ordering::SeqCst);
        }
        Poll::Ready(flushed)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Why a request body stopped being read before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadStopped {
    /// `--body-timeout-ms` passed since the request's head.
    TimedOut(Duration),
    /// The server is stopping: a body still arriving is not waited for.
    ShuttingDown,
}

impl std::fmt::Display for ReadStopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadStopped::TimedOut(limit) => write!(
                f,
                "the request body did not arrive within {} ms",
                limit.as_millis()
            ),
            ReadStopped::ShuttingDown => f.write_str("the server is shutting down"),
        }
    }
}

impl std::error::Error for ReadStopped {}

impl ReadStopped {
    /// The reason somewhere in `error`'s chain of sources (axum wraps a body's error a few
    /// times over).
    pub fn in_chain(error: &(dyn std::error::Error + 'static)) -> Option<ReadStopped> {
        let mut at = Some(error);
        while let Some(error) = at {
            if let Some(stopped) = error.downcast_ref::<ReadStopped>() {
                return Some(*stopped);
            }
            at = error.source();
        }
        None
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body that must arrive by a deadline and stops being waited for at shutdown.
struct BodyDeadline {
    body: Incoming,
    limit: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    stopping: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl BodyDeadline {
    fn new(body: Incoming, limit: Duration, stopping: watch::Receiver<bool>) -> BodyDeadline {
        BodyDeadline {
            body,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
            stopping: Box::pin(raised(stopping)),
        }
    }
}

impl HttpBody for BodyDeadline {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(BoxError::from)));
        }
        if self.stopping.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(ReadStopped::ShuttingDown.into())));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(ReadStopped::TimedOut(self.limit).into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
