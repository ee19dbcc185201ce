//! The read-only inspector: pages where the owner sees what the model saw,
//! proposed and was told, exactly as it was stored, sent or would be
//! applied, and a live tail of new events.
//!
//! Read [`router`] and [`access`] first. Every request passes one gate
//! ([`access::gate`]: `Host`, `Sec-Fetch-Site`, GET/HEAD only, the token
//! exchanged once for an `HttpOnly; SameSite=Strict` cookie) and every
//! response carries a strict Content-Security-Policy. Pages are rendered on
//! the server from the same view models the terminal renders
//! (`stream_proposals::review`, `stream_memory::review` and `blame`), every
//! untrusted text through [`html::Untrusted`]; the turn page's request body
//! is rebuilt from the stored snapshot by the functions the parent sends
//! with (`stream_context::packet::build`, `stream_provider::request_body`).
//!
//! The inspector cannot write: it holds an [`InspectStore`], which is only
//! `Read` (no transaction can be begun through it), it never touches the
//! context root, and it holds no Telegram token or provider key. Sensitive
//! text is shown on the page (the page is the owner's) and never logged.

#![deny(missing_docs)]

pub mod access;
mod error;
pub mod html;
mod live;
mod pages;
mod turn;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::get;
use stream_core::payload::ProviderApi;
use stream_protocol::ProviderCompat;
use stream_store::{Read, StoreError, StoreUsage};

pub use access::{Access, Token};
pub use error::PageError;

/// A store the inspector can read and watch, and nothing more.
pub trait InspectStore: Read + Send {
    /// Moves whenever another connection commits.
    fn data_version(&self) -> Result<u64, StoreError>;
    /// The store's size and its bytes by kind.
    fn usage(&self) -> Result<StoreUsage, StoreError>;
}

impl InspectStore for stream_store::ReadOnlyStore {
    fn data_version(&self) -> Result<u64, StoreError> {
        stream_store::ReadOnlyStore::data_version(self)
    }
    fn usage(&self) -> Result<StoreUsage, StoreError> {
        stream_store::ReadOnlyStore::usage(self)
    }
}

/// What the health strip says of `serve`, read from rows this crate does not
/// own (the engine's consumer status, the delivery outbox): the caller that
/// links those crates computes it.
#[derive(Debug, Clone, Default)]
pub struct Serving {
    /// `running (pid 123)`, `not running`, …
    pub serve: String,
    /// The active declaration, `id v3`.
    pub active: Option<String>,
    /// The worker bundle the running serve reported.
    pub worker_bundle: Option<String>,
    /// Outputs waiting for delivery.
    pub deliveries_pending: Option<u64>,
}

/// Computes [`Serving`] from the store.
pub type ServingProbe = fn(&dyn Read) -> Serving;

fn unknown_serving(_: &dyn Read) -> Serving {
    Serving {
        serve: "unknown".to_owned(),
        ..Serving::default()
    }
}

/// What the inspector knows besides the store.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `[provider] compat` of the config: a request body is rebuilt with it,
    /// as `serve` built it.
    pub compat: ProviderCompat,
    /// `[provider] api` and `model` of the config, for a run that recorded
    /// none (it never completed).
    pub provider: Option<(ProviderApi, String)>,
    /// The config's conversation declaration, loaded from its file: a run
    /// whose snapshot names its fingerprint and whose declaration files are
    /// not installed in the store (a first install by `serve`) is rebuilt
    /// with it.
    pub declaration: Option<Arc<stream_declarations::LoadedDeclaration>>,
    /// The keys whose decisions count (`[authority] keys`): a decision
    /// signed by another shows as `unauthorized`, as `proposal-list` shows it.
    pub trusted: stream_proposals::authority::TrustedKeys,
    /// The health strip's view of `serve`.
    pub probe: ServingProbe,
    /// At most this many live streams at once.
    pub max_streams: usize,
    /// How often the store is polled for new commits.
    pub poll: std::time::Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            compat: ProviderCompat::Openai,
            provider: None,
            declaration: None,
            trusted: stream_proposals::authority::TrustedKeys::default(),
            probe: unknown_serving,
            max_streams: 32,
            poll: std::time::Duration::from_millis(200),
        }
    }
}

/// The inspector's state, shared by every request.
pub struct App {
    access: Access,
    store: Mutex<Box<dyn InspectStore>>,
    settings: Settings,
    live: live::Hub,
    /// The store's size (events, bytes), measured in the background: it
    /// takes aggregate queries over every blob (1.5 s on 10^5 events).
    usage: Mutex<Option<(u64, u64)>>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App").finish_non_exhaustive()
    }
}

impl App {
    /// An inspector over `store`, admitting what `access` admits.
    pub fn new(access: Access, store: Box<dyn InspectStore>, settings: Settings) -> Arc<Self> {
        let live = live::Hub::new(settings.max_streams);
        Arc::new(Self {
            access,
            store: Mutex::new(store),
            settings,
            live,
            usage: Mutex::new(None),
        })
    }

    /// Runs `f` over the store on a blocking thread.
    async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T, PageError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn InspectStore, &Settings) -> Result<T, PageError> + Send + 'static,
    {
        let app = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let store = app.store.lock().map_err(|_| PageError::Poisoned)?;
            f(store.as_ref(), &app.settings)
        })
        .await
        .map_err(|_| PageError::Poisoned)?
    }
}

/// Every route, behind the gate.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(pages::now))
        .route("/conversation", get(pages::conversation))
        .route("/turns/{run}", get(pages::turn))
        .route("/proposals", get(pages::proposals))
        .route("/proposals/{id}", get(pages::proposal))
        .route("/memory", get(pages::memory))
        .route("/exports", get(pages::exports))
        .route("/events/stream", get(live::stream))
        .route("/assets/inspect.css", get(pages::css))
        .route("/assets/live.js", get(pages::script))
        .fallback(pages::not_found)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            access::gate,
        ))
        .with_state(app)
}

/// Serves `app` on `listener` until `shutdown` completes; the live hub polls
/// the store meanwhile.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let watcher = tokio::spawn(live::watch(Arc::clone(&app)));
    // Live streams never end by themselves: close them, or the graceful
    // shutdown would wait for them forever.
    let closing = Arc::clone(&app);
    let shutdown = async move {
        shutdown.await;
        closing.live.close();
    };
    let served = axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await;
    watcher.abort();
    served
}
