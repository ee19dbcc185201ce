//! The provider check's second half for local servers (`[provider] compat`
//! `llama-cpp`, `ollama`, `vllm`): one minimal chat request carrying the real
//! tool schemas, built as a worker's is, so a server that lists its models
//! but refuses every turn (llama-server without `--jinja`) fails here rather
//! than on the owner's first message. In `openai` mode no such request is
//! made: doctor spends no tokens of a paid provider.

use stream_core::RunId;
use stream_core::payload::{ProposalKind, ProviderApi};
use stream_engine::ProviderCompat;
use stream_protocol::{Capability, HistoryMessage, OutputMode, Packet, Protocol, ProviderSpec};

use super::{Check, fail, ok};
use crate::config::Config;

/// The output tokens the probe may spend.
const PROBE_MAX_TOKENS: u32 = 8;

/// Whether `compat` names a local server doctor may spend tokens on.
fn spends_tokens(compat: ProviderCompat) -> bool {
    match compat {
        ProviderCompat::LlamaCpp | ProviderCompat::Ollama | ProviderCompat::Vllm => true,
        ProviderCompat::Openai => false,
    }
}

/// The tiny packet: one short user turn, the three proposal tools.
fn probe_packet(config: &Config, api: ProviderApi) -> Packet {
    Packet {
        protocol: Protocol,
        run_id: RunId::from_bytes([0; 32]),
        attempt: 1,
        provider: ProviderSpec {
            api,
            model: config.provider.model.clone(),
            max_output_tokens: PROBE_MAX_TOKENS,
            compat: config.provider.compat,
        },
        system: "Answer with one word.".into(),
        history: Vec::new(),
        user: HistoryMessage::User {
            text: Some("Say ok.".into()),
            image: None,
        },
        tools: ProposalKind::ALL
            .into_iter()
            .map(stream_declarations::tool_def)
            .collect(),
        capability: Capability {
            memory_target: true,
            correction_targets: Vec::new(),
            evidence_ids: Vec::new(),
            max_calls: 3,
        },
        output_mode: OutputMode::Text,
    }
}

/// The chat check, or `None` when the compat mode spends no tokens.
pub(super) async fn check(
    config: &Config,
    api: ProviderApi,
    broker_config: &stream_broker::BrokerConfig,
) -> Option<Check> {
    if !spends_tokens(config.provider.compat) {
        return None;
    }
    let packet = probe_packet(config, api);
    Some(
        match stream_broker::chat_probe(broker_config, &packet).await {
            Ok((status @ 200..=299, _)) => ok(
                "provider",
                format!("a chat request with the three tools answered {status}"),
            ),
            Ok((status, body)) => {
                let hint = stream_provider::unsupported_request(&body).map_or(
                    "read the server's log; see docs/providers.md for its flags",
                    stream_provider::Unsupported::hint,
                );
                fail(
                    "provider",
                    format!(
                        "a chat request with the three tools answered {status}: {}",
                        stream_provider::provider_words(&body)
                    ),
                    hint,
                )
            }
            Err(e) => fail(
                "provider",
                format!("a chat request with the three tools failed: {e}"),
                "is the server running at provider.base_url, and reachable from here?",
            ),
        },
    )
}
