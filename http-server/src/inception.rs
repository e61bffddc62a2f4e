//! Inception's Mercury API shapes (its OpenAPI description,
//! <https://api.inceptionlabs.ai/openapi.json>, and its next-edit docs,
//! <https://docs.inceptionlabs.ai/capabilities/next-edit>): `POST /v1/fim/completions`
//! (`prompt`, `suffix`, `max_tokens`, `stop`, `stream`; `usage` with Inception's extra counts)
//! and `POST /v1/edit/completions` (one user message holding the tagged next-edit prompt; the
//! answer is the rewritten `code_to_edit` region without tags, `object: "edit.completion"`).
//!
//! `diffusing: true` with `stream: true` shows the diffusion: every denoising step's full draft
//! is an event that replaces the previous one (`diffusion_meta.diffusion_content: true`, with
//! `diffusion_progress` the share of slots committed), then the final answer
//! (`diffusion_content: false`) and `[DONE]`. Drafts are the model's raw middle: `░` (U+2591)
//! for a slot still masked, before post-processing and stop strings.

use std::fmt;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::value::SeqAccessDeserializer;
use serde::de::{SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Value};

use super::edit_prompt;
use super::error::{quote, ApiError, Dialect};
use super::openai::{choices, CompletionRequest};
use super::requests::{
    answer, completion_id, edit_work, fim_work, objects, parse_body, sse, stream, submit, unix_now,
    PromptField, Sampling, StreamFormat, SSE, SSE_DONE,
};
use super::Shared;
use redraft_runtime::scheduler::{Answer, Draft};

fn inception_usage(answer: &Answer) -> Value {
    let (prompt, completion) = match answer {
        Answer::Fim(a) => (a.prompt_tokens, a.completion_tokens),
        Answer::Edit(a) => (a.prompt_tokens, a.completion_tokens),
    };
    json!({
        "prompt_tokens": prompt,
        "reasoning_tokens": 0,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "cached_input_tokens": 0,
    })
}

fn progress(draft: &Draft) -> f64 {
    1.0 - draft.masked as f64 / draft.slots.max(1) as f64
}

/// `POST /v1/fim/completions`.
pub async fn fim(
    State(app): State<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: CompletionRequest = parse_body(&app, body, Dialect::OpenAi)?;
    app.check_model(request.model.as_deref())?;
    request.refuse_unsupported()?;
    let Some(prompt) = request.prompt.clone() else {
        return Err(ApiError::invalid("prompt", "prompt is required"));
    };
    let prompt = PromptField::text(prompt)?;
    let work = fim_work(
        &app,
        &prompt,
        request.suffix.as_deref(),
        &request.sampling(),
    )?;
    let model = app.answer_model(request.model.as_deref());
    let (id, created) = (completion_id(), unix_now());
    let object = move |choices: Value, extra: Option<(&str, Value)>| {
        let mut value = json!({
            "id": id,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": choices,
        });
        if let Some((key, extra)) = extra {
            value[key] = extra;
        }
        value
    };
    if request.stream == Some(true) {
        let diffusing = request.diffusing == Some(true);
        let include_usage = request.include_usage();
        let ticket = submit(&app, work, diffusing, Dialect::OpenAi)?;
        let draft_object = object.clone();
        let format = StreamFormat {
            content_type: SSE,
            draft: Box::new(move |draft| {
                Some(sse(&draft_object(
                    json!([{"index": 0, "text": draft.text, "finish_reason": null}]),
                    Some((
                        "diffusion_meta",
                        json!({"diffusion_content": true, "diffusion_progress": progress(draft)}),
                    )),
                )))
            }),
            answer: Box::new(move |result| {
                let answer = match result {
                    Ok(answer) => answer,
                    Err(err) => return vec![sse(&err.body()), SSE_DONE.to_string()],
                };
                let mut events: Vec<String> = choices(&answer, None)
                    .iter()
                    .enumerate()
                    .map(|(index, (text, reason))| {
                        let choice =
                            json!([{"index": index, "text": text, "finish_reason": reason}]);
                        let meta = diffusing.then(|| {
                            (
                                "diffusion_meta",
                                json!({"diffusion_content": false, "diffusion_progress": 1.0}),
                            )
                        });
                        sse(&object(choice, meta))
                    })
                    .collect();
                if include_usage {
                    events.push(sse(&object(
                        json!([]),
                        Some(("usage", inception_usage(&answer))),
                    )));
                }
                events.push(SSE_DONE.to_string());
                events
            }),
        };
        return Ok(stream(&app, ticket, format, Dialect::OpenAi));
    }
    let answer = answer(&app, work, Dialect::OpenAi).await?;
    let choices: Vec<Value> = choices(&answer, None)
        .iter()
        .enumerate()
        .map(|(index, (text, reason))| json!({"index": index, "text": text, "finish_reason": reason}))
        .collect();
    Ok(Json(object(
        Value::Array(choices),
        Some(("usage", inception_usage(&answer))),
    ))
    .into_response())
}

/// A chat message's content: a string, or a list of `{type: "text", text}` parts.
#[derive(Debug)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// Read by hand rather than as an untagged enum, whose one error ("did not match any variant")
/// would hide the parts' own: a part that is no object, a key sent twice in one.
impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Content, D::Error> {
        struct Either;

        impl<'de> Visitor<'de> for Either {
            type Value = Content;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a string or a list of text parts")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Content, E> {
                Ok(Content::Text(text.to_string()))
            }

            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Content, E> {
                Ok(Content::Text(text))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, parts: A) -> Result<Content, A::Error> {
                objects(SeqAccessDeserializer::new(parts)).map(Content::Parts)
            }
        }

        deserializer.deserialize_any(Either)
    }
}

#[derive(Debug, Deserialize)]
pub struct Part {
    #[serde(default)]
    pub text: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: Content,
}

#[derive(Debug, Deserialize)]
pub struct EditRequest {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(deserialize_with = "crate::requests::objects")]
    pub messages: Vec<Message>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub diffusing: Option<bool>,
    #[serde(default)]
    pub effort: Option<String>,
    #[serde(default)]
    pub reasoning_effort: Option<String>,
}

/// `POST /v1/edit/completions`.
pub async fn edit(
    State(app): State<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: EditRequest = parse_body(&app, body, Dialect::OpenAi)?;
    app.check_model(request.model.as_deref())?;
    let [message] = request.messages.as_slice() else {
        return Err(ApiError::invalid(
            "messages",
            format!(
                "messages must be exactly one user message holding the edit prompt, not {}",
                request.messages.len()
            ),
        ));
    };
    if message.role != "user" {
        return Err(ApiError::invalid(
            "messages",
            format!(
                "the message must be the user's, not the {}'s",
                quote(&message.role)
            ),
        ));
    }
    let content = match &message.content {
        Content::Text(text) => text.clone(),
        Content::Parts(parts) => parts.iter().filter_map(|p| p.text.as_deref()).collect(),
    };
    let prompt = edit_prompt::mercury(&content).map_err(ApiError::unprocessable)?;
    let sampling = Sampling {
        max_tokens: None,
        temperature: request.temperature,
        seed: None,
        n: None,
        effort: request
            .effort
            .clone()
            .or_else(|| request.reasoning_effort.clone()),
        stop: Vec::new(),
        max_tokens_param: "max_tokens",
    };
    let work = edit_work(&app, prompt, &sampling)?;
    let model = app.answer_model(request.model.as_deref());
    let (id, created) = (completion_id(), unix_now());
    if request.stream == Some(true) {
        let diffusing = request.diffusing == Some(true);
        let ticket = submit(&app, work, diffusing, Dialect::OpenAi)?;
        let chunk = move |content: &str, reason: Option<&str>, meta: Option<Value>| {
            let mut value = json!({
                "id": id,
                "object": "edit.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{
                    "index": 0,
                    "delta": {"role": "assistant", "content": content},
                    "finish_reason": reason,
                }],
            });
            if let Some(meta) = meta {
                value["diffusion_meta"] = meta;
            }
            value
        };
        let draft_chunk = chunk.clone();
        let format = StreamFormat {
            content_type: SSE,
            draft: Box::new(move |draft| {
                Some(sse(&draft_chunk(
                    &draft.text,
                    None,
                    Some(json!({"diffusion_content": true, "diffusion_progress": progress(draft)})),
                )))
            }),
            answer: Box::new(move |result| match result {
                Ok(Answer::Edit(edit)) => vec![
                    sse(&chunk(
                        &edit.new_region,
                        Some("stop"),
                        diffusing.then(
                            || json!({"diffusion_content": false, "diffusion_progress": 1.0}),
                        ),
                    )),
                    SSE_DONE.to_string(),
                ],
                Ok(Answer::Fim(_)) => vec![
                    sse(&ApiError::internal("a next edit answered as FIM").body()),
                    SSE_DONE.to_string(),
                ],
                Err(err) => vec![sse(&err.body()), SSE_DONE.to_string()],
            }),
        };
        return Ok(stream(&app, ticket, format, Dialect::OpenAi));
    }
    let answer = answer(&app, work, Dialect::OpenAi).await?;
    let Answer::Edit(edit) = &answer else {
        return Err(ApiError::internal("a next edit answered as FIM"));
    };
    Ok(Json(json!({
        "id": id,
        "object": "edit.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": edit.new_region},
            "finish_reason": "stop",
        }],
        "usage": inception_usage(&answer),
    }))
    .into_response())
}
