//! OpenAI's legacy completions API, as Zed's `open_ai_compatible_api` provider and other FIM
//! clients call it (`crates/edit_prediction/src/open_ai_compatible.rs` in zed-industries/zed;
//! the request fields of openai-python's `completion_create_params.py`): `POST /v1/completions`
//! and `GET /v1/models` (`/v1/models/{name}` for one).
//!
//! A prompt in one of Zed's next-edit layouts (Sweep, Zeta 2) is a next-edit request and is
//! answered in that layout; any other prompt is FIM, split out of its template when it carries
//! one, or the prefix before an optional `suffix`. The response has every field Zed's parser
//! requires (`id`, `object`, `created`, `model`, `choices[].text`, `usage`).

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::edit_prompt::{self, Layout};
use super::error::{ApiError, Dialect};
use super::requests::{
    answer, completion_id, edit_work, fim_work, parse_body, refuse_logprobs, sse, stop_list,
    stream, submit, unix_now, unsupported, PromptField, Sampling, StopField, StreamFormat, SSE,
    SSE_DONE,
};
use super::Shared;
use redraft_runtime::scheduler::{Answer, FinishReason};

#[derive(Debug, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// The fields read from a completions request; the rest (`top_p`, penalties, `user`, ...) are
/// accepted and ignored. `echo`, `logprobs`, `top_logprobs` and `best_of` are read only to refuse
/// what they ask for ([`CompletionRequest::refuse_unsupported`]).
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub prompt: Option<PromptField>,
    #[serde(default)]
    pub suffix: Option<String>,
    #[serde(default)]
    pub max_tokens: Option<i64>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default, deserialize_with = "crate::requests::optional_seed")]
    pub seed: Option<u64>,
    #[serde(default)]
    pub n: Option<i64>,
    #[serde(default)]
    pub stop: Option<StopField>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default, deserialize_with = "crate::requests::optional_object")]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub echo: Option<bool>,
    /// OpenAI's completions take an integer (0-5), chat-style clients send `true`.
    #[serde(default)]
    pub logprobs: Option<Value>,
    #[serde(default)]
    pub top_logprobs: Option<Value>,
    #[serde(default)]
    pub best_of: Option<i64>,
    /// redraft's decoding preset: `low`, `medium` or `high`.
    #[serde(default)]
    pub effort: Option<String>,
    /// Inception's name for it (`instant` = `low`).
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// Inception's FIM: stream each denoising step's draft (with `stream`).
    #[serde(default)]
    pub diffusing: Option<bool>,
}

impl CompletionRequest {
    pub fn sampling(&self) -> Sampling {
        Sampling {
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            seed: self.seed,
            n: self.n,
            effort: self
                .effort
                .clone()
                .or_else(|| self.reasoning_effort.clone()),
            stop: stop_list(self.stop.clone()),
            max_tokens_param: "max_tokens",
        }
    }

    /// A 400 naming the first field that asks for what this server does not do, rather than an
    /// answer without it. The values clients send by default ask for nothing and pass: absent,
    /// `null`, `false`, `0`, and `best_of` 1 or equal to `n` (one decoding per candidate, as
    /// here). `stream_options` without `stream: true` is refused as OpenAI refuses it.
    pub fn refuse_unsupported(&self) -> Result<(), ApiError> {
        if self.echo == Some(true) {
            return Err(unsupported(
                "echo",
                "the answer is the completion alone, without the prompt; leave echo out or false",
            ));
        }
        refuse_logprobs(self.logprobs.as_ref(), self.top_logprobs.as_ref())?;
        let n = self.n.unwrap_or(1);
        if let Some(best_of) = self.best_of.filter(|&b| b != 1 && b != n) {
            return Err(unsupported(
                "best_of",
                &format!(
                    "each of the n candidates is one decoding, not the best of {best_of}; leave best_of out, or send 1 or n"
                ),
            ));
        }
        if self.stream_options.is_some() && self.stream != Some(true) {
            return Err(ApiError::invalid(
                "stream_options",
                "stream_options is only allowed when stream is true",
            ));
        }
        Ok(())
    }

    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }
}

/// One choice of an answer: text and finish reason. A next edit is one choice in its layout.
pub fn choices(answer: &Answer, layout: Option<Layout>) -> Vec<(String, &'static str)> {
    match answer {
        Answer::Fim(fim) => fim
            .choices
            .iter()
            .map(|c| (c.text.clone(), c.finish_reason.as_str()))
            .collect(),
        Answer::Edit(edit) => vec![(
            layout.unwrap_or(Layout::Mercury).answer(&edit.new_region),
            FinishReason::Stop.as_str(),
        )],
    }
}

pub fn usage(answer: &Answer) -> Value {
    let (prompt, completion) = match answer {
        Answer::Fim(a) => (a.prompt_tokens, a.completion_tokens),
        Answer::Edit(a) => (a.prompt_tokens, a.completion_tokens),
    };
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    })
}

/// A `text_completion` object (a whole answer, or one stream chunk).
pub fn completion_object(
    id: &str,
    created: u64,
    model: &str,
    choices: Vec<Value>,
    usage: Option<Value>,
) -> Value {
    let mut object = json!({
        "id": id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": choices,
    });
    if let Some(usage) = usage {
        object["usage"] = usage;
    }
    object
}

pub fn choice(index: usize, text: &str, finish_reason: Option<&str>) -> Value {
    json!({
        "text": text,
        "index": index,
        "logprobs": null,
        "finish_reason": finish_reason,
    })
}

/// The stream's events for an answer: each choice's text, then its finish reason, the usage
/// (if asked for), `[DONE]`. An error is one `{"error": ...}` event, then `[DONE]`.
pub fn answer_events(
    result: Result<Answer, ApiError>,
    layout: Option<Layout>,
    id: &str,
    created: u64,
    model: &str,
    include_usage: bool,
) -> Vec<String> {
    let answer = match result {
        Ok(answer) => answer,
        Err(err) => return vec![sse(&err.body()), SSE_DONE.to_string()],
    };
    let mut events = Vec::new();
    for (index, (text, reason)) in choices(&answer, layout).iter().enumerate() {
        if !text.is_empty() {
            events.push(sse(&completion_object(
                id,
                created,
                model,
                vec![choice(index, text, None)],
                None,
            )));
        }
        events.push(sse(&completion_object(
            id,
            created,
            model,
            vec![choice(index, "", Some(reason))],
            None,
        )));
    }
    if include_usage {
        events.push(sse(&completion_object(
            id,
            created,
            model,
            Vec::new(),
            Some(usage(&answer)),
        )));
    }
    events.push(SSE_DONE.to_string());
    events
}

/// `POST /v1/completions`.
pub async fn completions(
    State(app): State<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: CompletionRequest = parse_body(&app, body, Dialect::OpenAi)?;
    app.check_model(request.model.as_deref())?;
    request.refuse_unsupported()?;
    let sampling = request.sampling();
    // Required, as in OpenAI's API: a misspelt `promt` answered with a middle for nothing
    // looked like the model working.
    let Some(prompt) = request.prompt.clone() else {
        return Err(ApiError::invalid("prompt", "prompt is required"));
    };
    let prompt = prompt.text()?;
    let (work, layout) = match edit_prompt::zed(&prompt) {
        Some(edit) if request.suffix.is_none() => {
            let layout = edit.layout;
            (edit_work(&app, edit, &sampling)?, Some(layout))
        }
        _ => (
            fim_work(&app, &prompt, request.suffix.as_deref(), &sampling)?,
            None,
        ),
    };
    let model = app.answer_model(request.model.as_deref());
    let (id, created) = (completion_id(), unix_now());
    if request.stream == Some(true) {
        let ticket = submit(&app, work, false, Dialect::OpenAi)?;
        let include_usage = request.include_usage();
        let format = StreamFormat {
            content_type: SSE,
            draft: Box::new(|_| None),
            answer: Box::new(move |result| {
                answer_events(result, layout, &id, created, &model, include_usage)
            }),
        };
        return Ok(stream(&app, ticket, format, Dialect::OpenAi));
    }
    let answer = answer(&app, work, Dialect::OpenAi).await?;
    let choices = choices(&answer, layout)
        .iter()
        .enumerate()
        .map(|(index, (text, reason))| choice(index, text, Some(reason)))
        .collect();
    Ok(Json(completion_object(
        &id,
        created,
        &model,
        choices,
        Some(usage(&answer)),
    ))
    .into_response())
}

/// One listed name: `root` is the served model's id under every name (vLLM's field: the model a
/// name serves), so a client that sees several names can tell they are one model (a `redraft
/// serve --backend` pointed at this server picks the id).
fn model_object(app: &Shared, name: &str) -> Value {
    json!({
        "id": name,
        "object": "model",
        "created": app.model.created,
        "owned_by": "redraft",
        "root": app.model.id(),
    })
}

/// `GET /v1/models` (and Mercury's `/v1/{fim,edit}/completions/models`): the served model and
/// its aliases.
pub async fn models(State(app): State<Shared>) -> Json<Value> {
    let data: Vec<Value> = app
        .model
        .names
        .iter()
        .map(|name| model_object(&app, name))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

/// `GET /v1/models/{name}` (the OpenAI SDKs' `models.retrieve`): one served name, else 404
/// `model_not_found`.
pub async fn model(
    State(app): State<Shared>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path(name) = name.map_err(|e| ApiError::invalid("model", e.body_text()))?;
    if !app.model.names.contains(&name) {
        return Err(ApiError::model_not_found(&name, &app.model.names));
    }
    Ok(Json(model_object(&app, &name)))
}
