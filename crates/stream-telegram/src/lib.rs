//! The Telegram channel of thestream (docs/design.md §7).
//!
//! Owns: the Bot API client ([`BotApi`]: typed errors, `retry_after`,
//! bounded retries, the token kept out of every log and error); ingress in
//! both modes — long polling ([`run_polling`]) and the webhook server
//! ([`webhook_router`], served by [`serve_webhook`]) — over one [`Ingress`] that admits only the owner's
//! private chat ([`admission`]), parses commands ([`commands`]), downloads
//! photos into blobs and commits `stream.telegram.message.received@1`
//! *before* acknowledging; freeze and resume without loss ([`control`]);
//! the delivery outbox ([`deliver_pending`]) that turns outputs into sent
//! messages and `stream.telegram.delivery.receipt@1`; and the command menu
//! ([`register_menu`]).
//!
//! Read [`Ingress`] and [`deliver_pending`] first.
//!
//! It does not decide what to answer: runs, settlement and `/correct`
//! judgments belong to the engine, which wires these entry points into
//! `thestream serve`.

#![deny(missing_docs)]

pub mod admission;
pub mod client;
pub mod commands;
pub mod control;
pub mod delivery;
pub mod ingress;
pub mod listener;
pub mod menu;
mod offload;
pub mod polling;
pub mod requests;
pub mod split;
pub mod token;
pub mod webhook;
pub mod wire;

pub use admission::{DropReason, Dropped};
pub use client::{ApiError, BotApi, ClientOptions, RetryPolicy};
pub use control::{
    ControlError, INGRESS_CONTROL, IngressMode, IngressState, freeze_ingress, resume_ingress,
};
pub use delivery::{DeliveryError, DeliveryOptions, DeliveryReport, deliver_pending};
pub use ingress::{
    Ack, BotIdentity, Ingress, IngressConfig, IngressError, IngressStats, UpdateOutcome,
};
pub use listener::{ListenerLimits, serve_webhook};
pub use menu::{MenuReport, register_menu};
pub use polling::{PollMode, PollReport, PollingOptions, run_polling};
pub use token::{BotToken, SecretFormatError, WebhookSecret};
pub use webhook::{WebhookOptions, webhook_router};
pub use wire::{MenuCommand, MenuCommandError};
