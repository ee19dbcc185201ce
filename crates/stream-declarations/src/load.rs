//! Loading a declaration: strict YAML, the rules, the prompt bound by its
//! SHA-256, the capability manifest, and the fingerprint over all of them.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_json::json;
use stream_core::canon::{canonical_sha256, sha256};
use stream_core::{Fingerprint, Sha256Hex};

use crate::error::{DeclarationError, PromptProblem};
use crate::model::Declaration;
use crate::tools::CapabilityManifest;
use crate::validate::validate;

/// The largest declaration file read, in bytes.
pub const MAX_DECLARATION_BYTES: u64 = 64 * 1024;
/// The largest prompt file read, in bytes.
pub const MAX_PROMPT_BYTES: u64 = 64 * 1024;

/// A prompt file and its hash.
#[derive(Clone, PartialEq, Eq)]
pub struct Prompt {
    /// The prompt text (UTF-8).
    pub text: String,
    /// SHA-256 of its bytes.
    pub sha256: Sha256Hex,
}

impl Prompt {
    /// Checks and hashes prompt bytes.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Self, DeclarationError> {
        let problem = |problem| DeclarationError::Prompt {
            path: path.to_owned(),
            problem,
        };
        if bytes.is_empty() {
            return Err(problem(PromptProblem::Empty));
        }
        let size = bytes.len() as u64;
        if size > MAX_PROMPT_BYTES {
            return Err(problem(PromptProblem::TooLarge {
                size,
                max: MAX_PROMPT_BYTES,
            }));
        }
        let sha256 = sha256(&bytes);
        let text = String::from_utf8(bytes).map_err(|_| problem(PromptProblem::NotUtf8))?;
        Ok(Self { text, sha256 })
    }
}

impl std::fmt::Debug for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompt")
            .field("sha256", &self.sha256)
            .field("bytes", &self.text.len())
            .finish()
    }
}

/// A declaration that parsed, passed every rule, and is bound to its prompt
/// and capability manifest by its fingerprint.
#[derive(Debug, Clone)]
pub struct LoadedDeclaration {
    /// The declaration as parsed.
    pub declaration: Declaration,
    /// Its prompt, when it names one.
    pub prompt: Option<Prompt>,
    /// The tools of its proposals.
    pub manifest: CapabilityManifest,
    /// SHA-256 over JCS of declaration, manifest and prompt hash.
    pub fingerprint: Fingerprint,
}

impl LoadedDeclaration {
    /// The output-token limit a run of this declaration asks the provider
    /// for: its `provider.max_output_tokens`, else 1,024. `serve` and the
    /// inspector's rebuilt request both take it from here.
    pub fn max_output_tokens(&self) -> u32 {
        self.declaration
            .provider
            .as_ref()
            .map_or(1024, |p| p.max_output_tokens)
    }
}

/// Parses declaration YAML strictly: unknown fields, unknown kinds and wrong
/// types are refused naming the field. Does not apply the rules.
pub fn parse_yaml(text: &str) -> Result<Declaration, DeclarationError> {
    let de = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let rule = e.into_inner().to_string();
        // A missing field is reported at its parent; name the field itself.
        // (serde_norway prefixes nested messages with their path.)
        const MISSING: &str = "missing field `";
        let missing = rule
            .find(MISSING)
            .and_then(|at| rule[at + MISSING.len()..].split('`').next());
        let field = match (path.as_str(), missing) {
            (".", Some(name)) => name.to_owned(),
            (".", None) => "(document)".to_owned(),
            (_, Some(name)) => format!("{path}.{name}"),
            (_, None) => path,
        };
        DeclarationError::Invalid { field, rule }
    })
}

/// The declaration fingerprint: SHA-256 over RFC 8785 JCS of the
/// declaration, its exact capability manifest and its prompt's SHA-256.
pub fn fingerprint(
    declaration: &Declaration,
    manifest: &CapabilityManifest,
    prompt_sha256: Option<&Sha256Hex>,
) -> Result<Fingerprint, DeclarationError> {
    canonical_sha256(&json!({
        "ns": "thestream/declaration/1",
        "declaration": declaration,
        "capabilities": manifest,
        "promptSha256": prompt_sha256,
    }))
    .map(Fingerprint::from)
    .map_err(|_| DeclarationError::Canon)
}

impl LoadedDeclaration {
    /// Parses, validates and binds a declaration whose prompt bytes the
    /// caller has already read (`prompt` must be given exactly when the
    /// declaration names one).
    pub fn from_parts(yaml: &str, prompt: Option<Prompt>) -> Result<Self, DeclarationError> {
        let declaration = parse_yaml(yaml)?;
        validate(&declaration)?;
        match (&declaration.prompt, &prompt) {
            (Some(_), Some(_)) | (None, None) => {}
            (Some(_), None) => {
                return Err(DeclarationError::invalid(
                    "prompt",
                    "names a prompt file that was not supplied",
                ));
            }
            (None, Some(_)) => {
                return Err(DeclarationError::invalid(
                    "prompt",
                    "is absent, but a prompt was supplied",
                ));
            }
        }
        let manifest = CapabilityManifest::for_proposals(&declaration.policy.proposals);
        let fingerprint = fingerprint(&declaration, &manifest, prompt.as_ref().map(|p| &p.sha256))?;
        Ok(Self {
            declaration,
            prompt,
            manifest,
            fingerprint,
        })
    }

    /// Loads the declaration file at `path` and the prompt it names,
    /// relative to the file's folder.
    pub fn load(path: &Path) -> Result<Self, DeclarationError> {
        let read_err = |source| DeclarationError::Read {
            path: path.to_owned(),
            source,
        };
        let bytes = read_bounded(path, MAX_DECLARATION_BYTES).map_err(read_err)?;
        if bytes.len() as u64 > MAX_DECLARATION_BYTES {
            return Err(read_err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "larger than 64 KiB",
            )));
        }
        let yaml = String::from_utf8(bytes).map_err(|_| {
            read_err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not UTF-8",
            ))
        })?;
        let declaration = parse_yaml(&yaml)?;
        validate(&declaration)?;
        let prompt = match &declaration.prompt {
            None => None,
            Some(rel) => {
                let prompt_path = prompt_path(path, rel.as_str());
                let bytes = read_bounded(&prompt_path, MAX_PROMPT_BYTES).map_err(|e| {
                    DeclarationError::Prompt {
                        path: prompt_path.clone(),
                        problem: match e.kind() {
                            std::io::ErrorKind::InvalidInput => PromptProblem::NotAFile,
                            _ => PromptProblem::Unreadable(e),
                        },
                    }
                })?;
                Some(Prompt::from_bytes(&prompt_path, bytes)?)
            }
        };
        Self::from_parts(&yaml, prompt)
    }

    /// The declaration id.
    pub fn id(&self) -> &str {
        self.declaration.id.as_str()
    }

    /// The declaration version.
    pub fn version(&self) -> u32 {
        self.declaration.version
    }
}

fn prompt_path(declaration_path: &Path, rel: &str) -> PathBuf {
    declaration_path
        .parent()
        .unwrap_or(Path::new("."))
        .join(rel)
}

/// Reads at most `max + 1` bytes of a regular file (so an oversized file is
/// noticed without reading it all); a non-regular file is `InvalidInput`.
fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}
