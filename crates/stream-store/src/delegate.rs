//! [`delegate_read!`](crate::delegate_read): the one forwarding of every
//! [`Read`](crate::Read) method, for store wrappers (the fault injector, the
//! commit-signalling store of `serve`) that change writes, not reads.

/// Implements [`Read`](crate::Read) for a wrapper by forwarding every method
/// to `$inner` (an expression over the binding `$s`, which is `self`):
/// `delegate_read!([S: Store] Wrapper<S>, s => s.inner);`. A new `Read`
/// method is then added here once, not in every wrapper.
///
/// A wrapper that watches event queries (a test counting them) gives
/// `events` its own body, over `$s` and the query `$q`:
/// `delegate_read!([] Counting, s => s.inner, events(q) => { …; s.inner.events(q) });`.
#[macro_export]
macro_rules! delegate_read {
    ([$($generics:tt)*] $t:ty, $s:ident => $inner:expr) => {
        $crate::delegate_read!([$($generics)*] $t, $s => $inner, events(q) => $inner.events(q));
    };
    ([$($generics:tt)*] $t:ty, $s:ident => $inner:expr, events($q:ident) => $events:expr) => {
        impl<$($generics)*> $crate::Read for $t {
            fn event(
                &self,
                id: &$crate::__private::stream_core::EventId,
            ) -> Result<Option<$crate::__private::stream_core::StoredEvent>, $crate::StoreError> {
                let $s = self;
                $inner.event(id)
            }
            fn events(
                &self,
                $q: &$crate::EventQuery,
            ) -> Result<Vec<$crate::__private::stream_core::StoredEvent>, $crate::StoreError> {
                let $s = self;
                $events
            }
            fn source_head(&self, source: &$crate::__private::stream_core::SourceName) -> Result<u64, $crate::StoreError> {
                let $s = self;
                $inner.source_head(source)
            }
            fn sources(&self) -> Result<Vec<$crate::__private::stream_core::SourceName>, $crate::StoreError> {
                let $s = self;
                $inner.sources()
            }
            fn run(
                &self,
                id: &$crate::__private::stream_core::RunId,
            ) -> Result<Option<$crate::RunRow>, $crate::StoreError> {
                let $s = self;
                $inner.run(id)
            }
            fn runs_with_status(
                &self,
                status: $crate::RunStatus,
            ) -> Result<Vec<$crate::RunRow>, $crate::StoreError> {
                let $s = self;
                $inner.runs_with_status(status)
            }
            fn progress(&self, consumer: &str) -> Result<Option<$crate::Progress>, $crate::StoreError> {
                let $s = self;
                $inner.progress(consumer)
            }
            fn control(&self, key: &str) -> Result<Option<$crate::__private::serde_json::Value>, $crate::StoreError> {
                let $s = self;
                $inner.control(key)
            }
            fn document(
                &self,
                id: &$crate::__private::stream_core::DocumentId,
            ) -> Result<Option<$crate::DocumentRow>, $crate::StoreError> {
                let $s = self;
                $inner.document(id)
            }
            fn documents(
                &self,
                source: &$crate::__private::stream_core::SourceName,
            ) -> Result<Vec<$crate::DocumentRow>, $crate::StoreError> {
                let $s = self;
                $inner.documents(source)
            }
            fn version(
                &self,
                id: &$crate::__private::stream_core::VersionId,
            ) -> Result<Option<$crate::VersionRow>, $crate::StoreError> {
                let $s = self;
                $inner.version(id)
            }
            fn blob(&self, sha256: &$crate::__private::stream_core::Sha256Hex) -> Result<Option<Vec<u8>>, $crate::StoreError> {
                let $s = self;
                $inner.blob(sha256)
            }
            fn snapshot(
                &self,
                id: &$crate::__private::stream_core::SnapshotId,
            ) -> Result<Option<$crate::SnapshotBytes>, $crate::StoreError> {
                let $s = self;
                $inner.snapshot(id)
            }
            fn events_after_position(
                &self,
                after: u64,
                limit: usize,
            ) -> Result<Vec<$crate::PositionedEvent>, $crate::StoreError> {
                let $s = self;
                $inner.events_after_position(after, limit)
            }
            fn last_position(&self) -> Result<u64, $crate::StoreError> {
                let $s = self;
                $inner.last_position()
            }
        }
    };
}
