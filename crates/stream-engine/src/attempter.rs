//! The seam around one attempt: the engine asks an [`Attempter`] to run a
//! packet and judges what comes back itself. [`Broker`] is the production
//! one; in-process tests give a scripted one, so that routing, retries,
//! backoff and `follow` are table-tested without a worker or a provider.

use std::future::Future;
use std::pin::Pin;

use stream_broker::{AttemptError, AttemptReport, Broker};
use stream_context::packet::Packet;
use stream_core::Sha256Hex;

/// What one attempt returns.
pub type AttemptFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AttemptReport, AttemptError>> + Send + 'a>>;

/// Makes what an attempt stands on durable (the run's snapshot, on its
/// first attempt): `true` once it is, `false` if it could not be. No
/// provider request may leave before it resolves `true`.
pub type Durable<'a> = Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// Runs attempts for the engine.
pub trait Attempter: Send + Sync {
    /// The bundle id of the worker every attempt runs (receipts name it).
    fn worker_sha256(&self) -> &Sha256Hex;
    /// Runs one attempt of `packet`, its request held until `durable`
    /// resolves `true` (on `false`: [`AttemptError::Withheld`], nothing sent).
    fn run_attempt<'a>(&'a self, packet: &'a Packet, durable: Durable<'a>) -> AttemptFuture<'a>;
    /// A turn's reply is out: a good moment to make the next spare worker
    /// (nothing for an attempter without one).
    fn prepare_spare(&self);
}

impl Attempter for Broker {
    fn worker_sha256(&self) -> &Sha256Hex {
        Broker::worker_sha256(self)
    }

    fn run_attempt<'a>(&'a self, packet: &'a Packet, durable: Durable<'a>) -> AttemptFuture<'a> {
        Box::pin(Broker::run_attempt_after(self, packet, durable))
    }

    fn prepare_spare(&self) {
        Broker::prepare_spare(self);
    }
}
