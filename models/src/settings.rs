//! Where models live and how the Hub is reached: the environment variables huggingface_hub and
//! Ollama read, gathered once into [`Settings`].

use std::fmt;
use std::path::PathBuf;

/// The default Hub, as huggingface_hub's `HF_ENDPOINT` default.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Where models are looked for and fetched from.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Hub cache root (`models--ORG--REPO/` folders live here).
    pub hub_cache: PathBuf,
    /// The Hub's base URL, without a trailing slash.
    pub endpoint: String,
    /// Sent as `Authorization: Bearer` to the endpoint (never to a CDN it redirects to).
    pub token: Option<HfToken>,
    /// Cache only: no request is ever made.
    pub offline: bool,
    /// Ollama's store (`manifests/`, `blobs/`).
    pub ollama_models: PathBuf,
}

impl Settings {
    /// Reads the process environment (see [`Settings::from_vars`]).
    pub fn from_env() -> Settings {
        Settings::from_vars(|key| match key {
            // `HOME` unset (a service, `env -i`): the account's home from the user database,
            // as Python's `expanduser` finds it, rather than a cache under the current
            // directory.
            "HOME" => std::env::home_dir(),
            _ => std::env::var_os(key).map(PathBuf::from),
        })
    }

    /// Builds the settings from a variable lookup, the way huggingface_hub and Ollama do:
    ///
    /// - cache: `HF_HUB_CACHE` (or the older `HUGGINGFACE_HUB_CACHE`), else `HF_HOME/hub`, else
    ///   `XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`;
    /// - `HF_ENDPOINT`, default [`DEFAULT_ENDPOINT`];
    /// - token: `HF_TOKEN` (or the older `HUGGING_FACE_HUB_TOKEN`), else the file
    ///   `HF_TOKEN_PATH`, else `HF_HOME/token` (where `hf auth login` writes it);
    /// - `HF_HUB_OFFLINE` set to `1`, `true`, `yes` or `on`;
    /// - Ollama: `OLLAMA_MODELS`, else `~/.ollama/models` (on Linux, when that does not exist
    ///   and the system service's `/usr/share/ollama/.ollama/models` does, that one).
    ///
    /// As huggingface_hub does, a leading `~` and `$VAR` or `${VAR}` in the Hugging Face paths
    /// are expanded (a value from an editor's settings or a `.env` file is not the shell's).
    pub fn from_vars(var: impl Fn(&str) -> Option<PathBuf>) -> Settings {
        let nonempty = |key: &str| var(key).filter(|v| !v.as_os_str().is_empty());
        let home = nonempty("HOME")
            .or_else(|| nonempty("USERPROFILE"))
            .unwrap_or_default();
        // A variable set to nothing expands to nothing, as in Python (`nonempty` would keep
        // `$VAR` as it stands: a directory named so under the current one).
        let expand = |path: PathBuf| expand_path(path, &home, &var);
        let hf_home = expand(nonempty("HF_HOME").unwrap_or_else(|| {
            nonempty("XDG_CACHE_HOME")
                .unwrap_or_else(|| home.join(".cache"))
                .join("huggingface")
        }));
        let hub_cache = nonempty("HF_HUB_CACHE")
            .or_else(|| nonempty("HUGGINGFACE_HUB_CACHE"))
            .map(expand)
            .unwrap_or_else(|| hf_home.join("hub"));
        let endpoint = nonempty("HF_ENDPOINT")
            .map(|p| p.to_string_lossy().trim_end_matches('/').to_string())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let token = nonempty("HF_TOKEN")
            .or_else(|| nonempty("HUGGING_FACE_HUB_TOKEN"))
            .and_then(|t| HfToken::new(&t.to_string_lossy()))
            .or_else(|| {
                let file = nonempty("HF_TOKEN_PATH")
                    .map(expand)
                    .unwrap_or_else(|| hf_home.join("token"));
                let text = std::fs::read_to_string(file).ok()?;
                HfToken::new(&text)
            });
        let offline = var("HF_HUB_OFFLINE").is_some_and(|v| {
            matches!(
                v.to_string_lossy().trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        });
        let ollama_models = nonempty("OLLAMA_MODELS").unwrap_or_else(|| {
            let own = home.join(".ollama").join("models");
            // Linux's install script runs `ollama serve` as the `ollama` user, whose home this
            // is; `ollama pull` stores there unless the user runs the server themselves.
            let service = PathBuf::from("/usr/share/ollama/.ollama/models");
            if cfg!(target_os = "linux") && !own.exists() && service.exists() {
                service
            } else {
                own
            }
        });
        Settings {
            hub_cache,
            endpoint,
            token,
            offline,
            ollama_models,
        }
    }
}

/// `path` with a leading `~` (alone or before `/`) replaced by `home`, then each `$NAME` or
/// `${NAME}` by that variable's value, as Python's `expandvars(expanduser(path))`: an unset
/// variable, `~user` and a path that is not UTF-8 stay as they are.
fn expand_path(
    path: PathBuf,
    home: &std::path::Path,
    var: &dyn Fn(&str) -> Option<PathBuf>,
) -> PathBuf {
    let Some(text) = path.to_str() else {
        return path;
    };
    let text = match text.strip_prefix('~') {
        Some(rest)
            if (rest.is_empty() || rest.starts_with('/')) && !home.as_os_str().is_empty() =>
        {
            match home.to_str() {
                Some(home) => format!("{home}{rest}"),
                None => return path,
            }
        }
        _ => text.to_string(),
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = match after.strip_prefix('{') {
            Some(braced) => match braced.find('}') {
                Some(end) => (&braced[..end], &braced[end + 1..]),
                None => ("", after),
            },
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        let value = (!name.is_empty())
            .then(|| var(name))
            .flatten()
            .and_then(|v| v.to_str().map(str::to_string));
        match value {
            Some(value) => {
                out.push_str(&value);
                rest = tail;
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    PathBuf::from(out)
}

/// A Hugging Face access token. Its `Debug` prints `HfToken(<redacted>)` and it has no
/// `Display`, so it cannot end up in a log line or an error message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct HfToken(String);

impl HfToken {
    /// A token from its text; `None` for an empty (or all-whitespace) one.
    pub fn new(text: &str) -> Option<HfToken> {
        let text = text.trim();
        (!text.is_empty()).then(|| HfToken(text.to_string()))
    }

    /// The secret itself, only for the `Authorization` header.
    pub(crate) fn secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for HfToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HfToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> Settings {
        let vars: HashMap<String, PathBuf> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), PathBuf::from(v)))
            .collect();
        Settings::from_vars(|k| vars.get(k).cloned())
    }

    #[test]
    fn cache_root_follows_huggingface_hub_precedence() {
        let home = [("HOME", "/home/u")];
        assert_eq!(
            settings(&home).hub_cache,
            PathBuf::from("/home/u/.cache/huggingface/hub")
        );
        let xdg = [("HOME", "/home/u"), ("XDG_CACHE_HOME", "/x")];
        assert_eq!(
            settings(&xdg).hub_cache,
            PathBuf::from("/x/huggingface/hub")
        );
        let hf_home = [
            ("HOME", "/home/u"),
            ("XDG_CACHE_HOME", "/x"),
            ("HF_HOME", "/hf"),
        ];
        assert_eq!(settings(&hf_home).hub_cache, PathBuf::from("/hf/hub"));
        let hub = [("HF_HOME", "/hf"), ("HF_HUB_CACHE", "/c")];
        assert_eq!(settings(&hub).hub_cache, PathBuf::from("/c"));
        let legacy = [("HF_HOME", "/hf"), ("HUGGINGFACE_HUB_CACHE", "/old")];
        assert_eq!(settings(&legacy).hub_cache, PathBuf::from("/old"));
    }

    /// A `~` or `$VAR` that no shell expanded (an editor's `env` setting, a `.env` file, a
    /// systemd unit) names the directory huggingface_hub would use, not `./~` in whatever
    /// directory redraft was started from.
    #[test]
    fn tilde_and_variables_in_cache_paths_are_expanded_as_huggingface_hub_does() {
        let s = settings(&[("HOME", "/home/u"), ("HF_HOME", "~/hf")]);
        assert_eq!(s.hub_cache, PathBuf::from("/home/u/hf/hub"));
        let s = settings(&[("HOME", "/home/u"), ("HF_HUB_CACHE", "~")]);
        assert_eq!(s.hub_cache, PathBuf::from("/home/u"));
        let s = settings(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "~/.xdg")]);
        assert_eq!(s.hub_cache, PathBuf::from("/home/u/.xdg/huggingface/hub"));
        let s = settings(&[
            ("HOME", "/home/u"),
            ("SCRATCH", "/scratch/u"),
            ("HF_HUB_CACHE", "${SCRATCH}/hf $SCRATCH/x$UNSET/~u/$"),
        ]);
        assert_eq!(
            s.hub_cache,
            PathBuf::from("/scratch/u/hf /scratch/u/x$UNSET/~u/$")
        );
        let s = settings(&[("EMPTY", ""), ("HF_HUB_CACHE", "/x$EMPTY/y${EMPTY}")]);
        assert_eq!(s.hub_cache, PathBuf::from("/x/y"));
        let s = settings(&[("HOME", "/home/u"), ("HUGGINGFACE_HUB_CACHE", "~/old")]);
        assert_eq!(s.hub_cache, PathBuf::from("/home/u/old"));
        // `~user` is not this user's home; a name with spaces or beyond ASCII is kept.
        let s = settings(&[("HOME", "/home/u"), ("HF_HUB_CACHE", "~other/c")]);
        assert_eq!(s.hub_cache, PathBuf::from("~other/c"));
        let s = settings(&[("HF_HUB_CACHE", "/mnt/disque dur/modèles")]);
        assert_eq!(s.hub_cache, PathBuf::from("/mnt/disque dur/modèles"));

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tok"), "hf_tilde\n").unwrap();
        let s = settings(&[
            ("HOME", dir.path().to_str().unwrap()),
            ("HF_TOKEN_PATH", "~/tok"),
        ]);
        assert_eq!(s.token, HfToken::new("hf_tilde"));
    }

    #[test]
    fn endpoint_offline_and_ollama_store() {
        // A home with its own store (else a machine with Ollama's Linux service store would
        // get that one).
        let home = tempfile::tempdir().unwrap();
        let own = home.path().join(".ollama/models");
        std::fs::create_dir_all(&own).unwrap();
        let s = settings(&[("HOME", home.path().to_str().unwrap())]);
        assert_eq!(s.endpoint, DEFAULT_ENDPOINT);
        assert!(!s.offline);
        assert_eq!(s.ollama_models, own);
        let s = settings(&[
            ("HF_ENDPOINT", "http://mirror.local/"),
            ("HF_HUB_OFFLINE", "1"),
            ("OLLAMA_MODELS", "/srv/ollama"),
        ]);
        assert_eq!(s.endpoint, "http://mirror.local");
        assert!(s.offline);
        assert_eq!(s.ollama_models, PathBuf::from("/srv/ollama"));
        assert!(!settings(&[("HF_HUB_OFFLINE", "0")]).offline);
        assert!(settings(&[("HF_HUB_OFFLINE", "TRUE")]).offline);
    }

    #[test]
    fn token_from_variable_or_file_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "hf_fromfile\n").unwrap();
        let hf_home = dir.path().to_str().unwrap();
        let s = settings(&[("HF_HOME", hf_home)]);
        assert_eq!(s.token, HfToken::new("hf_fromfile"));
        let s = settings(&[("HF_HOME", hf_home), ("HF_TOKEN", "hf_fromvar")]);
        assert_eq!(s.token.as_ref().map(HfToken::secret), Some("hf_fromvar"));
        let shown = format!("{s:?}");
        assert!(!shown.contains("hf_fromvar"), "{shown}");
        assert!(shown.contains("HfToken(<redacted>)"), "{shown}");
        let legacy = settings(&[("HF_HOME", hf_home), ("HUGGING_FACE_HUB_TOKEN", "hf_old")]);
        assert_eq!(legacy.token, HfToken::new("hf_old"));
        let blank = settings(&[("HF_HOME", hf_home), ("HF_TOKEN", "  ")]);
        assert_eq!(blank.token, HfToken::new("hf_fromfile"));
    }
}
