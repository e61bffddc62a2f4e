//! The remote-backend flags `redraft serve` and `redraft eval` share (`--backend URL` and the
//! `--backend-*` that refine it), defined once, and the [`BackendConfig`] they make.

use std::time::Duration;

use crate::backend::{endpoints, BackendConfig, BackendError, Template};

/// The variable an API key for the backend is read from when no `--backend-api-key` is given
/// (a flag's value shows in the process list).
pub const API_KEY_VARIABLE: &str = "REDRAFT_BACKEND_API_KEY";

#[derive(clap::Args, Debug, Clone, Default)]
pub struct BackendArgs {
    /// Fill FIM middles with a model another process serves instead of the local engine (the
    /// same planning and cleaning around it; next edits never go there): a `redraft serve` or
    /// an OpenAI-compatible completions server (vLLM, SGLang, llama.cpp's llama-server,
    /// Ollama), as http://HOST:PORT (add /v1 if the server wants it).
    #[arg(long, value_name = "URL")]
    pub backend: Option<String>,
    /// The served model's name [default: the one the server lists].
    #[arg(long, value_name = "NAME", requires = "backend")]
    pub backend_model: Option<String>,
    /// The FIM template the served model was trained on: qwen, starcoder, codellama, deepseek,
    /// codestral, glm, or suffix (prompt + `suffix` field, for servers that apply it themselves)
    /// [default: qwen].
    #[arg(long, value_name = "TEMPLATE", requires = "backend")]
    pub backend_template: Option<Template>,
    /// Context tokens sent to the backend (prefix, suffix and snippets) [default: 2048].
    #[arg(long, value_name = "TOKENS", requires = "backend")]
    pub backend_context: Option<usize>,
    /// Seconds one backend request may take [default: 30].
    #[arg(long, value_name = "SECONDS", requires = "backend")]
    pub backend_timeout_s: Option<f64>,
    /// Sent as `Authorization: Bearer KEY` [default: $REDRAFT_BACKEND_API_KEY].
    #[arg(long, value_name = "KEY", requires = "backend")]
    pub backend_api_key: Option<String>,
}

/// Why the flags make no backend.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackendArgsError {
    #[error("--backend-timeout-s must be a positive number of seconds, not {0}")]
    Timeout(f64),
    /// A timeout past what a `Duration` holds (about 1.8e19 seconds).
    #[error(
        "--backend-timeout-s {0:e} is longer than any timer can wait: give seconds such as 30"
    )]
    TimeoutTooLong(f64),
    /// The URL is not one a backend can be reached at.
    #[error(transparent)]
    Url(#[from] BackendError),
}

impl BackendArgs {
    /// The backend the flags name, `None` without `--backend`; the key is `--backend-api-key`,
    /// else `$REDRAFT_BACKEND_API_KEY` (an empty one is no key). The URL and the timeout are
    /// checked here, so a mistake stops the command before any request is made.
    pub fn config(&self) -> Result<Option<BackendConfig>, BackendArgsError> {
        self.config_with_key_from(std::env::var(API_KEY_VARIABLE).ok())
    }

    /// [`BackendArgs::config`] with `env_key` as the variable's value.
    fn config_with_key_from(
        &self,
        env_key: Option<String>,
    ) -> Result<Option<BackendConfig>, BackendArgsError> {
        let Some(url) = &self.backend else {
            return Ok(None);
        };
        endpoints(url)?;
        let mut config = BackendConfig::new(url.as_str());
        config.model = self.backend_model.clone();
        if let Some(template) = self.backend_template {
            config.template = template;
        }
        if let Some(tokens) = self.backend_context {
            config.context_tokens = tokens;
        }
        if let Some(seconds) = self.backend_timeout_s {
            if !(seconds > 0.0 && seconds.is_finite()) {
                return Err(BackendArgsError::Timeout(seconds));
            }
            config.timeout = Duration::try_from_secs_f64(seconds)
                .map_err(|_| BackendArgsError::TimeoutTooLong(seconds))?;
        }
        config.api_key = self
            .backend_api_key
            .clone()
            .or(env_key)
            .filter(|key| !key.is_empty());
        Ok(Some(config))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    #[command(no_binary_name = true)]
    struct Flags {
        #[command(flatten)]
        backend: BackendArgs,
    }

    /// The config `flags` make with `env_key` as `$REDRAFT_BACKEND_API_KEY`.
    fn check(
        flags: &str,
        env_key: Option<&str>,
    ) -> Result<Option<BackendConfig>, BackendArgsError> {
        Flags::try_parse_from(flags.split_whitespace())
            .unwrap_or_else(|e| panic!("{flags:?}: {e}"))
            .backend
            .config_with_key_from(env_key.map(str::to_string))
    }

    #[test]
    fn no_backend_flag_is_no_backend() {
        assert_eq!(check("", Some("k")), Ok(None));
    }

    #[test]
    fn a_url_alone_is_the_defaults() {
        assert_eq!(
            check("--backend http://gpu:8000/v1", None),
            Ok(Some(BackendConfig::new("http://gpu:8000/v1")))
        );
    }

    #[test]
    fn every_flag_sets_its_field() {
        let config = check(
            "--backend https://team.example --backend-model coder --backend-template starcoder \
             --backend-context 4096 --backend-timeout-s 2.5 --backend-api-key k1",
            Some("from-env"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            config,
            BackendConfig {
                url: "https://team.example".into(),
                model: Some("coder".into()),
                template: Template::StarCoder,
                api_key: Some("k1".into()),
                timeout: Duration::from_millis(2500),
                context_tokens: 4096,
            },
            "the flag's key wins over the variable's"
        );
    }

    #[test]
    fn the_key_comes_from_the_variable_without_the_flag_and_an_empty_one_is_none() {
        let key = |flags: &str, env: Option<&str>| check(flags, env).unwrap().unwrap().api_key;
        assert_eq!(key("--backend http://h:1", Some("k2")), Some("k2".into()));
        assert_eq!(key("--backend http://h:1", Some("")), None);
        assert_eq!(key("--backend http://h:1", None), None);
        assert_eq!(
            key("--backend http://h:1 --backend-api-key=", Some("k2")),
            None,
            "an empty flag is no key, not the variable's"
        );
    }

    #[test]
    fn a_timeout_must_be_positive_and_finite() {
        for bad in ["0", "-1", "inf", "NaN"] {
            let err = check(
                &format!("--backend http://h:1 --backend-timeout-s={bad}"),
                None,
            )
            .unwrap_err();
            assert!(matches!(err, BackendArgsError::Timeout(_)), "{bad}: {err}");
            assert!(
                err.to_string()
                    .starts_with("--backend-timeout-s must be a positive number of seconds, not "),
                "{err}"
            );
        }
    }

    #[test]
    fn a_timeout_past_what_a_duration_holds_is_refused_not_a_panic() {
        for huge in ["1e30", "1.7e308", "18446744073709551616"] {
            let err = check(
                &format!("--backend http://h:1 --backend-timeout-s={huge}"),
                None,
            )
            .unwrap_err();
            assert!(
                matches!(err, BackendArgsError::TimeoutTooLong(_)),
                "{huge}: {err}"
            );
        }
        assert_eq!(
            check("--backend http://h:1 --backend-timeout-s=1e30", None)
                .unwrap_err()
                .to_string(),
            "--backend-timeout-s 1e30 is longer than any timer can wait: give seconds such as 30"
        );
        let day = check("--backend http://h:1 --backend-timeout-s=86400", None);
        assert_eq!(day.unwrap().unwrap().timeout, Duration::from_secs(86400));
    }

    #[test]
    fn a_url_no_backend_can_be_reached_at_is_refused_before_any_request() {
        let err = check("--backend gpu:8000", None).unwrap_err();
        assert!(
            matches!(err, BackendArgsError::Url(BackendError::BadUrl { .. })),
            "{err}"
        );
        assert!(err.to_string().contains("http://HOST:PORT"), "{err}");
    }

    #[test]
    fn the_refining_flags_require_a_backend() {
        for flags in [
            "--backend-model m",
            "--backend-template qwen",
            "--backend-context 8",
            "--backend-timeout-s 1",
            "--backend-api-key k",
        ] {
            let err = Flags::try_parse_from(flags.split_whitespace())
                .err()
                .unwrap_or_else(|| panic!("{flags} was accepted without --backend"));
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::MissingRequiredArgument,
                "{flags}"
            );
        }
    }
}
