//! The server's settings, from `initializationOptions` and `workspace/didChangeConfiguration`.
//!
//! Both carry the same JSON object (camelCase keys), either bare or under a `"redraft"` key (the
//! shape editors use for a settings section; `null` there, as `null` for the whole, sets
//! nothing). A key that is absent keeps its value; a value of the wrong type or range is
//! reported and ignored, so a typo in a settings file never takes the server down or silently
//! resets something else. Next-edit settings sit under `nextEdit` (`true`/`false`, or an object
//! of them), or as dotted keys (`"nextEdit.debounceMs"`); a remote FIM backend under `backend`
//! (a URL, or `{url, model, template, apiKey, contextTokens, timeoutMs}`).

use std::path::PathBuf;
use std::time::Duration;

use redraft_engine::sampler::{Effort, Realign};
use redraft_engine::DeviceSpec;
use serde_json::Value;

use redraft_runtime::backend::{BackendConfig, Template};
use redraft_runtime::scheduler::EditLimits;

use crate::log::Level;

/// Everything a user can set.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Model directory or GGUF file; `None`: the model compiled into the binary.
    pub model: Option<PathBuf>,
    /// Where the model runs (`"auto"`, `"cpu"`, `"cuda"` or `"gpu"`, `"cuda:N"`).
    pub device: DeviceSpec,
    pub effort: Effort,
    /// How a completion's first pass reuses the kept cache across the keystrokes since the last
    /// one (`"editReuse"`: a radius in tokens, or `"off"` for an exact pass); see
    /// [`Realign`].
    pub edit_reuse: Option<Realign>,
    /// Upper bound on the masked canvas (the longest suggestion), in tokens; the syntax around
    /// the cursor usually asks for less.
    pub max_tokens: usize,
    /// Upper bound on the context shown to the model (prefix + suffix + other documents), in
    /// tokens; `None`: whatever the model's positions allow.
    pub context_tokens: Option<usize>,
    /// LSP language ids to complete in; `None`: every language.
    pub languages: Option<Vec<String>>,
    /// Suggestions computed for an explicitly invoked inline completion (one batch, one pass per
    /// step); a completion menu gets one (`completion_items.rs`).
    pub candidates: usize,
    /// An inline completion the model is less sure of is not shown
    /// (`FimOptions::min_confidence`); `None`: the model's own bar.
    pub min_confidence: Option<f32>,
    /// Send `redraft/draftStep` notifications (see the README's protocol extension).
    pub stream_steps: bool,
    /// What the log says (`logLevel`); `Debug` adds each request's canvas choice and timings.
    pub log_level: Level,
    pub next_edit: NextEditSettings,
    /// Fill the middle with a model another process serves (a `redraft serve`, llama-server,
    /// vLLM, Ollama...) instead of the local one; next edits stay local.
    pub backend: Option<BackendConfig>,
    /// Offer the suggestion as `textDocument/completion` items too (`completionItems`);
    /// `None` (`"auto"`): when the client has no inline completions. Read at `initialize`.
    pub completion_items: Option<bool>,
}

/// Next-edit suggestions (`textDocument/copilotInlineEdit`).
#[derive(Debug, Clone, PartialEq)]
pub struct NextEditSettings {
    /// Off: the request answers no edits and nothing is computed.
    pub enabled: bool,
    /// After this long without an edit of a document, its next edit is computed ahead of the
    /// request; 0: only on request and after an accepted suggestion.
    pub debounce_ms: u64,
    /// The editable region's lines above and below the cursor's line, at most.
    pub lines_above: usize,
    pub lines_below: usize,
    /// A rewrite changing more than this share of the region is no suggestion
    /// (`EditBudget::max_changed_fraction`); infinite (`null`): no such guard.
    pub max_change: f64,
    /// A rewrite the model is less sure of is no suggestion (`EditBudget::min_confidence`);
    /// `None` (`null`): the model's own bar.
    pub min_confidence: Option<f32>,
}

impl Default for NextEditSettings {
    fn default() -> NextEditSettings {
        let limits = EditLimits::default();
        NextEditSettings {
            enabled: true,
            debounce_ms: 300,
            lines_above: limits.lines_above,
            lines_below: limits.lines_below,
            max_change: limits.max_changed_fraction,
            min_confidence: limits.min_confidence,
        }
    }
}

impl NextEditSettings {
    /// These lines and guard, for the runtime (the token shares follow the model).
    pub fn limits(&self) -> EditLimits {
        EditLimits {
            lines_above: self.lines_above,
            lines_below: self.lines_below,
            max_changed_fraction: self.max_change,
            min_confidence: self.min_confidence,
        }
    }

    fn set(&mut self, key: &str, value: &Value) -> Result<(), String> {
        let default = NextEditSettings::default();
        match key {
            "enabled" => self.enabled = or_default(value, default.enabled, boolean)?,
            "debounceMs" => {
                self.debounce_ms = or_default(value, default.debounce_ms, |v| {
                    Ok(count(v, 0, MAX_DEBOUNCE_MS)? as u64)
                })?
            }
            "linesAbove" => {
                self.lines_above = or_default(value, default.lines_above, |v| {
                    count(v, 0, MAX_REGION_LINES)
                })?
            }
            "linesBelow" => {
                self.lines_below = or_default(value, default.lines_below, |v| {
                    count(v, 0, MAX_REGION_LINES)
                })?
            }
            "maxChange" => {
                self.max_change = match value {
                    Value::Null => f64::INFINITY,
                    _ => value
                        .as_f64()
                        .filter(|f| f.is_finite() && *f > 0.0)
                        .ok_or_else(|| {
                            format!("expected a number above 0 (a share of the region), or null for no limit, got {value}")
                        })?,
                }
            }
            "minConfidence" => self.min_confidence = bar(value)?,
            _ => return Err("unknown setting".into()),
        }
        Ok(())
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            model: None,
            device: DeviceSpec::Auto,
            effort: Effort::Medium,
            edit_reuse: Some(Realign::DEFAULT),
            max_tokens: redraft_runtime::DEFAULT_MAX_TOKENS,
            context_tokens: None,
            languages: None,
            candidates: 3,
            min_confidence: None,
            stream_steps: false,
            log_level: Level::Info,
            next_edit: NextEditSettings::default(),
            backend: None,
            completion_items: None,
        }
    }
}

/// Bounds that keep one request from asking for a canvas no model has room for.
const MAX_TOKENS_LIMIT: usize = 1024;
const MAX_CANDIDATES: usize = 8;
const MAX_DEBOUNCE_MS: usize = 60_000;
const MAX_REGION_LINES: usize = 200;

impl Settings {
    /// Applies what `value` sets; returns one message per key that was ignored.
    pub fn update(&mut self, value: &Value) -> Vec<String> {
        let mut problems = Vec::new();
        let object = match value {
            Value::Null => return problems,
            Value::Object(object) => match object.get("redraft") {
                Some(Value::Object(inner)) => inner,
                // The section unset (clients send it so, as they do `settings: null`).
                Some(Value::Null) => return problems,
                Some(other) => {
                    problems.push(format!(
                        "settings under `redraft` must be a JSON object, got {other}"
                    ));
                    return problems;
                }
                None => object,
            },
            other => {
                problems.push(format!("settings must be a JSON object, got {other}"));
                return problems;
            }
        };
        let mut set = |key: &str, value: &Value| {
            if let Err(problem) = self.set(key, value) {
                problems.push(format!(
                    "setting `{key}`: {problem} (kept the previous value)"
                ));
            }
        };
        for (key, value) in object {
            match (key.as_str(), value) {
                ("nextEdit" | "backend", Value::Object(inner)) => {
                    // The URL first: the other backend keys refine a backend.
                    let mut keys: Vec<_> = inner.iter().collect();
                    keys.sort_by_key(|(k, _)| k.as_str() != "url");
                    for (inner_key, value) in keys {
                        set(&format!("{key}.{inner_key}"), value);
                    }
                }
                _ => set(key, value),
            }
        }
        problems
    }

    fn set(&mut self, key: &str, value: &Value) -> Result<(), String> {
        let default = Settings::default();
        match key {
            "model" => {
                self.model = match value {
                    Value::Null => None,
                    Value::String(s) if s.is_empty() => None,
                    Value::String(s) => Some(PathBuf::from(s)),
                    _ => {
                        return Err(
                            "expected a model name (hf:ORG/REPO, ollama:NAME), a directory or GGUF file's path, or null".into(),
                        )
                    }
                }
            }
            "device" => {
                self.device = match value {
                    Value::Null => DeviceSpec::Auto,
                    Value::String(s) => s.parse()?,
                    _ => return Err("expected \"auto\", \"cpu\", \"cuda\" or \"cuda:N\"".into()),
                }
            }
            "effort" => {
                self.effort = or_default(value, default.effort, |v| {
                    v.as_str()
                        .ok_or("expected \"low\", \"medium\" or \"high\"")?
                        .parse()
                })?
            }
            "editReuse" => {
                self.edit_reuse = match value {
                    Value::Null => default.edit_reuse,
                    Value::String(s) if s == "off" => None,
                    _ => Some(Realign {
                        radius: count(value, 0, MAX_TOKENS_LIMIT)
                            .map_err(|e| format!("{e} (a radius in tokens), or \"off\""))?,
                        ..Realign::DEFAULT
                    }),
                }
            }
            "maxTokens" => {
                self.max_tokens =
                    or_default(value, default.max_tokens, |v| count(v, 1, MAX_TOKENS_LIMIT))?
            }
            "contextTokens" => {
                self.context_tokens = match value {
                    Value::Null => None,
                    _ => Some(count(value, 1, usize::MAX)?),
                }
            }
            "languages" => {
                self.languages = match value {
                    Value::Null => None,
                    Value::Array(items) => Some(
                        items
                            .iter()
                            .map(|v| v.as_str().map(str::to_string))
                            .collect::<Option<Vec<_>>>()
                            .ok_or("expected a list of language ids")?,
                    ),
                    _ => return Err("expected a list of language ids or null".into()),
                }
            }
            "candidates" => {
                self.candidates =
                    or_default(value, default.candidates, |v| count(v, 1, MAX_CANDIDATES))?
            }
            "minConfidence" => self.min_confidence = bar(value)?,
            "streamSteps" => self.stream_steps = or_default(value, default.stream_steps, boolean)?,
            "completionItems" => {
                self.completion_items = match value {
                    Value::Bool(on) => Some(*on),
                    Value::Null => None,
                    Value::String(s) if s == "auto" => None,
                    _ => return Err("expected true, false or \"auto\"".into()),
                }
            }
            "logLevel" => {
                self.log_level = or_default(value, default.log_level, |v| {
                    v.as_str()
                        .and_then(Level::from_setting)
                        .ok_or_else(|| "expected \"error\", \"warn\", \"info\" or \"debug\"".into())
                })?
            }
            "nextEdit" => {
                self.next_edit.enabled = or_default(value, default.next_edit.enabled, |v| {
                    v.as_bool()
                        .ok_or_else(|| "expected true, false or an object of next-edit settings".into())
                })?
            }
            "backend" | "backend.url" => {
                self.backend = match value {
                    Value::Null => None,
                    Value::String(s) if s.is_empty() => None,
                    Value::String(url) => {
                        redraft_runtime::backend::endpoints(url).map_err(|e| e.to_string())?;
                        let config = BackendConfig::new(url.as_str());
                        // A new URL keeps the model, template and limits set before it.
                        Some(match self.backend.take() {
                            Some(old) => BackendConfig {
                                url: url.clone(),
                                ..old
                            },
                            None => config,
                        })
                    }
                    _ => return Err("expected a server URL (http://host:port) or null".into()),
                }
            }
            _ => {
                if let Some(inner) = key.strip_prefix("nextEdit.") {
                    self.next_edit.set(inner, value)?
                } else if let Some(inner) = key.strip_prefix("backend.") {
                    let backend = self
                        .backend
                        .as_mut()
                        .ok_or("set `backend.url` (or `backend`) first")?;
                    set_backend(backend, inner, value)?
                } else {
                    return Err("unknown setting".into());
                }
            }
        }
        Ok(())
    }

    /// Whether documents of `language_id` get suggestions.
    pub fn enabled_for(&self, language_id: &str) -> bool {
        self.languages
            .as_ref()
            .is_none_or(|languages| languages.iter().any(|l| l == language_id))
    }
}

/// A confidence bar: a probability, or null for the model's own bar.
fn bar(value: &Value) -> Result<Option<f32>, String> {
    match value {
        Value::Null => Ok(None),
        _ => value
            .as_f64()
            .filter(|p| (0.0..=1.0).contains(p))
            .map(|p| Some(p as f32))
            .ok_or_else(|| {
                format!(
                    "expected a number from 0 to 1, or null for the model's own bar, got {value}"
                )
            }),
    }
}

/// One key of the `backend` object (the URL is set with the object itself).
fn set_backend(backend: &mut BackendConfig, key: &str, value: &Value) -> Result<(), String> {
    let default = BackendConfig::new(backend.url.as_str());
    let text = || match value {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err("expected a string or null".to_string()),
    };
    match key {
        "model" => backend.model = text()?,
        "template" => {
            backend.template = match text()? {
                None => Template::Qwen,
                Some(name) => name.parse()?,
            }
        }
        "apiKey" => backend.api_key = text()?,
        "contextTokens" => {
            backend.context_tokens =
                or_default(value, default.context_tokens, |v| count(v, 16, 1 << 20))?
        }
        "timeoutMs" => {
            backend.timeout = or_default(value, default.timeout, |v| {
                Ok(Duration::from_millis(count(v, 1, 600_000)? as u64))
            })?;
        }
        _ => return Err("unknown setting".into()),
    }
    Ok(())
}

/// `value` as `read` reads it, or `default` for `null`: the rule for a key whose null means
/// nothing of its own (an editor may send `null` for a setting the user left unset).
fn or_default<T>(
    value: &Value,
    default: T,
    read: impl FnOnce(&Value) -> Result<T, String>,
) -> Result<T, String> {
    if value.is_null() {
        Ok(default)
    } else {
        read(value)
    }
}

fn boolean(value: &Value) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| "expected true or false".into())
}

fn count(value: &Value, min: usize, max: usize) -> Result<usize, String> {
    value
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("expected a whole number from {min} to {max}, got {value}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redraft_context::edit::EditBudget;
    use serde_json::json;

    #[test]
    fn bare_and_nested_objects_set_the_same_things() {
        let mut bare = Settings::default();
        let problems = bare.update(&json!({
            "model": "/models/dream",
            "device": "cuda:1",
            "effort": "low",
            "maxTokens": 16,
            "contextTokens": 512,
            "languages": ["rust", "python"],
            "candidates": 2,
            "streamSteps": true,
            "logLevel": "debug",
        }));
        assert!(problems.is_empty(), "{problems:?}");
        let mut nested = Settings::default();
        nested.update(&json!({"redraft": {
            "model": "/models/dream", "device": "cuda:1", "effort": "low", "maxTokens": 16, "contextTokens": 512,
            "languages": ["rust", "python"], "candidates": 2, "streamSteps": true, "logLevel": "debug",
        }}));
        assert_eq!(bare, nested);
        assert_eq!(bare.model, Some(PathBuf::from("/models/dream")));
        assert_eq!(bare.effort, Effort::Low);
        assert_eq!(bare.device, DeviceSpec::Cuda(1));
        bare.update(&json!({"device": null}));
        assert_eq!(bare.device, DeviceSpec::Auto);
        // The engine's name for the first GPU, as `--device gpu` (docs/lsp.md says so).
        assert!(bare.update(&json!({"device": "GPU"})).is_empty());
        assert_eq!(bare.device, DeviceSpec::Cuda(0));
        bare.update(&json!({"device": null}));
        assert!(bare.enabled_for("rust") && !bare.enabled_for("markdown"));
        assert!(Settings::default().enabled_for("markdown"));
        assert_eq!(bare.edit_reuse, Some(Realign::DEFAULT));
        assert!(bare.update(&json!({"editReuse": 4})).is_empty());
        assert_eq!(bare.edit_reuse.map(|e| e.radius), Some(4));
        assert!(bare.update(&json!({"editReuse": "off"})).is_empty());
        assert_eq!(bare.edit_reuse, None);
        let problems = bare.update(&json!({"editReuse": "sometimes"}));
        assert!(
            problems.iter().any(|p| p.contains("\"off\"")),
            "{problems:?}"
        );
        assert_eq!(bare.edit_reuse, None);
    }

    /// `completionItems`: true, false, or `"auto"` (and `null`): by the client's capabilities.
    #[test]
    fn completion_items_are_on_off_or_auto() {
        let mut settings = Settings::default();
        assert_eq!(settings.completion_items, None);
        for (value, expected) in [
            (json!(true), Some(true)),
            (json!(false), Some(false)),
            (json!("auto"), None),
            (json!(true), Some(true)),
            (json!(null), None),
        ] {
            assert!(settings
                .update(&json!({"completionItems": value}))
                .is_empty());
            assert_eq!(settings.completion_items, expected, "{value}");
        }
        settings.completion_items = Some(false);
        let problems = settings.update(&json!({"completionItems": "yes"}));
        assert!(
            problems[0].contains("true, false or \"auto\""),
            "{problems:?}"
        );
        assert_eq!(settings.completion_items, Some(false));
    }

    /// `minConfidence` is the inline completion's bar, apart from the next edit's; `null` is
    /// the model's own; a value that is not a probability changes nothing.
    #[test]
    fn the_inline_completion_bar_is_set_apart_from_the_next_edits() {
        let mut settings = Settings::default();
        assert_eq!(settings.min_confidence, None);
        assert!(settings.update(&json!({"minConfidence": 0.3})).is_empty());
        assert_eq!(settings.min_confidence, Some(0.3));
        assert_eq!(settings.next_edit.limits().budget(512).min_confidence, None);
        assert!(settings.update(&json!({"minConfidence": null})).is_empty());
        assert_eq!(settings, Settings::default());
        for bad in [json!(1.5), json!(-0.1), json!("high")] {
            let mut settings = Settings::default();
            let problems = settings.update(&json!({"minConfidence": bad}));
            assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
            assert!(problems[0].contains("from 0 to 1"), "{problems:?}");
            assert_eq!(
                settings,
                Settings::default(),
                "{bad}: a bad value changes nothing"
            );
        }
    }

    #[test]
    fn bad_values_are_reported_and_keep_the_old_value() {
        let mut settings = Settings::default();
        let problems = settings.update(&json!({
            "effort": "extreme",
            "maxTokens": 0,
            "candidates": "many",
            "languages": [1],
            "colour": "blue",
            "device": "tpu",
            "streamSteps": true,
        }));
        assert_eq!(problems.len(), 6, "{problems:?}");
        assert!(problems
            .iter()
            .any(|p| p.contains("`device`: unknown device `tpu`")));
        assert!(problems
            .iter()
            .any(|p| p.contains("unknown effort `extreme`")));
        assert!(problems
            .iter()
            .any(|p| p.contains("`colour`: unknown setting")));
        let expected = Settings {
            stream_steps: true,
            ..Settings::default()
        };
        assert_eq!(settings, expected);
        assert_eq!(settings.update(&json!(null)), Vec::<String>::new());
        assert_eq!(settings.update(&json!([1])).len(), 1);
    }

    /// `null` is a key's default where the key has no null of its own (an editor may send it
    /// for a setting the user left unset): it was accepted by some keys (`device`) and reported
    /// as a bad value by others (`effort`).
    #[test]
    fn null_is_a_keys_default() {
        let mut settings = Settings::default();
        let changed = json!({
            "effort": "high", "editReuse": "off", "maxTokens": 32, "candidates": 5,
            "streamSteps": true, "logLevel": "debug", "device": "cpu", "completionItems": false,
            "nextEdit": {"debounceMs": 0, "linesAbove": 1, "linesBelow": 2},
            "backend": {"url": "http://gpu-box:8000", "contextTokens": 64, "timeoutMs": 5},
        });
        assert!(settings.update(&changed).is_empty());
        assert_ne!(settings, Settings::default());
        let nulls = json!({
            "effort": null, "editReuse": null, "maxTokens": null, "candidates": null,
            "streamSteps": null, "logLevel": null, "device": null, "completionItems": null,
            "nextEdit": {"debounceMs": null, "linesAbove": null, "linesBelow": null},
            "backend": {"contextTokens": null, "timeoutMs": null},
        });
        assert_eq!(settings.update(&nulls), Vec::<String>::new());
        let expected = Settings {
            backend: Some(BackendConfig::new("http://gpu-box:8000")),
            ..Settings::default()
        };
        assert_eq!(settings, expected);
        // `nextEdit: null` is the switch's default too; the whole backend's null is "none".
        settings.update(&json!({"nextEdit": false}));
        assert!(settings
            .update(&json!({"nextEdit": null, "backend": null}))
            .is_empty());
        assert_eq!(settings, Settings::default());
    }

    /// A `redraft` section of `null` is no settings, as `null` itself is (it was "setting
    /// `redraft`: unknown setting"); a section that is not an object says so.
    #[test]
    fn a_null_section_is_no_settings() {
        let mut settings = Settings {
            effort: Effort::Low,
            ..Settings::default()
        };
        let before = settings.clone();
        for value in [json!({"redraft": null}), json!(null)] {
            assert_eq!(settings.update(&value), Vec::<String>::new(), "{value}");
            assert_eq!(settings, before, "{value}");
        }
        let problems = settings.update(&json!({"redraft": "low"}));
        assert_eq!(
            problems,
            ["settings under `redraft` must be a JSON object, got \"low\""]
        );
        assert_eq!(settings, before);
    }

    #[test]
    fn next_edit_settings_nest_or_dot_and_are_checked() {
        let mut nested = Settings::default();
        let problems = nested.update(&json!({"nextEdit": {
            "enabled": false, "debounceMs": 0, "linesAbove": 1, "linesBelow": 4, "maxChange": null,
            "minConfidence": 0.25,
        }}));
        assert!(problems.is_empty(), "{problems:?}");
        let mut dotted = Settings::default();
        dotted.update(&json!({"redraft": {
            "nextEdit": false, "nextEdit.debounceMs": 0, "nextEdit.linesAbove": 1,
            "nextEdit.linesBelow": 4, "nextEdit.maxChange": null, "nextEdit.minConfidence": 0.25,
        }}));
        assert_eq!(nested, dotted);
        let budget = nested.next_edit.limits().budget(512);
        assert_eq!((budget.lines_above, budget.lines_below), (1, 4));
        assert_eq!(budget.max_changed_fraction, f64::INFINITY);
        assert_eq!(budget.min_confidence, Some(0.25));
        nested.update(&json!({"nextEdit": {"minConfidence": null}}));
        assert_eq!(nested.next_edit.limits().budget(512).min_confidence, None);
        for bad in [json!(1.5), json!(-0.1), json!("high")] {
            let mut settings = Settings::default();
            let problems = settings.update(&json!({"nextEdit": {"minConfidence": bad}}));
            assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
            assert_eq!(
                settings,
                Settings::default(),
                "{bad}: a bad value changes nothing"
            );
        }
        assert_eq!(
            Settings::default().next_edit.limits().budget(512),
            EditBudget::for_positions(512),
            "the defaults are the pipeline's, as `redraft complete --next-edit` uses them"
        );

        let mut settings = Settings::default();
        assert_eq!(settings.update(&json!({"nextEdit": 3})).len(), 1);
        let problems = settings.update(&json!({"nextEdit": {
            "maxChange": 0, "debounceMs": -5, "linesAbove": "3", "colour": 1,
        }, "nextEdit.enabled": "yes"}));
        assert_eq!(problems.len(), 5, "{problems:?}");
        assert!(problems
            .iter()
            .any(|p| p.contains("`nextEdit.colour`: unknown setting")));
        assert!(problems
            .iter()
            .any(|p| p.contains("`nextEdit.maxChange`: expected a number above 0")));
        assert_eq!(settings, Settings::default());
    }

    #[test]
    fn a_backend_is_a_url_or_an_object_and_bad_values_are_reported() {
        let mut settings = Settings::default();
        assert!(settings
            .update(&json!({"backend": "http://gpu:8000/v1"}))
            .is_empty());
        let backend = settings.backend.clone().unwrap();
        assert_eq!(backend, BackendConfig::new("http://gpu:8000/v1"));
        let problems = settings.update(&json!({"backend": {
            "template": "starcoder", "model": "coder", "apiKey": "k", "timeoutMs": 5000,
            "contextTokens": 4096, "url": "https://team.example/v1",
        }}));
        assert!(problems.is_empty(), "{problems:?}");
        let backend = settings.backend.clone().unwrap();
        assert_eq!(backend.url, "https://team.example/v1");
        assert_eq!(backend.template, Template::StarCoder);
        assert_eq!(backend.model.as_deref(), Some("coder"));
        assert_eq!(backend.api_key.as_deref(), Some("k"));
        assert_eq!(backend.timeout, Duration::from_secs(5));
        assert_eq!(backend.context_tokens, 4096);
        // A new URL keeps the rest; a bad one keeps the old backend.
        settings.update(&json!({"backend.url": "http://other:1"}));
        assert_eq!(
            settings.backend.as_ref().unwrap().model.as_deref(),
            Some("coder")
        );
        let problems = settings.update(&json!({"backend": "ftp://x", "backend.template": "nope"}));
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(settings.backend.as_ref().unwrap().url, "http://other:1");
        assert!(settings.update(&json!({"backend": null})).is_empty());
        assert_eq!(settings.backend, None);
        let problems = settings.update(&json!({"backend.model": "coder"}));
        assert!(problems[0].contains("first"), "{problems:?}");
    }
}
