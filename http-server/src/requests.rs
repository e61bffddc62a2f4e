//! What every API's request becomes, and how answers go back: the fields the APIs share
//! (`prompt` as a string or a one-element list, `stop` as a string or a list of any length,
//! sampling), a prompt read as a FIM template or a next-edit layout and turned into the
//! scheduler's [`Work`], submitting and awaiting it, and the streams (server-sent events, with
//! a keep-alive comment through a silence; NDJSON) whose drop cancels the job; fields asking for
//! what the server does not do are refused by name ([`unsupported`]).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use redraft_context::{Language, Neighbour};
use redraft_engine::sampler::{Effort, SamplerConfig};
use redraft_suggest::fim::{self, FimOptions};
use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use tokio::sync::mpsc;

use super::edit_prompt::EditPrompt;
use super::error::{quote, ApiError, Dialect};
use super::listen::ReadStopped;
use super::{App, Shared};
use redraft_prompts::fim_template;
use redraft_runtime::scheduler::{
    Answer, Draft, EditLimits, EditWork, FimWork, JobError, Rejected, Submit, Ticket, Work,
};

/// Candidates a request may ask for (`n`): the pipeline's distinct canvas lengths.
pub const MAX_CANDIDATES: usize = 8;

/// The cap on `max_tokens` of a FIM request sent to a remote backend (the language server's
/// `maxTokens` bound): the served model's window is the backend's business, not the local
/// model's.
pub const BACKEND_MAX_TOKENS: usize = 1024;

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `cmpl-` and 24 hex digits, unique within the process and unlikely to repeat across runs.
pub fn completion_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("cmpl-{nanos:016x}{n:08x}")
}

/// The body as `T`: 413 past the size limit, 408 past the body's deadline, 503 when the
/// server began stopping while it arrived, 400 for what is not `T`'s JSON object.
pub fn parse_body<T: DeserializeOwned>(
    app: &App,
    body: Result<Bytes, BytesRejection>,
    dialect: Dialect,
) -> Result<T, ApiError> {
    let bytes = body.map_err(|rejection| {
        if let Some(stopped) = ReadStopped::in_chain(&rejection) {
            match stopped {
                ReadStopped::TimedOut(limit) => {
                    app.metrics.body_timeouts.inc();
                    ApiError::body_timeout(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX))
                }
                ReadStopped::ShuttingDown => ApiError::shutting_down(),
            }
        } else if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(app.max_body)
        } else {
            ApiError::invalid(
                "body",
                format!("the request body could not be read: {rejection}"),
            )
        }
        .in_dialect(dialect)
    })?;
    if let Some(err) = not_an_object(&bytes) {
        return Err(ApiError::bad_json("", &err).in_dialect(dialect));
    }
    // Through serde_path_to_error, so that a value of the wrong type names its field
    // (`max_tokens`), which serde_json's own message does not.
    let bad =
        |field: &str, err: &serde_json::Error| ApiError::bad_json(field, err).in_dialect(dialect);
    let mut json = serde_json::Deserializer::from_slice(&bytes);
    let request = serde_path_to_error::deserialize(&mut json)
        .map_err(|err| bad(&err.path().to_string(), err.inner()))?;
    json.end().map_err(|err| bad("", &err))?;
    Ok(request)
}

/// Why `body` is not a JSON object, when it is some other JSON (or not JSON at all): serde's
/// derived structs also take an array of their fields in order, which no client means.
fn not_an_object(body: &[u8]) -> Option<serde_json::Error> {
    // Empty: serde's own error says so.
    let first = body.iter().find(|b| !b" \t\r\n".contains(b))?;
    if *first == b'{' {
        return None;
    }
    use serde::de::Error;
    match serde_json::from_slice::<serde_json::Value>(body) {
        Err(not_json) => Some(not_json),
        Ok(value) => not_object(&value).map(|unexpected| {
            serde_json::Error::invalid_type(unexpected, &"a JSON object of the route's fields")
        }),
    }
}

/// What `value` is, when it is not an object.
fn not_object(value: &serde_json::Value) -> Option<serde::de::Unexpected<'_>> {
    use serde::de::Unexpected;
    Some(match value {
        serde_json::Value::Object(_) => return None,
        serde_json::Value::Array(_) => Unexpected::Seq,
        serde_json::Value::String(_) => Unexpected::Other("string"),
        serde_json::Value::Number(_) => Unexpected::Other("number"),
        serde_json::Value::Bool(b) => Unexpected::Bool(*b),
        serde_json::Value::Null => Unexpected::Unit,
    })
}

/// One nested object of a request (`options`, `stream_options`, a message, a content part),
/// read straight from the body's map. serde's derived structs would also take an array of the
/// fields in order (`"options": [128]` as `num_predict`), which no client means; and a
/// `serde_json::Value` in between would keep the last of a key sent twice
/// (`{"num_predict": 1, "num_predict": 2}` as 2) where the top level refuses it: read this way,
/// the struct's own `duplicate field` error names the key, as at the top level.
struct Object<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Object<T> {
    type Value = T;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Object<T> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map))
    }
}

/// [`Object`] for an optional field (`null` is none: `#[serde(default, deserialize_with = ...)]`).
pub fn optional_object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Optional<T>(PhantomData<T>);

    impl<'de, T: Deserialize<'de>> Visitor<'de> for Optional<T> {
        type Value = Option<T>;

        fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
            formatter.write_str("a JSON object or null")
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }

        fn visit_some<D: serde::Deserializer<'de>>(self, value: D) -> Result<Option<T>, D::Error> {
            Object(PhantomData).deserialize(value).map(Some)
        }
    }

    deserializer.deserialize_option(Optional(PhantomData))
}

/// [`Object`] for each item of a list.
pub fn objects<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Objects<T>(PhantomData<T>);

    impl<'de, T: Deserialize<'de>> Visitor<'de> for Objects<T> {
        type Value = Vec<T>;

        fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
            formatter.write_str("a list of JSON objects")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = items.next_element_seed(Object(PhantomData))? {
                out.push(item);
            }
            Ok(out)
        }
    }

    deserializer.deserialize_seq(Objects(PhantomData))
}

/// `seed`: any JSON integer (`null` is none: `#[serde(default, deserialize_with = ...)]`).
/// OpenAI's API takes a signed 64-bit seed (its SDKs pass `-1` and other negative ones through,
/// as vLLM takes them) and Ollama's is a Go `int`; the sampler's seed is those 64 bits read
/// unsigned, so `-1` is `u64::MAX` on every route. A seed that is not an integer is a 400.
pub fn optional_seed<'de, D>(deserializer: D) -> Result<Option<u64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Seed;

    impl<'de> Visitor<'de> for Seed {
        type Value = Option<u64>;

        fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
            formatter.write_str("an integer seed (signed or unsigned 64-bit) or null")
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Option<u64>, E> {
            Ok(None)
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Option<u64>, E> {
            Ok(None)
        }

        fn visit_some<D: serde::Deserializer<'de>>(
            self,
            value: D,
        ) -> Result<Option<u64>, D::Error> {
            value.deserialize_any(Seed)
        }

        fn visit_u64<E: serde::de::Error>(self, seed: u64) -> Result<Option<u64>, E> {
            Ok(Some(seed))
        }

        fn visit_i64<E: serde::de::Error>(self, seed: i64) -> Result<Option<u64>, E> {
            // Two's complement: the same 64 bits.
            Ok(Some(seed as u64))
        }
    }

    deserializer.deserialize_option(Seed)
}

/// `prompt`: a string, or a list holding one string.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "expected a string, or a list holding one string"
)]
pub enum PromptField {
    One(String),
    Many(Vec<serde_json::Value>),
}

impl PromptField {
    pub fn text(self) -> Result<String, ApiError> {
        match self {
            PromptField::One(text) => Ok(text),
            PromptField::Many(items) => match items.as_slice() {
                [serde_json::Value::String(text)] => Ok(text.clone()),
                [] => Ok(String::new()),
                _ => Err(ApiError::invalid(
                    "prompt",
                    "one prompt per request: send a string (token-id prompts and batches of prompts are not supported)",
                )),
            },
        }
    }
}

/// `stop`: a string or a list of strings, of any length (Zed has sent 14).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "expected a string or a list of strings")]
pub enum StopField {
    One(String),
    Many(Vec<String>),
}

pub fn stop_list(stop: Option<StopField>) -> Vec<String> {
    match stop {
        None => Vec::new(),
        Some(StopField::One(s)) => vec![s],
        Some(StopField::Many(list)) => list,
    }
}

/// Whether a field's value asks for nothing: absent, `null`, `false`, `0`, `""` or `[]`, the
/// values clients send by default for a feature they do not use (`logprobs: 0`, `think: false`,
/// `format: ""`).
pub fn asks_for_nothing(value: Option<&serde_json::Value>) -> bool {
    use serde_json::Value;
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => true,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        Some(Value::Bool(true)) | Some(Value::Object(_)) => false,
    }
}

/// A field asking for something this server does not do (400, naming it): answering without it
/// would hand the client something other than what it asked for. `why` says what the server
/// does instead, or what to send.
pub fn unsupported(param: &str, why: &str) -> ApiError {
    ApiError::unsupported(param, format!("{param} is not supported: {why}"))
}

/// `logprobs` and `top_logprobs`, which every API here has and no answer here carries.
pub fn refuse_logprobs(
    logprobs: Option<&serde_json::Value>,
    top_logprobs: Option<&serde_json::Value>,
) -> Result<(), ApiError> {
    for (param, value) in [("logprobs", logprobs), ("top_logprobs", top_logprobs)] {
        if !asks_for_nothing(value) {
            return Err(unsupported(
                param,
                "this server returns no token log probabilities; leave it out, null, false or 0",
            ));
        }
    }
    Ok(())
}

/// The sampling fields the APIs share, as sent.
#[derive(Debug, Clone)]
pub struct Sampling {
    pub max_tokens: Option<i64>,
    pub temperature: Option<f64>,
    pub seed: Option<u64>,
    pub n: Option<i64>,
    /// `effort` (`low`/`medium`/`high`) or Inception's `reasoning_effort` (`instant` is low).
    pub effort: Option<String>,
    pub stop: Vec<String>,
    /// How the request names its length limit (`max_tokens`, `options.num_predict`).
    pub max_tokens_param: &'static str,
}

fn effort(app: &App, asked: Option<&str>) -> Result<Effort, ApiError> {
    match asked.map(str::trim) {
        None | Some("") => Ok(app.effort),
        Some("instant") => Ok(Effort::Low),
        Some(other) => other.parse().map_err(|_: String| {
            ApiError::invalid(
                "effort",
                format!("unknown effort `{}` (low, medium or high)", quote(other)),
            )
        }),
    }
}

/// The sampler for `sampling` (temperature, seed; the effort's preset is the model's, bound when
/// the job runs: [`FimWork::effort`]) and the effort.
fn sampler(app: &App, sampling: &Sampling) -> Result<(SamplerConfig, Effort), ApiError> {
    let effort = effort(app, sampling.effort.as_deref())?;
    let mut config = SamplerConfig::effort(effort);
    config.cache = app.cache;
    if let Some(t) = sampling.temperature {
        if !(0.0..=2.0).contains(&t) || !t.is_finite() {
            return Err(ApiError::invalid(
                "temperature",
                format!("temperature {t} is outside 0..=2"),
            ));
        }
        config.temperature = t as f32;
    }
    if let Some(seed) = sampling.seed {
        config.seed = seed;
    }
    Ok((config, effort))
}

/// A FIM request's `max_tokens`: at most [`fim::longest_middle`] of the model's positions so
/// the context keeps the rest, or [`BACKEND_MAX_TOKENS`] with a backend.
fn max_tokens(app: &App, asked: Option<i64>, param: &str) -> Result<usize, ApiError> {
    let cap = match app.backend {
        Some(_) => BACKEND_MAX_TOKENS,
        None => fim::longest_middle(app.scheduler.positions()),
    };
    match asked {
        // The language server's default too.
        None => Ok(redraft_runtime::DEFAULT_MAX_TOKENS.min(cap)),
        Some(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(usize::MAX).min(cap)),
        // Ollama's -1 (no limit) and -2 (fill the context): as long as allowed.
        Some(-1 | -2) if param == "options.num_predict" => Ok(cap),
        Some(n) if param == "options.num_predict" => Err(ApiError::invalid(
            param,
            format!("{param} must be at least 1, or -1 or -2 (as long as allowed), not {n}"),
        )),
        Some(n) => Err(ApiError::invalid(
            param,
            format!("{param} must be at least 1, not {n}"),
        )),
    }
}

/// The FIM work for `prompt` (with the client's optional `suffix`): a prompt wrapped in a FIM
/// template is split back into prefix and suffix; the language comes from a file name in the
/// template's header or `path`, else Rust. With `--backend` the work names it, so the
/// scheduler's backend workers run it there (of the sampler, only the temperature and seed
/// reach a backend; the effort and the cache are the local engine's).
pub fn fim_work(
    app: &App,
    prompt: &str,
    suffix: Option<&str>,
    sampling: &Sampling,
) -> Result<Work, ApiError> {
    let suffix = suffix.unwrap_or("");
    let (prefix, suffix, path, files) = match fim_template::split(prompt) {
        Some((template, _)) if !suffix.is_empty() => {
            return Err(ApiError::invalid(
                "suffix",
                format!(
                    "the prompt carries a FIM template ({}) and the request a suffix: send the suffix in one place",
                    template.name()
                ),
            ))
        }
        Some((_, split)) => (split.prefix, split.suffix, split.path, split.files),
        None => (prompt.to_string(), suffix.to_string(), None, Vec::new()),
    };
    let n = match sampling.n {
        None => 1,
        Some(n) if (1..=MAX_CANDIDATES as i64).contains(&n) => n as usize,
        Some(n) => {
            return Err(ApiError::invalid(
                "n",
                format!("n must be 1 to {MAX_CANDIDATES}, not {n}"),
            ))
        }
    };
    let (sampler, effort) = sampler(app, sampling)?;
    let options = FimOptions {
        candidates: n,
        min_confidence: app.min_confidence,
        ..FimOptions::new(
            max_tokens(app, sampling.max_tokens, sampling.max_tokens_param)?,
            sampler,
        )
    };
    Ok(Work::Fim(FimWork {
        cursor: prefix.len(),
        text: prefix + &suffix,
        language: path
            .as_deref()
            .map_or(Language::UNSAID, |p| Language::from_file_name(Path::new(p))),
        tree: None,
        neighbours: files
            .into_iter()
            .enumerate()
            .map(|(i, (path, text))| Neighbour {
                path,
                text,
                edited_at: i as u64 + 1,
            })
            .collect(),
        options,
        stop: sampling.stop.clone(),
        backend: app.backend.clone(),
        effort: Some(effort),
    }))
}

/// The next-edit work for a prompt read from a client's layout.
pub fn edit_work(app: &App, prompt: EditPrompt, sampling: &Sampling) -> Result<Work, ApiError> {
    let (mut sampler, effort) = sampler(app, sampling)?;
    sampler.draft_tau = Some(redraft_suggest::edit::DRAFT_TAU);
    Ok(Work::Edit(EditWork {
        language: Language::from_file_name(Path::new(&prompt.path)),
        document: prompt.document,
        cursor: prompt.cursor,
        region: Some(prompt.region),
        path: prompt.path,
        tree: None,
        history: prompt.history,
        sampler,
        limits: EditLimits::default(),
        effort: Some(effort),
    }))
}

/// Queues `work`: 429 when the queue is full, 503 when shutting down or without a model (a FIM
/// job sent to a backend needs none).
pub fn submit(app: &App, work: Work, drafts: bool, dialect: Dialect) -> Result<Ticket, ApiError> {
    let submit = Submit {
        deadline: app.deadline.map(|d| Instant::now() + d),
        drafts,
        ..Submit::default()
    };
    app.scheduler.submit(work, submit).map_err(|rejected| {
        match rejected {
            Rejected::Full => ApiError::queue_full(1),
            Rejected::ShuttingDown => ApiError::shutting_down(),
            Rejected::NoModel(why) => ApiError::no_model(&why),
        }
        .in_dialect(dialect)
    })
}

/// A job's failure as the client sees it: a remote backend's is a 502 with its message (the
/// next request is tried again), a bug of ours or the model's a 500.
pub fn job_error(err: JobError, dialect: Dialect) -> ApiError {
    match err {
        // Only a shutdown cancels a job whose client still waits.
        JobError::Cancelled | JobError::ShuttingDown => ApiError::shutting_down(),
        // Only after a model load, which this server does not make.
        JobError::NoModel(why) => ApiError::no_model(&why),
        JobError::Invalid(message) => ApiError::unprocessable(message),
        JobError::Backend(message) => {
            redraft_runtime::stderr_line(format_args!(
                "redraft serve: a backend request failed: {message}"
            ));
            ApiError::backend(&message)
        }
        JobError::Failed(message) => {
            redraft_runtime::stderr_line(format_args!("redraft serve: a job failed: {message}"));
            ApiError::internal(format!("the model failed on this request: {message}"))
        }
    }
    .in_dialect(dialect)
}

/// Submits `work` and waits for its answer. Dropping this future (the client disconnected)
/// cancels the job.
pub async fn answer(app: &App, work: Work, dialect: Dialect) -> Result<Answer, ApiError> {
    let mut ticket = submit(app, work, false, dialect)?;
    ticket.answer().await.map_err(|e| job_error(e, dialect))
}

/// A draft's event, if drafts are shown.
pub type DraftEvent = Box<dyn FnMut(&Draft) -> Option<String> + Send>;
/// The answer's events (or the error's), in order.
pub type AnswerEvents = Box<dyn FnOnce(Result<Answer, ApiError>) -> Vec<String> + Send>;

/// How a stream writes its events.
pub struct StreamFormat {
    pub content_type: &'static str,
    pub draft: DraftEvent,
    pub answer: AnswerEvents,
}

/// How a streamed response ended, for the request metrics: its head said 200 before the answer
/// was known, so a stream whose last event is an error carries that error's status here (a
/// response extension the metrics read when the body ends).
#[derive(Debug, Clone, Default)]
pub struct StreamStatus(Arc<AtomicU16>);

impl StreamStatus {
    /// The status of the error the stream ended with; `None` while it has sent none.
    pub fn error(&self) -> Option<u16> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            status => Some(status),
        }
    }

    fn ended_with(&self, error: &ApiError) {
        self.0.store(error.status.as_u16(), Ordering::Relaxed);
    }
}

/// A streamed response for `ticket`: drafts as they come, then the answer's events; an SSE
/// stream sends [`SSE_KEEP_ALIVE`] through every silence of [`KEEP_ALIVE_INTERVAL`]. When the
/// client goes away the body is dropped, which drops the ticket and cancels the job.
pub fn stream(app: &Shared, ticket: Ticket, format: StreamFormat, dialect: Dialect) -> Response {
    let (tx, mut rx) = mpsc::channel::<Bytes>(64);
    let content_type = format.content_type;
    let status = StreamStatus::default();
    tokio::spawn(pump(
        Arc::clone(app),
        ticket,
        format,
        tx,
        dialect,
        status.clone(),
    ));
    let body = Body::from_stream(futures::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|item| item.map(Ok::<_, Infallible>))
    }));
    let mut response = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response();
    response.extensions_mut().insert(status);
    response
}

async fn pump(
    app: Shared,
    mut ticket: Ticket,
    mut format: StreamFormat,
    tx: mpsc::Sender<Bytes>,
    dialect: Dialect,
    status: StreamStatus,
) {
    let mut drafts = ticket.drafts.take();
    let mut keep_alive = keep_alive(format.content_type).map(|comment| {
        let start = tokio::time::Instant::now() + KEEP_ALIVE_INTERVAL;
        let mut interval = tokio::time::interval_at(start, KEEP_ALIVE_INTERVAL);
        // One comment after a stall (a client slow to read), not one per interval missed.
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        (comment, interval)
    });
    loop {
        tokio::select! {
            biased;
            () = tx.closed() => return,
            Some(draft) = next_draft(&mut drafts) => {
                if let Some(event) = (format.draft)(&draft) {
                    app.metrics.stream_drafts.inc();
                    if tx.send(Bytes::from(event)).await.is_err() {
                        return;
                    }
                    // The comment fills silences only.
                    if let Some((_, interval)) = keep_alive.as_mut() {
                        interval.reset();
                    }
                }
            }
            result = ticket.answer() => {
                // Drafts sent before the answer go first.
                let mut pending: VecDeque<Draft> = VecDeque::new();
                if let Some(rx) = drafts.as_mut() {
                    while let Ok(draft) = rx.try_recv() {
                        pending.push_back(draft);
                    }
                }
                for draft in pending {
                    if let Some(event) = (format.draft)(&draft) {
                        app.metrics.stream_drafts.inc();
                        if tx.send(Bytes::from(event)).await.is_err() {
                            return;
                        }
                    }
                }
                let result = result.map_err(|e| job_error(e, dialect));
                if let Err(error) = &result {
                    status.ended_with(error);
                }
                let events = (format.answer)(result);
                for event in events {
                    if tx.send(Bytes::from(event)).await.is_err() {
                        return;
                    }
                }
                return;
            }
            comment = next_keep_alive(&mut keep_alive) => {
                if tx.send(Bytes::from_static(comment.as_bytes())).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The comment a stream of `content_type` sends through a silence, if its format has one:
/// server-sent events do (a line starting with `:`, which the SSE spec and every client parser
/// skip); NDJSON does not (every line is an object the client parses).
fn keep_alive(content_type: &str) -> Option<&'static str> {
    (content_type == SSE).then_some(SSE_KEEP_ALIVE)
}

async fn next_keep_alive(
    keep_alive: &mut Option<(&'static str, tokio::time::Interval)>,
) -> &'static str {
    match keep_alive {
        Some((comment, interval)) => {
            interval.tick().await;
            comment
        }
        None => std::future::pending().await,
    }
}

async fn next_draft(drafts: &mut Option<mpsc::UnboundedReceiver<Draft>>) -> Option<Draft> {
    match drafts {
        Some(rx) => match rx.recv().await {
            Some(draft) => Some(draft),
            None => {
                *drafts = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

/// `data: {json}\n\n`.
pub fn sse(value: &serde_json::Value) -> String {
    format!("data: {value}\n\n")
}

pub const SSE_DONE: &str = "data: [DONE]\n\n";
/// What an SSE stream sends after [`KEEP_ALIVE_INTERVAL`] with nothing else to send (a job
/// waiting in the queue or decoding without drafts), so a client's read timeout or a proxy's
/// idle timeout does not end it before its answer. Not `: ping`: Continue's SSE parser
/// (`packages/fetch/src/stream.ts` in continuedev/continue) stops reading the lines at hand at a
/// line starting with `: ping`, and skips any other comment.
pub const SSE_KEEP_ALIVE: &str = ": keep-alive\n\n";
/// How long an SSE stream stays silent before [`SSE_KEEP_ALIVE`].
pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(3);
pub const SSE: &str = "text/event-stream";
pub const NDJSON: &str = "application/x-ndjson";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What clients send by default for a feature they do not use asks for nothing; anything
    /// else asks for something (a level, a schema, a count).
    #[test]
    fn defaults_ask_for_nothing() {
        assert!(asks_for_nothing(None));
        for nothing in [
            json!(null),
            json!(false),
            json!(0),
            json!(0.0),
            json!(""),
            json!([]),
        ] {
            assert!(asks_for_nothing(Some(&nothing)), "{nothing}");
        }
        for something in [
            json!(true),
            json!(1),
            json!(-1),
            json!("json"),
            json!("high"),
            json!({}),
            json!({"type": "object"}),
            json!(["image"]),
        ] {
            assert!(!asks_for_nothing(Some(&something)), "{something}");
        }
    }

    /// Server-sent events have a comment line to fill a silence with; NDJSON has none (each line
    /// is an object its clients parse).
    #[test]
    fn only_sse_streams_keep_alive() {
        assert_eq!(keep_alive(SSE), Some(": keep-alive\n\n"));
        assert_eq!(keep_alive(NDJSON), None);
    }
}
