//! Why a page could not be shown. Content-dark: ids and reasons only.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A page's failure.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// No such run, proposal or event.
    #[error("not found")]
    NotFound,
    /// The store failed or holds something this build cannot read.
    #[error("store: {0}")]
    Storage(#[from] stream_store::StoreError),
    /// A stored snapshot or declaration did not load.
    #[error("context: {0}")]
    Context(#[from] stream_context::ContextError),
    /// The memory review failed.
    #[error("memory review: {0}")]
    Review(#[from] stream_memory::review::ReviewError),
    /// An export preview failed.
    #[error("export preview: {0}")]
    Export(#[from] stream_export::ExportError),
    /// A worker thread died holding the store.
    #[error("the store's lock is poisoned")]
    Poisoned,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            Self::NotFound => (StatusCode::NOT_FOUND, "404 not found\n").into_response(),
            other => {
                // The errors of this crate carry ids and reasons, never content.
                tracing::warn!(error = %other, "a page failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "500 the page could not be read from the store; the inspector's log says why\n",
                )
                    .into_response()
            }
        }
    }
}
