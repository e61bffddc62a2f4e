//! Ollama's local store, read in place: `manifests/<host>/<namespace>/<model>/<tag>` is the
//! image manifest `ollama pull` wrote; its layer of type `application/vnd.ollama.image.model`
//! names the GGUF blob `blobs/sha256-<hex>`. Nothing is ever downloaded or copied.

use std::path::{Path, PathBuf};

use crate::cache::is_sha256;
use crate::error::{Error, Result};
use crate::name::OllamaName;

/// The media type of the layer that holds the GGUF weights.
pub const MODEL_LAYER: &str = "application/vnd.ollama.image.model";

/// The manifest file of `name` in `store`.
pub fn manifest_path(store: &Path, name: &OllamaName) -> PathBuf {
    store
        .join("manifests")
        .join(&name.host)
        .join(&name.namespace)
        .join(&name.model)
        .join(&name.tag)
}

/// The GGUF blob of `name` in `store`.
pub fn resolve(store: &Path, name: &OllamaName) -> Result<PathBuf> {
    #[derive(serde::Deserialize)]
    struct Manifest {
        #[serde(default)]
        layers: Vec<Layer>,
    }
    #[derive(serde::Deserialize)]
    struct Layer {
        #[serde(rename = "mediaType")]
        media_type: String,
        digest: String,
    }
    if store.exists() && !store.is_dir() {
        return Err(Error::OllamaStoreNotDir {
            store: store.to_path_buf(),
        });
    }
    let manifest = manifest_path(store, name);
    let text = match std::fs::read_to_string(&manifest) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::OllamaNotPulled {
                name: name.pull_name(),
                manifest,
            });
        }
        Err(e) => return Err(Error::io("read", &manifest, e)),
    };
    let parsed: Manifest = serde_json::from_str(&text).map_err(|e| Error::OllamaManifest {
        name: name.pull_name(),
        manifest: manifest.clone(),
        what: e.to_string(),
    })?;
    let layer = parsed
        .layers
        .iter()
        .find(|l| l.media_type == MODEL_LAYER)
        .ok_or_else(|| Error::OllamaNoModelLayer {
            name: name.pull_name(),
            manifest: manifest.clone(),
        })?;
    let hex = layer
        .digest
        .strip_prefix("sha256:")
        .filter(|hex| is_sha256(hex))
        .ok_or_else(|| Error::OllamaManifest {
            name: name.pull_name(),
            manifest: manifest.clone(),
            what: format!("`{}` is not a sha256 digest", layer.digest),
        })?;
    let blob = store.join("blobs").join(format!("sha256-{hex}"));
    if !blob.is_file() {
        return Err(Error::OllamaBlobMissing {
            name: name.pull_name(),
            blob,
        });
    }
    Ok(blob)
}

/// Every manifest in `store` as a name, sorted.
pub fn names(store: &Path) -> Vec<OllamaName> {
    let children = |dir: &Path| -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        names.sort_unstable();
        names
    };
    let root = store.join("manifests");
    let mut found = Vec::new();
    for host in children(&root) {
        for namespace in children(&root.join(&host)) {
            for model in children(&root.join(&host).join(&namespace)) {
                let dir = root.join(&host).join(&namespace).join(&model);
                for tag in children(&dir) {
                    if dir.join(&tag).is_file() {
                        found.push(OllamaName {
                            host: host.clone(),
                            namespace: namespace.clone(),
                            model: model.clone(),
                            tag,
                        });
                    }
                }
            }
        }
    }
    found
}
