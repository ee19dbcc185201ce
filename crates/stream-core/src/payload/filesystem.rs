//! `stream.filesystem.file.changed@1`: a scan recorded a new immutable version.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::event::{Authorship, Payload};
use crate::ids::{DocumentId, Sha256Hex, VersionId};
use crate::text::{BoundedText, Label};

/// `stream.filesystem.file.changed@1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileChanged {
    /// Stable document id.
    pub document_id: DocumentId,
    /// Normalized path relative to the root, `/`-separated.
    pub path: BoundedText<1, { crate::bounds::DOCUMENT_PATH_MAX }>,
    /// The new immutable version.
    pub version_id: VersionId,
    /// The version it follows, if any.
    pub previous_version_id: Option<VersionId>,
    /// SHA-256 of the bytes.
    pub sha256: Sha256Hex,
    /// Size in bytes.
    pub size: u64,
    /// Content type.
    pub content_type: Label,
}

impl Payload for FileChanged {
    const TYPE: &'static str = "stream.filesystem.file.changed";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::System;
    const SENSITIVE: bool = true;

    fn identity_key(&self) -> serde_json::Value {
        json!([self.document_id, self.version_id])
    }
}
