//! A remote FIM backend: the run step of the FIM pipeline (`redraft_suggest::fim`: prepare ->
//! run -> finish) sent to a model served by another process: a `redraft serve`, or any
//! OpenAI-compatible completions server (vLLM, SGLang, llama.cpp's `llama-server`, Ollama's
//! `/v1`). The plan is made here by the same context layer the local engine gets
//! ([`Backend::prepare`], token counts estimated from bytes); the server is sent the plan's
//! prefix and suffix in the served model's FIM [`Template`] (`POST /v1/completions`) and
//! answers the raw middle, which `fim::finish_middles` cleans exactly as `fim::finish` cleans a
//! local one.
//!
//! Blocking, for the scheduler's backend workers and `redraft eval`: each call runs on the
//! backend's own small runtime (one thread, which also keeps pooled connections alive), so it
//! must not be called from inside an async task. **Cancellation closes the HTTP request**: the
//! caller's cancel flag (the one the local sampler checks between denoising steps) is polled
//! every few milliseconds while a request is in flight; once it is raised the request's future
//! is dropped, which closes its connection, and the call returns [`BackendError::Cancelled`].
//!
//! **An upstream is not trusted to behave**: an answer is read up to [`MAX_ANSWER_BYTES`] (one
//! that never ends is cut there, not at the timeout, which bounds a stalled or trickling body
//! too); a redirect is an error naming its target, not followed (a POST redirected by 301-303
//! would come back a GET, cross-host without the key); and an error quotes the server's message
//! cut short, with the API key and the URL's password redacted, naming the URL without its
//! credentials.
//!
//! HTTP is reqwest (HTTP/1 only, no default features) on rustls with the ring provider: a
//! well-kept client with timeouts, connection pooling, `HTTP(S)_PROXY` and TLS for the GPU boxes
//! users reach over HTTPS, without aws-lc-rs's C/CMake build.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use percent_encoding::percent_decode_str;
use redraft_context::{ByteEstimate, Neighbour, Source, TokenCounter};
use redraft_suggest::fim::{self, FimOptions, Prepared};
use redraft_suggest::remote::{BackendSpec, FimBackend, RemoteMiddle};
use reqwest::Url;
use serde_json::{json, Value};

mod url;
use self::url::shown;
pub use self::url::{endpoints, shown_endpoint};

/// Context tokens (prefix, suffix and snippets) sent by default: what editors' FIM clients
/// send (FIELD_NOTES §3: windows of ~1-2k tokens), well inside any code model's window.
pub const DEFAULT_CONTEXT_TOKENS: usize = 2048;
/// How long one request may take, connecting included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often an in-flight request looks at its cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(5);
/// The most of a server's answer quoted in an error.
const QUOTED_BYTES: usize = 400;
/// The longest answer read: a completion is a few middles of a few kilobytes and a models
/// listing rarely passes a megabyte; past this the server is not answering what was asked, and
/// reading on (a body that never ends) would only fill memory until the timeout.
pub const MAX_ANSWER_BYTES: usize = 16 << 20;
/// The most of an error answer read: only its message is quoted (a longer one is quoted as it
/// starts, not parsed).
const MAX_ERROR_BYTES: usize = 1 << 20;
/// What a secret (the API key, a URL's password) is replaced with in a message.
const REDACTED: &str = "[redacted]";
/// A secret shorter than this is redacted only where it stands as a word: a short key
/// (llama-server's `--api-key test`) also spells parts of ordinary words (`latest`).
const WORD_SECRET_BYTES: usize = 8;

pub use redraft_prompts::fim_template::Template;

/// Where and how to reach a backend.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendConfig {
    /// `http://host:port`, `http://host:port/v1` or the whole `.../v1/completions`.
    pub url: String,
    /// The served model's name; `None`: the one model the server lists (or none sent).
    pub model: Option<String>,
    pub template: Template,
    /// Sent as `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    /// For one request, connecting included.
    pub timeout: Duration,
    /// Context tokens sent (prefix, suffix and snippets), by the plan's count.
    pub context_tokens: usize,
}

impl BackendConfig {
    /// `url` with the defaults: the Qwen template, no model name or key, 30 s, 2048 tokens.
    pub fn new(url: impl Into<String>) -> BackendConfig {
        BackendConfig {
            url: url.into(),
            model: None,
            template: Template::Qwen,
            api_key: None,
            timeout: DEFAULT_TIMEOUT,
            context_tokens: DEFAULT_CONTEXT_TOKENS,
        }
    }

    /// The positions a plan under `options` may fill: the configured context plus the canvas
    /// (the model's own window is the server's business).
    pub fn positions(&self, options: &FimOptions) -> usize {
        let canvas = options.fixed_length.unwrap_or(options.max_tokens);
        self.context_tokens + canvas + 1
    }
}

/// Why a backend gave no middle. Each message names the endpoint and says what to check.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackendError {
    /// The caller's cancel flag was raised; the request's connection was closed.
    #[error("cancelled")]
    Cancelled,
    #[error("backend URL `{url}`: {message}")]
    BadUrl { url: String, message: String },
    #[error("{url}: connection refused: is the server running and listening there?")]
    Refused { url: String },
    #[error("{url}: cannot connect: {message}")]
    Connect { url: String, message: String },
    #[error("{url}: no answer within {seconds} s: the server is busy or stuck, or the timeout is too short")]
    Timeout { url: String, seconds: f64 },
    #[error("{url} answered HTTP {status}: {message}{hint}")]
    Status {
        url: String,
        status: u16,
        message: String,
        hint: &'static str,
    },
    #[error("{url}: the answer is longer than {limit} bytes: is this an OpenAI-compatible completions endpoint?")]
    TooLarge { url: String, limit: usize },
    #[error("{url}: the answer is not JSON ({message}): {body}")]
    Malformed {
        url: String,
        message: String,
        body: String,
    },
    #[error("{url}: the answer has no `choices[0].text` (is this an OpenAI-compatible completions endpoint?): {body}")]
    NoText { url: String, body: String },
    #[error("{url} serves several models ({models}): name one (--backend-model)")]
    WhichModel { url: String, models: String },
    #[error("{url}: {message}")]
    Http { url: String, message: String },
    #[error("the backend client could not start: {0}")]
    Setup(String),
}

/// One entry of a server's `GET /v1/models`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedModel {
    pub id: String,
    /// The model the name serves (vLLM's and `redraft serve`'s `root`), when the server says.
    pub root: Option<String>,
}

/// The one model `listed` names: its only entry; or, when every entry serves the same `root`
/// (one model under several names, as `redraft serve` lists its aliases), the entry named as
/// that root. `None` when the entries are different models.
pub fn only_model(listed: &[ListedModel]) -> Option<String> {
    if let [one] = listed {
        return Some(one.id.clone());
    }
    let root = listed.first()?.root.as_deref()?;
    let one_model = listed.iter().all(|m| m.root.as_deref() == Some(root));
    (one_model && listed.iter().any(|m| m.id == root)).then(|| root.to_string())
}

/// The names of `listed` for a message: the first few, and how many more (a gateway may list
/// hundreds).
fn some_names(listed: &[ListedModel], secrets: &[String]) -> String {
    const NAMED: usize = 8;
    let mut names: Vec<String> = listed
        .iter()
        .take(NAMED)
        .map(|m| quote(m.id.as_bytes(), secrets))
        .collect();
    if listed.len() > NAMED {
        names.push(format!("and {} more", listed.len() - NAMED));
    }
    names.join(", ")
}

/// What to ask a backend to fill.
#[derive(Debug, Clone, PartialEq)]
pub struct FillRequest<'a> {
    pub prefix: &'a str,
    pub suffix: &'a str,
    /// The longest middle, in the server's tokens.
    pub max_tokens: usize,
    /// 0 is greedy.
    pub temperature: f32,
    /// Sent with a non-zero temperature, so sampled runs repeat.
    pub seed: Option<u64>,
    /// Stop strings besides the template's own.
    pub stop: Vec<String>,
    /// Middles to sample (`n`); more than one only makes sense with a temperature.
    pub n: usize,
}

impl<'a> FillRequest<'a> {
    /// The request for a plan: its prefix and suffix, the canvas cap as `max_tokens`, the
    /// sampler's temperature (and seed, when sampling).
    pub fn for_prepared(prepared: &'a Prepared) -> FillRequest<'a> {
        let sampler = &prepared.request.sampler;
        FillRequest {
            prefix: &prepared.plan.prefix,
            suffix: &prepared.plan.suffix,
            max_tokens: prepared.request.max_tokens.max(1),
            temperature: sampler.temperature,
            seed: (sampler.temperature > 0.0).then_some(sampler.seed),
            stop: Vec::new(),
            n: 1,
        }
    }
}

/// A backend's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Fill {
    /// One per choice, in order, each cut at the first stop string it still holds.
    pub middles: Vec<Middle>,
    /// `usage.prompt_tokens`, when the server reports it.
    pub prompt_tokens: Option<usize>,
    /// `usage.completion_tokens` (all choices), when the server reports it.
    pub completion_tokens: Option<usize>,
    /// The round trip.
    pub latency_ms: f64,
}

/// One raw middle.
#[derive(Debug, Clone, PartialEq)]
pub struct Middle {
    pub text: String,
    /// `stop` (an end token or a stop string), `length` (`max_tokens`), or what the server said.
    pub finish_reason: Option<String>,
}

impl Middle {
    /// The model ended the middle itself.
    pub fn ended(&self) -> bool {
        self.finish_reason.as_deref() != Some("length")
    }
}

/// What [`Backend::complete`] suggested: the local pipeline's [`fim::FimOutcome`] with the
/// server's answer in place of the engine's completions.
#[derive(Debug, Clone)]
pub struct BackendOutcome {
    pub prepared: Prepared,
    pub fill: Fill,
    /// The cleaned suggestions, best first, without duplicates; empty when nothing was worth
    /// showing.
    pub texts: Vec<String>,
    /// Plan + request + post-processing.
    pub latency_ms: f64,
}

/// A client of one backend. Cheap to share by reference across threads; build one per
/// setting change, not per request (it keeps the connections).
pub struct Backend {
    config: BackendConfig,
    /// The endpoints requests go to: the URL's `user:password@`, if any, kept for reqwest to
    /// send as basic auth (unless an API key is set).
    completions: Url,
    models: Url,
    /// The endpoints as messages name them: without the URL's credentials.
    shown_completions: String,
    shown_models: String,
    /// What no message may quote: the API key and the URL's password, should the server
    /// echo them back.
    secrets: Vec<String>,
    client: reqwest::Client,
    /// `Some` until dropped (see `Drop`).
    runtime: Option<tokio::runtime::Runtime>,
    /// The model `/v1/models` named, once asked (only when the config names none).
    listed_model: OnceLock<Option<String>>,
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("completions", &self.shown_completions)
            .field("model", &self.config.model)
            .field("template", &self.config.template)
            .finish_non_exhaustive()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        // Not a plain drop: dropping a runtime blocks, which panics inside an async context
        // (a settings handler may drop the old backend there).
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Backend {
    /// A client for `config`; checks the URL, contacts nothing.
    pub fn new(config: BackendConfig) -> Result<Backend, BackendError> {
        let (mut completions, mut models) = endpoints(&config.url)?;
        let mut secrets: Vec<String> = config.api_key.iter().cloned().collect();
        let shown_completions = shown(completions.as_str(), &mut secrets);
        let shown_models = shown(models.as_str(), &mut secrets);
        // Credentials written in the URL go as basic auth, as reqwest sends them; with an API
        // key as well they would be a second `Authorization` header, so the key alone is sent.
        let parsed = Url::parse(&config.url).map_err(|e| BackendError::Setup(e.to_string()))?;
        if let Some(password) = parsed.password() {
            secrets.push(password.to_string());
            // The decoded form too: that is what a server would echo; and the basic-auth
            // token reqwest sends for them, which a server may quote back.
            let decode = |text| percent_decode_str(text).decode_utf8_lossy().into_owned();
            let decoded = decode(password);
            let token = format!("{}:{decoded}", decode(parsed.username()));
            secrets.push(decoded);
            secrets.push(base64::engine::general_purpose::STANDARD.encode(token));
        }
        let in_url = !parsed.username().is_empty() || parsed.password().is_some();
        if config.api_key.is_none() && in_url {
            for url in [&mut completions, &mut models] {
                // Cannot fail: the URL has a host (checked by `endpoints`).
                let _ = url.set_username(parsed.username());
                let _ = url.set_password(parsed.password());
            }
        }
        secrets.retain(|s| !s.is_empty());
        static CRYPTO: Once = Once::new();
        // reqwest is built without a default provider (that would be aws-lc-rs); installing
        // ring fails only when the process already chose one, which is as good.
        CRYPTO.call_once(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let client = reqwest::Client::builder()
            .user_agent(concat!("redraft/", env!("CARGO_PKG_VERSION")))
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            // A redirect is a URL to fix, not one to follow: a POST redirected by 301-303 comes
            // back a GET (and cross-host, without the key), which the server answers with an
            // error that hides the redirect; and the code is sent nowhere the user did not name.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| BackendError::Setup(chain(&e)))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redraft-backend")
            .enable_all()
            .build()
            .map_err(|e| BackendError::Setup(e.to_string()))?;
        Ok(Backend {
            config,
            completions,
            models,
            shown_completions,
            shown_models,
            secrets,
            client,
            runtime: Some(runtime),
            listed_model: OnceLock::new(),
        })
    }

    pub fn config(&self) -> &BackendConfig {
        &self.config
    }

    /// The completions endpoint requests go to.
    pub fn endpoint(&self) -> &str {
        &self.shown_completions
    }

    /// The positions a plan under `options` may fill ([`BackendConfig::positions`]).
    pub fn positions(&self, options: &FimOptions) -> usize {
        self.config.positions(options)
    }

    /// Plans `source`'s request as the local engine's is planned, for this backend's context
    /// size; token counts are byte estimates (the served model's tokenizer is not at hand; the
    /// estimate errs on the long side, so the context fits).
    pub fn prepare(
        &self,
        source: &Source<'_>,
        neighbours: &[Neighbour],
        options: &FimOptions,
    ) -> Prepared {
        fim::prepare_with(
            self.positions(options),
            &ByteEstimate,
            source,
            neighbours,
            options,
        )
    }

    /// The whole pipeline with the middle filled by the backend: [`Backend::prepare`],
    /// [`Backend::fill`], `fim::finish_middles`; what the scheduler runs in place of
    /// `fim::complete` when a backend is set. Several candidates are sampled (`n`) only with a
    /// temperature: greedy decoding would repeat one middle.
    pub fn complete(
        &self,
        source: &Source<'_>,
        neighbours: &[Neighbour],
        options: &FimOptions,
        cancel: Option<&AtomicBool>,
    ) -> Result<BackendOutcome, BackendError> {
        let started = Instant::now();
        let prepared = self.prepare(source, neighbours, options);
        let mut request = FillRequest::for_prepared(&prepared);
        if request.temperature > 0.0 {
            request.n = options.candidates.max(1);
        }
        let fill = self.fill(&request, cancel)?;
        let texts =
            fim::finish_middles(fill.middles.iter().map(|m| m.text.as_str()), &prepared.plan);
        Ok(BackendOutcome {
            prepared,
            fill,
            texts,
            latency_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// Asks the backend for the middle between `request`'s prefix and suffix. Blocks; returns
    /// [`BackendError::Cancelled`] within a few milliseconds of `cancel` being raised, having
    /// closed the request's connection. The timeout bounds the whole call: the first one, when
    /// it asks `/v1/models` which model to name, included.
    pub fn fill(
        &self,
        request: &FillRequest<'_>,
        cancel: Option<&AtomicBool>,
    ) -> Result<Fill, BackendError> {
        let asked = Instant::now();
        let model = match &self.config.model {
            Some(model) => Some(model.clone()),
            None => self.listed_model(cancel)?,
        };
        let left = self.config.timeout.saturating_sub(asked.elapsed());
        if left.is_zero() {
            return Err(BackendError::Timeout {
                url: self.shown_completions.clone(),
                seconds: self.config.timeout.as_secs_f64(),
            });
        }
        let template = self.config.template;
        let mut stop: Vec<String> = template.stops().iter().map(|s| s.to_string()).collect();
        stop.extend(request.stop.iter().cloned());
        let mut body = json!({
            "prompt": template.prompt(request.prefix, request.suffix),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stream": false,
        });
        if let Some(model) = model {
            body["model"] = json!(model);
        }
        if template == Template::Suffix {
            body["suffix"] = json!(request.suffix);
        }
        if !stop.is_empty() {
            body["stop"] = json!(stop);
        }
        if request.n > 1 {
            body["n"] = json!(request.n);
        }
        if let Some(seed) = request.seed {
            body["seed"] = json!(seed);
        }
        let started = Instant::now();
        let answer = self.block_on(cancel, self.post(&body, left))?;
        let mut fill = parse_answer(&self.shown_completions, &answer, &self.secrets)
            .map_err(|e| self.redact(e))?;
        for middle in &mut fill.middles {
            if let Some(at) = stop
                .iter()
                .filter_map(|s| middle.text.find(s.as_str()))
                .min()
            {
                middle.text.truncate(at);
            }
        }
        fill.latency_ms = started.elapsed().as_secs_f64() * 1e3;
        Ok(fill)
    }

    /// The models the server lists (`GET /v1/models`); empty when it has no such endpoint.
    pub fn list_models(
        &self,
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<ListedModel>, BackendError> {
        self.block_on(cancel, async {
            let url = self.shown_models.as_str();
            let response = self
                .authorized(self.client.get(self.models.clone()))
                .send()
                .await
                .map_err(|e| request_error(url, &e, self.config.timeout))?;
            if response.status() == reqwest::StatusCode::NOT_FOUND {
                return Ok(Vec::new());
            }
            let body = self.answer(url, response).await?;
            let value: Value =
                serde_json::from_slice(&body).map_err(|e| BackendError::Malformed {
                    url: url.to_string(),
                    message: e.to_string(),
                    body: quote(&body, &self.secrets),
                })?;
            Ok(value["data"]
                .as_array()
                .map(|models| {
                    models
                        .iter()
                        .filter_map(|m| {
                            Some(ListedModel {
                                id: m["id"].as_str()?.to_string(),
                                root: m["root"].as_str().map(str::to_string),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default())
        })
    }

    /// The model requests name: the configured one, else the server's only model (asked once,
    /// [`only_model`]), else none. A server listing several models is an error naming them.
    pub fn resolve_model(
        &self,
        cancel: Option<&AtomicBool>,
    ) -> Result<Option<String>, BackendError> {
        match &self.config.model {
            Some(model) => Ok(Some(model.clone())),
            None => self.listed_model(cancel),
        }
    }

    fn listed_model(&self, cancel: Option<&AtomicBool>) -> Result<Option<String>, BackendError> {
        if let Some(model) = self.listed_model.get() {
            return Ok(model.clone());
        }
        let models = self.list_models(cancel)?;
        let model = match models.as_slice() {
            [] => None,
            several => Some(only_model(several).ok_or_else(|| BackendError::WhichModel {
                url: self.shown_models.clone(),
                models: some_names(several, &self.secrets),
            })?),
        };
        Ok(self.listed_model.get_or_init(|| model).clone())
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.config.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// Posts `body` to the completions endpoint, answered within `timeout`; the answer's JSON
    /// on a 2xx.
    async fn post(&self, body: &Value, timeout: Duration) -> Result<Value, BackendError> {
        let url = self.shown_completions.as_str();
        let response = self
            .authorized(self.client.post(self.completions.clone()))
            .timeout(timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| request_error(url, &e, self.config.timeout))?;
        let bytes = self.answer(url, response).await?;
        serde_json::from_slice(&bytes).map_err(|e| BackendError::Malformed {
            url: url.to_string(),
            message: e.to_string(),
            body: quote(&bytes, &self.secrets),
        })
    }

    /// The body of a 2xx `response`, at most [`MAX_ANSWER_BYTES`] of it, read as it arrives
    /// (the request's timeout bounds a body that trickles); any other status is an error
    /// quoting the start of its body.
    async fn answer(
        &self,
        url: &str,
        mut response: reqwest::Response,
    ) -> Result<Vec<u8>, BackendError> {
        let status = response.status();
        let limit = if status.is_success() {
            MAX_ANSWER_BYTES
        } else {
            MAX_ERROR_BYTES
        };
        let mut body = Vec::new();
        if status.is_success() && response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(BackendError::TooLarge {
                url: url.to_string(),
                limit,
            });
        }
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| request_error(url, &e, self.config.timeout))?
        {
            if body.len() + chunk.len() > limit {
                if !status.is_success() {
                    // Enough to quote: the rest is not read.
                    body.extend_from_slice(&chunk[..limit - body.len()]);
                    break;
                }
                return Err(BackendError::TooLarge {
                    url: url.to_string(),
                    limit,
                });
            }
            body.extend_from_slice(&chunk);
        }
        if status.is_success() {
            return Ok(body);
        }
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned());
        Err(status_error(
            url,
            status.as_u16(),
            location.as_deref(),
            &body,
            &self.secrets,
        ))
    }

    /// `error` with each secret the server may have echoed (the API key, the URL's password)
    /// replaced by `[redacted]`.
    fn redact(&self, mut error: BackendError) -> BackendError {
        // Each error's text from outside: the server's answer, or the HTTP client's account.
        match &mut error {
            BackendError::Status {
                message: echoed, ..
            }
            | BackendError::Connect {
                message: echoed, ..
            }
            | BackendError::Http {
                message: echoed, ..
            }
            | BackendError::Malformed { body: echoed, .. }
            | BackendError::NoText { body: echoed, .. }
            | BackendError::WhichModel { models: echoed, .. } => {
                *echoed = scrub(echoed, &self.secrets)
            }
            _ => {}
        }
        error
    }

    /// Runs `work` on the backend's runtime until it ends or `cancel` is raised; dropping the
    /// request's future on cancel is what closes its connection.
    fn block_on<T>(
        &self,
        cancel: Option<&AtomicBool>,
        work: impl std::future::Future<Output = Result<T, BackendError>>,
    ) -> Result<T, BackendError> {
        let cancelled = || cancel.is_some_and(|flag| flag.load(Ordering::Relaxed));
        if cancelled() {
            return Err(BackendError::Cancelled);
        }
        let runtime = self
            .runtime
            .as_ref()
            .expect("a live backend has its runtime");
        runtime
            .block_on(async {
                tokio::select! {
                    biased;
                    () = async {
                        while !cancelled() {
                            tokio::time::sleep(CANCEL_POLL).await;
                        }
                    }, if cancel.is_some() => Err(BackendError::Cancelled),
                    result = work => result,
                }
            })
            .map_err(|e| self.redact(e))
    }
}

impl FimBackend for Backend {
    fn spec(&self) -> BackendSpec {
        BackendSpec {
            url: self.shown_completions.clone(),
            model: self
                .config
                .model
                .clone()
                .or_else(|| self.listed_model.get().cloned().flatten()),
            template: self.config.template.name().to_string(),
            context_tokens: self.config.context_tokens,
        }
    }

    fn positions(&self, options: &FimOptions) -> usize {
        Backend::positions(self, options)
    }

    fn counter(&self) -> &dyn TokenCounter {
        &ByteEstimate
    }

    fn fill(&self, prepared: &Prepared) -> Result<RemoteMiddle, String> {
        let fill = Backend::fill(self, &FillRequest::for_prepared(prepared), None)
            .map_err(|e| e.to_string())?;
        let middle = fill
            .middles
            .into_iter()
            .next()
            .expect("parse_answer keeps one choice at least");
        Ok(RemoteMiddle {
            ended: middle.ended(),
            text: middle.text,
            tokens: fill.completion_tokens,
        })
    }
}

/// The choices of a completions answer (at least one, each with its text) and its usage.
fn parse_answer(url: &str, answer: &Value, secrets: &[String]) -> Result<Fill, BackendError> {
    let no_text = || BackendError::NoText {
        url: url.to_string(),
        body: quote(answer.to_string().as_bytes(), secrets),
    };
    let choices = answer["choices"].as_array().ok_or_else(no_text)?;
    let middles = choices
        .iter()
        .map(|choice| {
            Some(Middle {
                text: choice["text"].as_str()?.to_string(),
                finish_reason: choice["finish_reason"].as_str().map(str::to_string),
            })
        })
        .collect::<Option<Vec<Middle>>>()
        .filter(|middles| !middles.is_empty())
        .ok_or_else(no_text)?;
    let usage = |field: &str| {
        answer["usage"][field]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
    };
    Ok(Fill {
        middles,
        prompt_tokens: usage("prompt_tokens"),
        completion_tokens: usage("completion_tokens"),
        latency_ms: 0.0,
    })
}

/// A non-2xx answer: the server's own message where its body carries one (OpenAI, vLLM and
/// llama.cpp `{"error": {"message"}}`, Ollama `{"error": "..."}`, FastAPI `{"detail"}`), else
/// the body itself; either cut to [`QUOTED_BYTES`]. A redirect names where it points.
fn status_error(
    url: &str,
    status: u16,
    location: Option<&str>,
    body: &[u8],
    secrets: &[String],
) -> BackendError {
    let message = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|value| {
            [
                &value["error"]["message"],
                &value["error"],
                &value["detail"],
                &value["message"],
            ]
            .into_iter()
            .find_map(|v| v.as_str().map(|m| quote(m.as_bytes(), secrets)))
        })
        .unwrap_or_else(|| quote(body, secrets));
    let message = match location {
        Some(location) if (300..400).contains(&status) => {
            format!("a redirect to {}", quote(location.as_bytes(), secrets))
        }
        _ => message,
    };
    let hint = match status {
        401 | 403 => " (check the API key)",
        404 => " (is this an OpenAI-compatible server? requests go to URL/v1/completions)",
        300..=399 => " (redirects are not followed: give the backend URL it points to)",
        _ => "",
    };
    BackendError::Status {
        url: url.to_string(),
        status,
        message: if message.is_empty() {
            "(empty body)".to_string()
        } else {
            message
        },
        hint,
    }
}

fn request_error(url: &str, error: &reqwest::Error, timeout: Duration) -> BackendError {
    if error.is_timeout() {
        return BackendError::Timeout {
            url: url.to_string(),
            seconds: timeout.as_secs_f64(),
        };
    }
    let refused = std::iter::successors(Some(error as &(dyn std::error::Error + 'static)), |e| {
        e.source()
    })
    .any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    });
    if refused {
        BackendError::Refused {
            url: url.to_string(),
        }
    } else if error.is_connect() {
        BackendError::Connect {
            url: url.to_string(),
            message: chain(error),
        }
    } else {
        BackendError::Http {
            url: url.to_string(),
            message: chain(error),
        }
    }
}

/// An error and its causes on one line (reqwest's own message is only the outermost).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

/// The start of a body, for an error message, with `secrets` redacted before it is cut (so
/// that a cut inside one shows none of it).
fn quote(body: &[u8], secrets: &[String]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    // Enough to hold any secret the cut falls inside, without scrubbing a whole long body.
    let longest = secrets.iter().map(|s| s.chars().count()).max().unwrap_or(0);
    let near = match text.char_indices().nth(QUOTED_BYTES + longest) {
        Some((cut, _)) => &text[..cut],
        None => text,
    };
    let scrubbed = scrub(near, secrets);
    match scrubbed.char_indices().nth(QUOTED_BYTES) {
        Some((cut, _)) => format!("{}...", &scrubbed[..cut]),
        None if near.len() < text.len() => format!("{scrubbed}..."),
        None => scrubbed,
    }
}

/// `text` with each of `secrets` replaced by [`REDACTED`], in one pass (a replacement is not
/// searched again): a long secret wherever it occurs, one shorter than [`WORD_SECRET_BYTES`]
/// only where no letter or digit touches it.
fn scrub(text: &str, secrets: &[String]) -> String {
    if secrets.is_empty() {
        return text.to_string();
    }
    let word_char = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let mut scrubbed = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(next) = text[at..].chars().next() {
        let secret = secrets
            .iter()
            .filter(|secret| text[at..].starts_with(secret.as_str()))
            .filter(|secret| {
                secret.len() >= WORD_SECRET_BYTES
                    || !(word_char(text[..at].chars().next_back())
                        || word_char(text[at + secret.len()..].chars().next()))
            })
            .max_by_key(|secret| secret.len());
        match secret {
            Some(secret) => {
                scrubbed.push_str(REDACTED);
                at += secret.len();
            }
            None => {
                scrubbed.push(next);
                at += next.len_utf8();
            }
        }
    }
    scrubbed
}

#[cfg(test)]
mod tests;
