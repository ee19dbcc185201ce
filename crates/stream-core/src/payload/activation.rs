//! `stream.system.activation.step@1`: one recorded step of an activation.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::event::{Authorship, Payload};
use crate::ids::{Fingerprint, Sha256Hex};
use crate::text::Label;

/// The steps of an activation, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActivationStepKind {
    /// The worker bundle was hashed and passed its sandbox self-test.
    VerifyBundle,
    /// Ingress stopped taking updates (none lost).
    FreezeIngress,
    /// The old consumer stopped and its in-flight runs settled.
    StopConsumer,
    /// Declaration, prompt and context manifest installed.
    InstallDeclaration,
    /// The new consumer's progress set at the frozen Telegram head.
    SetProgress,
    /// The running consumer reported the new version, source and bundle.
    AwaitReady,
    /// The Telegram menu was registered.
    RegisterMenu,
    /// Ingress resumed.
    ResumeIngress,
}

impl ActivationStepKind {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::VerifyBundle => "verify-bundle",
            Self::FreezeIngress => "freeze-ingress",
            Self::StopConsumer => "stop-consumer",
            Self::InstallDeclaration => "install-declaration",
            Self::SetProgress => "set-progress",
            Self::AwaitReady => "await-ready",
            Self::RegisterMenu => "register-menu",
            Self::ResumeIngress => "resume-ingress",
        }
    }
}

/// `stream.system.activation.step@1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ActivationStep {
    /// The activation this step belongs to.
    pub activation_id: Label,
    /// Which step.
    pub step: ActivationStepKind,
    /// Declaration id being activated.
    pub declaration_id: Label,
    /// Its version.
    pub declaration_version: u32,
    /// Its fingerprint.
    pub declaration_fingerprint: Fingerprint,
    /// The worker bundle verified for it.
    pub worker_bundle_sha256: Sha256Hex,
    /// The frozen Telegram head, once known.
    pub frozen_head_seq: Option<u64>,
}

impl Payload for ActivationStep {
    const TYPE: &'static str = "stream.system.activation.step";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::System;
    const SENSITIVE: bool = false;

    fn identity_key(&self) -> serde_json::Value {
        json!([self.activation_id, self.step])
    }
}
