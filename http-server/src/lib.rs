//! `redraft serve`: the HTTP engine for editors that reach a model only over HTTP (Zed's
//! OpenAI-compatible and Ollama providers) and for teams sharing one machine.
//!
//! axum on tokio; the model runs on the scheduler's own thread (`scheduler`), never on the
//! runtime. One module per API: `openai` (`/v1/completions`, `/v1/models`, with Zed's FIM
//! templates and next-edit layouts), `ollama` (`/api/generate`, `/api/tags`, `/api/show`,
//! `/api/ps`, `/api/version`),
//! `inception` (Mercury-shaped `/v1/fim/completions` and `/v1/edit/completions`); `requests`
//! turns every API's request into the scheduler's work and streams answers back;
//! `redraft_prompts::fim_template` and `edit_prompt` read the prompt layouts clients send; `error` the error
//! bodies; `metrics` `/metrics`; `gate` what a request must pass before its body is read (Host
//! and Origin, JSON content types, headers, the key); `listen` the connections (limits, read
//! timeouts, shutdown). With `--backend URL` every FIM request names that remote completions
//! server in its work, and the scheduler's backend workers run it there (planned and cleaned
//! here); next edits stay on the local model. Nothing a client sends ends the server: bad input
//! is a 4xx, a panic in a job a 500 for that job only, a backend's failure a 502 for that
//! request only, and a slow or stalled client is closed after its timeout.

mod edit_prompt;
mod error;
mod gate;
mod inception;
mod listen;
mod ollama;
mod openai;
mod requests;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redraft_engine::sampler::{CachePolicy, Effort, Realign};
use redraft_runtime::stderr_line;
use serde_json::json;

use error::{ApiError, Dialect};
use redraft_runtime::backend::BackendConfig;
use redraft_runtime::backend_args::BackendArgs;
use redraft_runtime::metrics::Metrics;
use redraft_runtime::model_args::ModelArgs;
use redraft_runtime::model_details::ModelDetails;
use redraft_runtime::scheduler::{LoopConfig, Scheduler};

/// The served model's id when no `--model` is given.
pub const DEFAULT_MODEL_ID: &str = "redraft-default";
/// Extra names the model answers to, so Zed infers a prompt format from them (Zed's
/// `crates/edit_prediction/src/fim.rs`: the part before the first `:` is matched exactly):
/// Qwen's FIM template, and Sweep's next-edit layout.
pub const ALIASES: &[&str] = &["qwen2.5-coder:redraft", "sweep-next-edit:redraft"];

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Address to listen on: IP:PORT, NAME:PORT (`localhost` is 127.0.0.1; another name, the
    /// first address it resolves to) or a port alone on 127.0.0.1. Port 0: any free port; the
    /// bound address is printed on stderr. Default 127.0.0.1:8717.
    #[arg(long, value_parser = parse_bind, conflicts_with_all = ["host", "port"])]
    bind: Option<SocketAddr>,
    /// The address alone, as llama.cpp's server takes it: an IP or a name, with --port (default
    /// 127.0.0.1).
    #[arg(long, value_name = "IP|NAME")]
    host: Option<String>,
    /// The port alone, with --host (default 8717).
    #[arg(long, value_parser = count_in::<u16>(0..=65_535))]
    port: Option<u16>,
    /// Require `Authorization: Bearer KEY` on every route but /health. Prefer the environment
    /// variable REDRAFT_API_KEY or --api-key-file: a flag's value shows in the process list.
    #[arg(long, conflicts_with = "api_key_file")]
    api_key: Option<String>,
    /// Read the API key from this file (surrounding whitespace trimmed; an empty file is an
    /// error).
    #[arg(long, value_name = "PATH")]
    api_key_file: Option<PathBuf>,
    /// Also answer requests whose Host header is NAME (NAME:PORT for that port only); loopback
    /// names and the bound address are always allowed. Any other Host is refused (403), which
    /// keeps web pages that rebind their DNS name to this machine out. Repeatable.
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,
    /// Let the web page ORIGIN (as browsers send it: `https://example.com`) call the server:
    /// CORS is answered for it, preflights included. Requests from any other page are refused
    /// (403). Repeatable.
    #[arg(long, value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// A request head that has not fully arrived after this many milliseconds closes its
    /// connection (also how long an idle kept-alive connection is kept).
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = count_in::<u64>(1..))]
    header_timeout_ms: u64,
    /// A request body that has not fully arrived this many milliseconds after its head is
    /// refused (408) and its connection closed.
    #[arg(long, value_name = "MS", default_value_t = 30_000, value_parser = count_in::<u64>(1..))]
    body_timeout_ms: u64,
    /// A connection whose client takes none of a response's bytes for this many milliseconds
    /// (it stopped reading) is closed.
    #[arg(long, value_name = "MS", default_value_t = 30_000, value_parser = count_in::<u64>(1..))]
    write_timeout_ms: u64,
    /// Open connections at most; more wait to be accepted.
    #[arg(long, default_value_t = 512, value_parser = count_in::<u64>(1..=1_000_000))]
    max_connections: u64,
    /// Open connections from one IP address at most; more are closed at once (on loopback every
    /// local client shares the one address).
    #[arg(long, default_value_t = 128, value_parser = count_in::<u64>(1..=1_000_000))]
    max_connections_per_peer: u64,
    /// Canvases the model runs together at most (1: one request at a time).
    #[arg(long, default_value_t = 8, value_parser = count_in::<u64>(1..=64))]
    max_batch: u64,
    /// Requests that may wait for the model; past that, 429 with Retry-After.
    #[arg(long, default_value_t = 64, value_parser = count_in::<u64>(1..=100_000))]
    max_queue: u64,
    /// Largest request body in bytes; past that, 413.
    #[arg(long, default_value_t = 4 << 20, value_parser = count_in::<u64>(1..))]
    max_body: u64,
    /// Decoding preset (low, medium or high) for requests that do not say (an `effort` field).
    #[arg(long, default_value = "medium")]
    effort: Effort,
    /// An inline completion with a token the model gave less than this probability (0 to 1)
    /// comes back empty [default: the model's own bar, `fim_min_confidence` in its
    /// redraft.json, else 0].
    #[arg(long, value_parser = redraft_runtime::sampler_args::parse_probability)]
    min_confidence: Option<f32>,
    /// Time budget per request in milliseconds from its arrival: past it the sampler commits
    /// its best guess for what is left.
    #[arg(long, value_parser = redraft_runtime::sampler_args::parse_millis)]
    deadline_ms: Option<u64>,
    /// Recompute every position at every step (no approximate context cache): slower, and
    /// what makes batched results equal one-at-a-time results exactly.
    #[arg(long)]
    no_cache: bool,
    /// A client's next request (a few characters typed) reuses the cache its last one left:
    /// recompute RADIUS tokens on each side of each change and keep the rest (approximate,
    /// an exact pass after 8 in a row), or `off` (an edit costs an exact full pass)
    /// [default: 8].
    #[arg(long, value_name = "RADIUS|off", value_parser = redraft_runtime::sampler_args::parse_edit_reuse)]
    edit_reuse: Option<redraft_runtime::sampler_args::EditReuseFlag>,
    /// A new prompt is computed at most this many tokens per model call (causal and
    /// block-causal models: the others compute it in one), one request's piece a call, oldest
    /// first, so requests being decoded meanwhile wait for one piece at a time and a client
    /// that leaves stops it between pieces (0: in one call).
    #[arg(long, value_name = "TOKENS", default_value_t = 256, value_parser = count_in::<usize>(0..))]
    prompt_chunk: usize,
    /// Memory for the caches finished requests leave for their clients' next ones, in MiB
    /// (keys, values and the text they are matched on; the oldest go first). With more clients
    /// typing at once than fit, their requests start cold: watch `redraft_cache_starts_total`.
    #[arg(
        long,
        value_name = "MIB",
        default_value_t = redraft_runtime::scheduler::kept::DEFAULT_MIB,
        value_parser = count_in::<usize>(0..)
    )]
    cache_memory: usize,
    /// After this many milliseconds with no request for the model, the newest of the last few
    /// kept caches that edit reuse left approximate is recomputed exactly, so the next
    /// keystroke's request realigns from an exact cache instead of paying the exact pass
    /// itself; a request that comes meanwhile stops it within half a layer (0: never).
    #[arg(
        long,
        value_name = "MS",
        default_value_t = redraft_runtime::scheduler::idle::DEFAULT_IDLE_REFRESH.as_millis() as u64,
        value_parser = count_in::<u64>(0..)
    )]
    idle_refresh_ms: u64,
    /// After SIGTERM or Ctrl-C: how long in-flight requests may take to finish, in
    /// milliseconds; past it they are cancelled at their next denoising step (their clients
    /// get a 503) and the server stops.
    #[arg(long, default_value_t = 10_000, value_parser = count_in::<u64>(0..))]
    shutdown_grace_ms: u64,
    /// Last: its heading would carry over to the flags after it.
    #[command(
        flatten,
        next_help_heading = "Remote FIM backend (next edits stay local)"
    )]
    backend: BackendArgs,
}

/// What the model answers to, for `/v1/models`, `/api/tags` and the `model` field.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    /// The id (the model directory's name, or [`DEFAULT_MODEL_ID`]) first, then [`ALIASES`].
    pub names: Vec<String>,
    /// When it was loaded (Unix seconds).
    pub created: u64,
    /// What the local model is (format, quantization, architecture, size), read once at load;
    /// `None` without one (a server that only forwards FIM requests to a backend knows nothing
    /// of the backend's model but the name it was given).
    pub details: Option<ModelDetails>,
    /// Whether its weights sit in an accelerator's memory (a GPU), not the CPU's: Ollama's
    /// `size_vram` in `/api/ps`.
    pub on_accelerator: bool,
}

impl ModelInfo {
    pub fn id(&self) -> &str {
        &self.names[0]
    }
}

/// What every handler shares.
pub struct App {
    pub scheduler: Scheduler,
    pub metrics: Arc<Metrics>,
    pub model: ModelInfo,
    api_key: Option<String>,
    /// The `Host` names requests may carry (`gate`).
    hosts: gate::Hosts,
    /// The web pages (`--allow-origin`) that may call the server, as `Origin` spells them.
    origins: Vec<String>,
    pub effort: Effort,
    /// `--min-confidence`: the inline-completion bar over the model's own.
    pub min_confidence: Option<f32>,
    /// Every request's cache policy (`--no-cache`, `--edit-reuse`).
    pub cache: CachePolicy,
    pub deadline: Option<Duration>,
    /// Where every FIM request is sent (`--backend`); `None`: the local model. Next edits
    /// always run on the local model.
    pub backend: Option<BackendConfig>,
    pub max_body: usize,
    pub max_batch: usize,
    pub max_queue: usize,
    /// `--cache-memory`, in MiB.
    pub cache_memory: usize,
    /// `--idle-refresh-ms` (`None`: off).
    pub idle_refresh: Option<Duration>,
    shutting_down: AtomicBool,
}

impl App {
    /// `Ok` when `asked` (absent or empty: the served model) names the served model; the
    /// error is 404 `model_not_found` with the names that work.
    pub fn check_model(&self, asked: Option<&str>) -> Result<(), ApiError> {
        match asked.map(str::trim) {
            None | Some("") => Ok(()),
            Some(name) if self.model.names.iter().any(|n| n == name) => Ok(()),
            Some(name) => Err(ApiError::model_not_found(name, &self.model.names)),
        }
    }

    /// The name to put in answers: what the client asked for if it is served, else the id.
    pub fn answer_model(&self, asked: Option<&str>) -> String {
        asked
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .unwrap_or(self.model.id())
            .to_string()
    }
}

pub type Shared = Arc<App>;

pub fn run(args: Args) -> anyhow::Result<()> {
    let (bind, limits, grace) = (
        args.address().map_err(flag_error)?,
        listen::Limits {
            header_timeout: Duration::from_millis(args.header_timeout_ms),
            body_timeout: Duration::from_millis(args.body_timeout_ms),
            write_timeout: Duration::from_millis(args.write_timeout_ms),
            max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
            per_peer: usize::try_from(args.max_connections_per_peer).unwrap_or(usize::MAX),
        },
        Duration::from_millis(args.shutdown_grace_ms),
    );
    let (app, inference) = start(args, bind)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("redraft-serve")
        .enable_all()
        .build()?;
    runtime.block_on(serve(Arc::clone(&app), bind, limits, grace))?;
    // Every accepted job has been answered (or cancelled); the inference thread ends with the
    // queue.
    app.scheduler.close();
    let _ = inference.join();
    runtime.shutdown_timeout(Duration::from_secs(1));
    stderr_line(format_args!("redraft serve: stopped"));
    Ok(())
}

/// A count flag's parser: a whole number in `range`, read as signed so that a negative one is
/// refused with the range (`-1 is not in 1..=64`), not as "invalid digit found in string".
fn count_in<T>(range: impl std::ops::RangeBounds<i64>) -> clap::builder::RangedI64ValueParser<T>
where
    T: TryFrom<i64> + Clone + Send + Sync + 'static,
    T::Error: std::error::Error + Send + Sync + 'static,
{
    clap::builder::RangedI64ValueParser::<T>::new().range(range)
}

impl Args {
    /// Where to listen: `--bind`, else `--host` and `--port` (each with its default).
    fn address(&self) -> Result<SocketAddr, String> {
        if let Some(bind) = self.bind {
            return Ok(bind);
        }
        let host = self.host.as_deref().unwrap_or("127.0.0.1");
        let port = self.port.unwrap_or(DEFAULT_PORT);
        // An IPv6 address is written in brackets before its port.
        let bare_v6 = host.contains(':') && !host.starts_with('[');
        let text = if bare_v6 {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        parse_bind(&text).map_err(|why| format!("--host {host}: {why}"))
    }
}

/// Where a server listens when neither `--bind` nor `--port` says.
const DEFAULT_PORT: u16 = 8717;

/// `--bind`'s value ([`Args::bind`]). `localhost` is taken as 127.0.0.1 rather than looked up:
/// it may also resolve to ::1, and a server on one of the two is what clients of the name reach.
fn parse_bind(text: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Ok(address);
    }
    let loopback = |port| SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port));
    if let Ok(port) = text.parse::<u16>() {
        return Ok(loopback(port));
    }
    let shape = "IP:PORT, NAME:PORT or PORT (127.0.0.1:8717, [::1]:8717, localhost:8717, 8717)";
    // The last colon of an IPv6 address without a port (`[::1]`, `::1`) is the address's.
    let Some((host, port)) = text
        .rsplit_once(':')
        .filter(|(_, port)| !port.contains(']') && text.parse::<std::net::Ipv6Addr>().is_err())
    else {
        return Err(format!("expected {shape}, got `{text}`"));
    };
    let Ok(port) = port.parse::<u16>() else {
        return Err(format!(
            "`{port}` is not a port (0 to 65535): expected {shape}, got `{text}`"
        ));
    };
    if host.is_empty() {
        return Err(format!("no host before `:{port}`: expected {shape}"));
    }
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(loopback(port));
    }
    use std::net::ToSocketAddrs;
    match (host, port).to_socket_addrs().map(|mut found| found.next()) {
        Ok(Some(address)) => Ok(address),
        Ok(None) => Err(format!("`{host}` resolves to no address")),
        Err(error) => Err(format!(
            "`{host}` is no address this machine resolves: {error}"
        )),
    }
}

/// A flag's value refused by the code that takes it (`--allow-origin '*'`, `--backend notaurl`):
/// a mistake on the command line, exit status 2.
fn flag_error(error: impl std::fmt::Display) -> anyhow::Error {
    redraft_runtime::flag_error::<Args>("redraft serve", error)
}

/// The id a `--model` is served under: a directory's or a GGUF file's name; for a model name,
/// what follows its last `/` (`hf:ORG/REPO:Q8_0` is `REPO:Q8_0`), an Ollama name without its
/// `ollama:` (`ollama:qwen2.5-coder:1.5b` is `qwen2.5-coder:1.5b`, as is
/// `ollama:library/qwen2.5-coder:1.5b`): one id however the name is spelled, and one Zed infers
/// a prompt format from (it reads the part before the first `:`) as it does from Ollama's own.
fn served_id(model: &Path) -> String {
    if let Ok(path) = model.canonicalize() {
        if let Some(name) = path.file_name() {
            return name.to_string_lossy().into_owned();
        }
    }
    let text = model.to_string_lossy();
    let text = text.strip_prefix("ollama:").unwrap_or(&text);
    let text = text.trim_end_matches('/');
    match text.rsplit('/').next() {
        Some(last) if !last.is_empty() => last.to_string(),
        _ => DEFAULT_MODEL_ID.to_string(),
    }
}

/// What `run` serves: the flags checked, the model loaded and described, and the scheduler's
/// thread started on it. A model that does not load stops the server before it listens (there
/// would be nothing to answer with), unless FIM requests go to a `--backend`: that server starts
/// without one, answering FIM through the backend and next edits 503.
fn start(args: Args, bind: SocketAddr) -> anyhow::Result<(Shared, std::thread::JoinHandle<()>)> {
    let api_key = gate::api_key(args.api_key.as_deref(), args.api_key_file.as_deref())?;
    // Values clap takes as they are and these checks refuse are mistakes on the command line.
    let hosts = gate::Hosts::new(bind, &args.allow_host).map_err(flag_error)?;
    let origins = gate::origins(&args.allow_origin).map_err(flag_error)?;
    let backend = args.backend.config().map_err(flag_error)?;
    if !bind.ip().is_loopback() && api_key.is_none() {
        stderr_line(format_args!("redraft serve: warning: listening on {} without an API key: anyone who can reach it can use the model (set {} or --api-key-file, and put TLS in front)",
            bind,
            gate::KEY_VARIABLE));
    }
    let started = Instant::now();
    let loaded = args.model.load();
    let id = args
        .model
        .model
        .as_deref()
        .map_or_else(|| DEFAULT_MODEL_ID.to_string(), served_id);
    let details = loaded.as_ref().ok().map(ModelDetails::of);
    let on_accelerator = loaded
        .as_ref()
        .is_ok_and(|engine| redraft_engine::device::describe(engine.model().device()) != "cpu");
    let engine = match loaded {
        Ok(engine) => {
            stderr_line(format_args!(
                "redraft serve: model {id} loaded from {} on {} in {:.0} ms",
                engine.dir().display(),
                redraft_engine::device::describe(engine.model().device()),
                started.elapsed().as_secs_f64() * 1e3
            ));
            Ok(engine)
        }
        Err(err) if backend.is_none() => {
            return Err(err.context(
                "the model did not load, so there is nothing to serve: fix --model or --device (only a server \
                 with --backend starts without a local model, answering FIM through the backend)",
            ));
        }
        Err(err) => {
            stderr_line(format_args!("redraft serve: model not loaded: {err:#}; FIM requests go to the backend, next edits answer 503"));
            Err(format!("{err:#}"))
        }
    };
    if let Some(config) = &backend {
        let endpoint = redraft_runtime::backend::shown_endpoint(&config.url)?;
        stderr_line(format_args!("redraft serve: FIM requests go to the backend {endpoint} (model {}, template {}, {} context tokens); {}",
            config.model.as_deref().unwrap_or("the one it lists"),
            config.template,
            config.context_tokens,
            if engine.is_ok() { "next edits run on the local model" } else { "next edits answer 503 (no local model)" }));
    }
    let metrics = Arc::new(Metrics::new());
    let cache = CachePolicy {
        enabled: !args.no_cache,
        refresh_every: None,
        realign: args
            .edit_reuse
            .map_or(Some(Realign::DEFAULT), |flag| flag.over(Realign::DEFAULT)),
        prompt_chunk: (args.prompt_chunk > 0).then_some(args.prompt_chunk),
    };
    let idle_refresh =
        (args.idle_refresh_ms > 0).then(|| Duration::from_millis(args.idle_refresh_ms));
    let max_batch = usize::try_from(args.max_batch).unwrap_or(1);
    let max_queue = usize::try_from(args.max_queue).unwrap_or(1);
    let (scheduler, inference) = Scheduler::start(
        engine,
        LoopConfig {
            max_batch,
            max_queue,
            cache,
            kept_bytes: args.cache_memory.saturating_mul(1 << 20),
            idle_refresh,
            door: "redraft serve",
        },
        Arc::clone(&metrics),
    );
    let mut names = vec![id];
    for alias in ALIASES {
        if !names.iter().any(|n| n == alias) {
            names.push(alias.to_string());
        }
    }
    let app = Arc::new(App {
        scheduler,
        metrics,
        model: ModelInfo {
            names,
            created: requests::unix_now(),
            details,
            on_accelerator,
        },
        api_key,
        hosts,
        origins,
        effort: args.effort,
        min_confidence: args.min_confidence,
        cache,
        deadline: args.deadline_ms.map(Duration::from_millis),
        backend,
        max_body: usize::try_from(args.max_body).unwrap_or(usize::MAX),
        max_batch,
        max_queue,
        cache_memory: args.cache_memory,
        idle_refresh,
        shutting_down: AtomicBool::new(false),
    });
    Ok((app, inference))
}

/// Serves until a signal, then stops: no new connections, idle and stalled ones closed at once,
/// accepted work answered (what still runs after `grace` is cancelled at its next step and
/// answered 503), and whatever connection is still open 5 s after that dropped.
async fn serve(
    app: Shared,
    bind: SocketAddr,
    limits: listen::Limits,
    grace: Duration,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("binding {bind} (is another server on that port?)"))?;
    let local = listener.local_addr()?;
    stderr_line(format_args!("redraft serve: listening on http://{local}"));
    let (stopping, stopping_rx) = tokio::sync::watch::channel(false);
    let (cut, cut_rx) = tokio::sync::watch::channel(false);
    {
        let app = Arc::clone(&app);
        tokio::spawn(async move {
            let why = shutdown_signal().await;
            stderr_line(format_args!(
                "redraft serve: {why}: finishing {} queued request(s), then stopping",
                app.scheduler.queue_len()
            ));
            app.shutting_down.store(true, Ordering::Relaxed);
            app.scheduler.close();
            let _ = stopping.send(true);
            tokio::time::sleep(grace).await;
            stderr_line(format_args!(
                "redraft serve: in-flight work past the grace period is cancelled"
            ));
            app.scheduler.abort();
            tokio::time::sleep(Duration::from_secs(5)).await;
            stderr_line(format_args!(
                "redraft serve: connections still open after the grace period are dropped"
            ));
            let _ = cut.send(true);
        });
    }
    let stop = listen::Stop {
        stopping: stopping_rx,
        cut: cut_rx,
    };
    let metrics = Arc::clone(&app.metrics);
    listen::serve(listener, router(app), limits, stop, metrics).await;
    Ok(())
}

async fn shutdown_signal() -> &'static str {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => tokio::select! {
                _ = interrupt => "SIGINT",
                _ = terminate.recv() => "SIGTERM",
            },
            Err(_) => {
                let _ = interrupt.await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
        "interrupt"
    }
}

/// Every route, behind (outermost first) the request metrics, `gate::admit` (Host, Origin,
/// headers), CORS for `--allow-origin` pages, the API-key check, the declared body size, the
/// JSON content type and the body limit: all before a handler reads a body.
pub fn router(app: Shared) -> Router {
    let routes = Router::new()
        .route("/", get(root))
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .route("/v1/models", get(openai::models))
        .route("/v1/models/{name}", get(openai::model))
        .route("/v1/completions", post(openai::completions))
        .route("/v1/fim/completions", post(inception::fim))
        .route("/v1/fim/completions/models", get(openai::models))
        .route("/v1/edit/completions", post(inception::edit))
        .route("/v1/edit/completions/models", get(openai::models))
        .route("/api/generate", post(ollama::generate))
        .route("/api/tags", get(ollama::tags))
        .route("/api/show", post(ollama::show))
        .route("/api/ps", get(ollama::ps))
        .route("/api/version", get(ollama::version))
        .fallback(unknown_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(app.max_body))
        .layer(middleware::from_fn(gate::require_json))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            gate::refuse_oversized,
        ))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            gate::authorize,
        ));
    let routes = match gate::cors(&app.origins) {
        Some(cors) => routes.layer(cors),
        None => routes,
    };
    routes
        .layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            gate::admit,
        ))
        .layer(middleware::from_fn_with_state(Arc::clone(&app), count))
        .with_state(app)
}

/// The endpoint label of a path: a known route, or `other` (unknown paths must not grow the
/// metrics without bound).
fn endpoint_label(path: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "/",
        "/health",
        "/metrics",
        "/v1/models",
        "/v1/completions",
        "/v1/fim/completions",
        "/v1/fim/completions/models",
        "/v1/edit/completions",
        "/v1/edit/completions/models",
        "/api/generate",
        "/api/tags",
        "/api/show",
        "/api/version",
    ];
    if path.starts_with("/v1/models/") {
        // One label for every name asked for, so clients cannot grow the metrics.
        return "/v1/models/{name}";
    }
    KNOWN
        .iter()
        .find(|k| **k == path)
        .copied()
        .unwrap_or("other")
}

/// The status a request is counted under when its client hung up before the whole answer was
/// handed over (nginx's "client closed request"): a non-streamed request cancelled while its job
/// ran, or a stream left before its end.
const CLIENT_CLOSED: u16 = 499;

/// The request metrics, observed when the response body ends (or is dropped: a client that hung
/// up, [`CLIENT_CLOSED`]), so a stream's time is the whole stream's; a stream that ended with an
/// error event counts under that error's status ([`requests::StreamStatus`]).
async fn count(State(app): State<Shared>, request: Request, next: Next) -> Response {
    // Hyper never takes the body of an answer to HEAD: it is whole as it stands.
    let head = request.method() == Method::HEAD;
    // Dropped with the handler if the client hangs up first: counted as CLIENT_CLOSED.
    let mut observation = Observation {
        metrics: Arc::clone(&app.metrics),
        endpoint: endpoint_label(request.uri().path()),
        status: CLIENT_CLOSED,
        stream: None,
        started: Instant::now(),
    };
    let response = next.run(request).await;
    observation.status = response.status().as_u16();
    observation.stream = response
        .extensions()
        .get::<requests::StreamStatus>()
        .cloned();
    response.map(|body| {
        Body::new(Counted {
            body,
            ended: head,
            observation,
        })
    })
}

/// One request's metrics, recorded when it is dropped.
struct Observation {
    metrics: Arc<Metrics>,
    endpoint: &'static str,
    status: u16,
    stream: Option<requests::StreamStatus>,
    started: Instant,
}

impl Drop for Observation {
    fn drop(&mut self) {
        let status = self
            .stream
            .as_ref()
            .and_then(requests::StreamStatus::error)
            .unwrap_or(self.status);
        self.metrics
            .request(self.endpoint, status, self.started.elapsed());
    }
}

/// A response body that records its request's [`Observation`] when hyper is done with it
/// (it drops a body once it has taken the last frame, or when the client hangs up before).
struct Counted {
    body: Body,
    /// Hyper has taken the last frame.
    ended: bool,
    observation: Observation,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = frame {
            self.ended = true;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        // A body that knows it is over (an empty one, a whole answer taken in one frame) is
        // never polled to its end. A stream's error event still wins ([`Observation`]).
        if !(self.ended || http_body::Body::is_end_stream(&self.body)) {
            self.observation.status = CLIENT_CLOSED;
        }
    }
}

async fn root() -> &'static str {
    "redraft is running\n"
}

async fn health(State(app): State<Shared>) -> Response {
    let body = |status: &str| {
        json!({
            "status": status,
            "model": app.model.id(),
            "queue": app.scheduler.queue_len(),
            "max_queue": app.max_queue,
            "max_batch": app.max_batch,
            "prompt_chunk": app.cache.prompt_chunk,
            "cache_memory_mib": app.cache_memory,
            "idle_refresh_ms": app.idle_refresh.map(|idle| idle.as_millis() as u64),
            // Where FIM answers come from (the backend's address stays private: /health needs
            // no key).
            "fim": if app.backend.is_some() { "backend" } else { "local" },
        })
    };
    if app.shutting_down.load(Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body("shutting_down"))).into_response();
    }
    match app.scheduler.missing() {
        None => Json(body("ok")).into_response(),
        // FIM requests still go to the backend: the server is of use (an orchestrator keeps it
        // in rotation); next edits are not.
        Some(why) if app.backend.is_some() => {
            let mut value = body("degraded");
            value["error"] = format!("next edits are unavailable: {why}").into();
            Json(value).into_response()
        }
        Some(why) => {
            let mut value = body("no_model");
            value["error"] = why.into();
            (StatusCode::SERVICE_UNAVAILABLE, Json(value)).into_response()
        }
    }
}

async fn metrics_text(State(app): State<Shared>) -> Response {
    (
        [(header::CONTENT_TYPE, redraft_runtime::metrics::CONTENT_TYPE)],
        app.metrics.render(),
    )
        .into_response()
}

async fn unknown_route(method: Method, uri: Uri) -> ApiError {
    ApiError::unknown_route(method.as_str(), uri.path()).in_dialect(Dialect::of_path(uri.path()))
}

async fn wrong_method(method: Method, uri: Uri) -> ApiError {
    ApiError::method_not_allowed(method.as_str(), uri.path())
        .in_dialect(Dialect::of_path(uri.path()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_paths_share_one_metrics_label() {
        assert_eq!(endpoint_label("/v1/completions"), "/v1/completions");
        assert_eq!(endpoint_label("/v1/../../etc/passwd"), "other");
    }

    /// A model name is served under what follows its last `/`, an Ollama name without its
    /// `ollama:`: one id however the name was spelled (a path that exists is its own name).
    #[test]
    fn a_model_name_is_served_under_its_last_part() {
        let id = |name: &str| served_id(Path::new(name));
        assert_eq!(id("ollama:qwen2.5-coder:1.5b"), "qwen2.5-coder:1.5b");
        assert_eq!(
            id("ollama:library/qwen2.5-coder:1.5b"),
            "qwen2.5-coder:1.5b"
        );
        assert_eq!(id("ollama:user/tiny"), "tiny");
        assert_eq!(id("hf:ORG/REPO-GGUF:Q8_0"), "REPO-GGUF:Q8_0");
        assert_eq!(id("hf:ORG/REPO/model-q8_0.gguf"), "model-q8_0.gguf");
        assert_eq!(id("hf:ORG/REPO/"), "REPO");
        assert_eq!(id("/no/such/dir/dream-coder"), "dream-coder");
    }
}
