//! Ollama's API (<https://github.com/ollama/ollama/blob/main/docs/api.md>), as Zed's `ollama`
//! provider calls it (`crates/edit_prediction/src/ollama.rs` in zed-industries/zed): `POST
//! /api/generate` (a `raw` prompt with FIM tokens, or `prompt` + `suffix`; `options.num_predict`,
//! `options.stop`, `options.temperature`; `stream` true by default, as in Ollama: NDJSON lines
//! ending with one that has `done: true`), `GET /api/tags` (Zed's model picker keeps the names
//! it can infer a prompt format from), `POST /api/show` (Zed asks it of each listed name), `GET
//! /api/ps` (what is loaded) and `GET /api/version`. An empty prompt only loads (or, `keep_alive` 0, unloads) the model, as
//! in Ollama. Zed reads `created_at` (its
//! prediction id) and `response`. Errors are Ollama's `{"error": "message"}`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::edit_prompt::{self, Layout};
use super::error::{quote, ApiError, Dialect};
use super::openai::choices;
use super::requests::{
    answer, asks_for_nothing, edit_work, fim_work, parse_body, refuse_logprobs, stop_list, stream,
    submit, unsupported, Sampling, StopField, StreamFormat, NDJSON,
};
use super::Shared;
use redraft_runtime::scheduler::Answer;

/// The Ollama API version this server speaks (clients check it is recent enough).
pub const OLLAMA_VERSION: &str = "0.12.0";

#[derive(Debug, Default, Deserialize)]
pub struct Options {
    #[serde(default)]
    pub num_predict: Option<i64>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub stop: Option<StopField>,
    #[serde(default, deserialize_with = "crate::requests::optional_seed")]
    pub seed: Option<u64>,
}

/// The fields read from a generate request; the rest (`system`, `template`, `context`, ...)
/// are accepted and ignored. `format`, `think`, `logprobs`, `top_logprobs` and `images` are read
/// only to refuse what they ask for ([`GenerateRequest::refuse_unsupported`]).
#[derive(Debug, Deserialize)]
pub struct GenerateRequest {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub suffix: Option<String>,
    /// Raw prompts carry their own FIM tokens; templates are not applied either way.
    #[serde(default)]
    pub raw: Option<bool>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default, deserialize_with = "crate::requests::optional_object")]
    pub options: Option<Options>,
    #[serde(default)]
    pub effort: Option<String>,
    /// How long to keep the model loaded: read only to answer an unload (0) as Ollama does.
    #[serde(default)]
    pub keep_alive: Option<Value>,
    /// `"json"` or a JSON schema the answer must follow.
    #[serde(default)]
    pub format: Option<Value>,
    /// `true`, or a level (`"high"`) for the models that take one.
    #[serde(default)]
    pub think: Option<Value>,
    #[serde(default)]
    pub logprobs: Option<Value>,
    #[serde(default)]
    pub top_logprobs: Option<Value>,
    #[serde(default)]
    pub images: Option<Value>,
}

impl GenerateRequest {
    /// A 400 naming the first field that asks for what this server does not do, as Ollama
    /// refuses a model's missing capability rather than answering without it; the values
    /// clients send by default (absent, `null`, `false`, `0`, `""`, `[]`) pass.
    fn refuse_unsupported(&self, model: &str) -> Result<(), ApiError> {
        if !asks_for_nothing(self.format.as_ref()) {
            return Err(unsupported(
                "format",
                "this server cannot hold a completion to JSON or a schema (it fills in code); leave format out or empty",
            ));
        }
        if !asks_for_nothing(self.think.as_ref()) {
            // Ollama's own words for a model without thinking, which clients look for to retry
            // without `think`.
            return Err(ApiError::invalid(
                "think",
                format!(
                    "\"{}\" does not support thinking: leave think out or false",
                    quote(model)
                ),
            ));
        }
        refuse_logprobs(self.logprobs.as_ref(), self.top_logprobs.as_ref())?;
        if !asks_for_nothing(self.images.as_ref()) {
            return Err(unsupported(
                "images",
                "the model reads text only; leave images out or empty",
            ));
        }
        Ok(())
    }
}

/// Whether `keep_alive` asks for the model to be unloaded now: 0 seconds, as a number or a
/// duration string (`"0"`, `"0s"`, `"0m"`).
fn unloads(keep_alive: Option<&Value>) -> bool {
    match keep_alive {
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => {
            let number = s.trim().trim_end_matches(|c: char| c.is_ascii_alphabetic());
            !number.is_empty() && number.parse::<f64>() == Ok(0.0)
        }
        _ => false,
    }
}

/// RFC 3339 in UTC with nanoseconds, as Ollama writes `created_at`.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil-from-days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_nanos()
    )
}

fn done_line(
    model: &str,
    created_at: &str,
    response: &str,
    answer: &Answer,
    reason: &str,
    started: Instant,
) -> Value {
    let (prompt, completion) = match answer {
        Answer::Fim(a) => (a.prompt_tokens, a.completion_tokens),
        Answer::Edit(a) => (a.prompt_tokens, a.completion_tokens),
    };
    let total = started.elapsed().as_nanos() as u64;
    json!({
        "model": model,
        "created_at": created_at,
        "response": response,
        "done": true,
        "done_reason": reason,
        "context": [],
        "total_duration": total,
        "load_duration": 0,
        "prompt_eval_count": prompt,
        "prompt_eval_duration": 0,
        "eval_count": completion,
        "eval_duration": total,
    })
}

fn line(value: &Value) -> String {
    format!("{value}\n")
}

/// `POST /api/generate`.
pub async fn generate(
    State(app): State<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let d = Dialect::Ollama;
    let request: GenerateRequest = parse_body(&app, body, d)?;
    app.check_model(request.model.as_deref())
        .map_err(|e| e.in_dialect(d))?;
    let model = app.answer_model(request.model.as_deref());
    request
        .refuse_unsupported(&model)
        .map_err(|e| e.in_dialect(d))?;
    // An empty prompt is Ollama's "load the model" (or, with `keep_alive` 0, "unload it"):
    // answered at once, nothing generated. This server's one model stays loaded either way. A
    // suffix alone is a fill at the start of a file, as on the other routes.
    let empty = |text: &Option<String>| text.as_deref().is_none_or(str::is_empty);
    if empty(&request.prompt) && empty(&request.suffix) {
        let reason = if unloads(request.keep_alive.as_ref()) {
            "unload"
        } else {
            "load"
        };
        return Ok(Json(json!({
            "model": model,
            "created_at": rfc3339(SystemTime::now()),
            "response": "",
            "done": true,
            "done_reason": reason,
        }))
        .into_response());
    }
    let options = request.options.unwrap_or_default();
    let sampling = Sampling {
        max_tokens: options.num_predict,
        temperature: options.temperature,
        seed: options.seed,
        n: None,
        effort: request.effort.clone(),
        stop: stop_list(options.stop),
        max_tokens_param: "options.num_predict",
    };
    let prompt = request.prompt.unwrap_or_default();
    let _ = request.raw;
    let (work, layout) = match edit_prompt::zed(&prompt) {
        Some(edit) if request.suffix.is_none() => {
            let layout = edit.layout;
            (edit_work(&app, edit, &sampling), Some(layout))
        }
        _ => (
            fim_work(&app, &prompt, request.suffix.as_deref(), &sampling),
            None,
        ),
    };
    let work = work.map_err(|e| e.in_dialect(d))?;
    let created_at = rfc3339(SystemTime::now());
    let first = move |answer: &Answer, layout: Option<Layout>| {
        choices(answer, layout)
            .into_iter()
            .next()
            .unwrap_or_default()
    };
    if request.stream.unwrap_or(true) {
        let ticket = submit(&app, work, false, d)?;
        let format = StreamFormat {
            content_type: NDJSON,
            draft: Box::new(|_| None),
            answer: Box::new(move |result| match result {
                Ok(answer) => {
                    let (text, reason) = first(&answer, layout);
                    let mut lines = Vec::new();
                    if !text.is_empty() {
                        lines.push(line(&json!({
                            "model": model,
                            "created_at": created_at,
                            "response": text,
                            "done": false,
                        })));
                    }
                    lines.push(line(&done_line(
                        &model,
                        &rfc3339(SystemTime::now()),
                        "",
                        &answer,
                        reason,
                        started,
                    )));
                    lines
                }
                Err(err) => vec![line(&err.in_dialect(Dialect::Ollama).body())],
            }),
        };
        return Ok(stream(&app, ticket, format, d));
    }
    let answer = answer(&app, work, d).await?;
    let (text, reason) = first(&answer, layout);
    Ok(Json(done_line(
        &model,
        &created_at,
        &text,
        &answer,
        reason,
        started,
    ))
    .into_response())
}

/// A stable 64-hex-digit digest of `name` (clients show it; nothing checks it).
fn digest(name: &str) -> String {
    let mut out = String::with_capacity(64);
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for round in 0..4u8 {
        for byte in name.bytes().chain([round]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        out.push_str(&format!("{hash:016x}"));
    }
    out
}

/// The `details` Ollama gives a model, in `/api/tags` and `/api/show`: what the local model's
/// files are, read at load. Without a local model (a server only forwarding to a backend) every
/// field is empty: nothing here knows the backend's weights.
fn details(app: &Shared) -> Value {
    let Some(model) = &app.model.details else {
        return json!({
            "parent_model": "",
            "format": "",
            "family": "",
            "families": [],
            "parameter_size": "",
            "quantization_level": "",
        });
    };
    json!({
        "parent_model": "",
        "format": model.format,
        "family": model.family,
        "families": [model.family],
        "parameter_size": model.parameter_size(),
        "quantization_level": model.quantization.as_deref().unwrap_or(""),
    })
}

fn modified_at(app: &Shared) -> String {
    rfc3339(UNIX_EPOCH + Duration::from_secs(app.model.created))
}

/// `GET /api/tags`: the served model under each of its names.
pub async fn tags(State(app): State<Shared>) -> Json<Value> {
    let (modified, details) = (modified_at(&app), details(&app));
    let models: Vec<Value> = app
        .model
        .names
        .iter()
        .map(|name| {
            json!({
                "name": name,
                "model": name,
                "modified_at": modified,
                "size": app.model.details.as_ref().map_or(0, |d| d.size),
                "digest": digest(name),
                "details": details,
            })
        })
        .collect();
    Json(json!({ "models": models }))
}

/// How long Ollama says a model that never unloads (`keep_alive` below 0) stays loaded: its
/// longest duration, so `expires_at` is some 292 years ahead, as Ollama writes it.
const NEVER_UNLOADED: Duration = Duration::from_nanos(i64::MAX as u64);

/// `GET /api/ps`: what is loaded now. The local model is loaded for the server's whole life:
/// listed once, under its id (its other names are the same weights), with the `size`, `digest`
/// and `details` `/api/tags` gives that name; `size_vram` is all of it on a GPU, 0 on the CPU.
/// A server without a local model (one that forwards to a backend) has nothing loaded: an
/// empty list.
pub async fn ps(State(app): State<Shared>) -> Json<Value> {
    let Some(model) = &app.model.details else {
        return Json(json!({ "models": [] }));
    };
    let name = app.model.id();
    let expires = SystemTime::now()
        .checked_add(NEVER_UNLOADED)
        .unwrap_or_else(SystemTime::now);
    Json(json!({ "models": [{
        "name": name,
        "model": name,
        "size": model.size,
        "digest": digest(name),
        "details": details(&app),
        "expires_at": rfc3339(expires),
        "size_vram": if app.model.on_accelerator { model.size } else { 0 },
        "context_length": model.context_length,
    }] }))
}

/// A `/api/show` request: `model`, or `name` as older clients send it.
#[derive(Debug, Deserialize)]
pub struct ShowRequest {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
}

/// `POST /api/show`: what Ollama says of a model. Clients ask it before using one: Zed's Ollama
/// provider asks it of every `/api/tags` name and reads `capabilities` (`completion`; `insert`
/// is Ollama's word for taking a `suffix`).
pub async fn show(
    State(app): State<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let d = Dialect::Ollama;
    let request: ShowRequest = parse_body(&app, body, d)?;
    let Some(name) = request
        .model
        .or(request.name)
        .filter(|n| !n.trim().is_empty())
    else {
        return Err(ApiError::invalid("model", "name the model to show").in_dialect(d));
    };
    if !app.model.names.iter().any(|n| *n == name.trim()) {
        return Err(ApiError::model_not_found(&name, &app.model.names).in_dialect(d));
    }
    // Without a loaded model (a server that only forwards to a backend) nothing is claimed.
    let model_info = match &app.model.details {
        Some(model) => json!({
            "general.architecture": model.family,
            "general.parameter_count": model.parameters,
            format!("{}.context_length", model.family): model.context_length,
        }),
        None => json!({}),
    };
    Ok(Json(json!({
        "modelfile": "",
        "parameters": "",
        "template": "",
        "details": details(&app),
        "model_info": model_info,
        "capabilities": ["completion", "insert"],
        "modified_at": modified_at(&app),
    })))
}

/// `GET /api/version`.
pub async fn version() -> Json<Value> {
    Json(json!({ "version": OLLAMA_VERSION }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn created_at_is_rfc3339_utc() {
        let t = UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 123_456_789);
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20.123456789Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
        let leap = UNIX_EPOCH + std::time::Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000000000Z");
    }

    #[test]
    fn digests_are_stable_and_distinct() {
        assert_eq!(digest("a").len(), 64);
        assert_eq!(digest("a"), digest("a"));
        assert_ne!(digest("a"), digest("b"));
    }

    #[test]
    fn a_keep_alive_of_zero_unloads() {
        for zero in [json!(0), json!(0.0), json!("0"), json!("0s"), json!(" 0m ")] {
            assert!(unloads(Some(&zero)), "{zero}");
        }
        for other in [
            json!(-1),
            json!(300),
            json!("5m"),
            json!("s"),
            json!(""),
            json!(null),
        ] {
            assert!(!unloads(Some(&other)), "{other}");
        }
        assert!(!unloads(None));
    }

    /// A server as `redraft serve FLAGS` starts one (nothing bound), with its inference thread.
    struct Started {
        app: Shared,
        inference: Option<std::thread::JoinHandle<()>>,
    }

    impl Started {
        fn with(flags: &[&str]) -> Started {
            #[derive(clap::Parser)]
            struct Serve {
                #[command(flatten)]
                args: crate::Args,
            }
            let argv = ["serve", "--device", "cpu"].iter().chain(flags);
            let serve = <Serve as clap::Parser>::try_parse_from(argv).unwrap();
            let bind = serve.args.address().unwrap();
            let (app, inference) = crate::start(serve.args, bind).unwrap();
            Started {
                app,
                inference: Some(inference),
            }
        }

        async fn tags(&self) -> Value {
            tags(State(Arc::clone(&self.app))).await.0
        }

        async fn show(&self, name: &str) -> Value {
            let body = Bytes::from(json!({ "model": name }).to_string());
            let shown = show(State(Arc::clone(&self.app)), Ok(body)).await;
            shown.unwrap_or_else(|e| panic!("{}", e.body())).0
        }
    }

    impl Drop for Started {
        fn drop(&mut self) {
            self.app.scheduler.close();
            if let Some(inference) = self.inference.take() {
                let _ = inference.join();
            }
        }
    }

    /// `/api/tags` lists every name with the one `details`, and `/api/show` of each says the same.
    async fn listed_details(server: &Started) -> (Value, Value) {
        let tags = server.tags().await;
        let models = tags["models"].as_array().unwrap();
        assert_eq!(models.len(), server.app.model.names.len(), "{tags}");
        for model in models {
            assert_eq!(model["details"], models[0]["details"], "{tags}");
            assert_eq!(model["size"], models[0]["size"], "{tags}");
            let shown = server.show(model["name"].as_str().unwrap()).await;
            assert_eq!(shown["details"], model["details"], "{shown}");
        }
        let first = server.show(server.app.model.id()).await;
        (models[0].clone(), first["model_info"].clone())
    }

    fn small_model() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model")
    }

    /// The embedded default says what it was compiled from: scripts/ship-model writes a Q8_0
    /// GGUF; the CPU-trained default shipped now is f16 safetensors.
    #[tokio::test]
    async fn the_embedded_default_is_described_as_built() {
        let server = Started::with(&[]);
        let (listed, _) = listed_details(&server).await;
        let files = &redraft_runtime::default_model::FILES;
        let quantization = if files.format() == "gguf" {
            "Q8_0"
        } else {
            "F16"
        };
        let details = &listed["details"];
        assert_eq!(details["format"], files.format(), "{listed}");
        assert_eq!(details["quantization_level"], quantization, "{listed}");
        assert_eq!(details["family"], "qwen2", "{listed}");
        assert_eq!(details["families"], json!(["qwen2"]), "{listed}");
        assert_eq!(listed["size"], files.size() as u64, "{listed}");
    }

    /// A safetensors directory: f16 weights, 1,968,192 parameters (Ollama's `1.97M`), and the
    /// bytes of the files loaded (its README is no part of the model).
    #[tokio::test]
    async fn a_safetensors_model_is_described_from_its_files() {
        let dir = small_model();
        let server = Started::with(&["--model", dir.to_str().unwrap()]);
        let (listed, info) = listed_details(&server).await;
        assert_eq!(listed["name"], "small-model");
        assert_eq!(
            listed["details"],
            json!({
                "parent_model": "",
                "format": "safetensors",
                "family": "qwen2",
                "families": ["qwen2"],
                "parameter_size": "1.97M",
                "quantization_level": "F16",
            })
        );
        let bytes: u64 = [
            "model.safetensors",
            "config.json",
            "redraft.json",
            "tokenizer.json",
        ]
        .iter()
        .map(|f| std::fs::metadata(dir.join(f)).unwrap().len())
        .sum();
        assert_eq!(listed["size"], bytes);
        assert_eq!(
            info,
            json!({
                "general.architecture": "qwen2",
                "general.parameter_count": 1_968_192,
                "qwen2.context_length": 256,
            })
        );
    }

    /// Without a local model, a server forwarding FIM requests to a backend knows nothing of the
    /// backend's weights: it says nothing rather than a format, a size or a quantization.
    #[tokio::test]
    async fn without_a_local_model_nothing_is_claimed() {
        let server = Started::with(&[
            "--model",
            "/nonexistent/model-dir",
            "--backend",
            "http://127.0.0.1:9/v1",
        ]);
        assert!(server.app.model.details.is_none());
        let (listed, info) = listed_details(&server).await;
        assert_eq!(
            listed["details"],
            json!({
                "parent_model": "",
                "format": "",
                "family": "",
                "families": [],
                "parameter_size": "",
                "quantization_level": "",
            })
        );
        assert_eq!(listed["size"], 0);
        assert_eq!(info, json!({}));
        // Nothing is loaded: `/api/ps` lists nothing.
        assert_eq!(
            ps(State(Arc::clone(&server.app))).await.0,
            json!({"models": []})
        );
    }
}
