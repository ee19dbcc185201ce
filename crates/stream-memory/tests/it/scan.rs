//! The filesystem connector against real files and a real store.

use std::os::unix::fs::symlink;

use stream_core::canon::sha256;
use stream_core::ids::{derive_document_id, derive_version_id};
use stream_core::payload::FileChanged;
use stream_core::text::{BoundedText, Label};
use stream_core::{Authorship, NewEvent, SourceName};
use stream_memory::scan::{ScanError, ScanLimits, scan, scan_with_limits};
use stream_store::{EventQuery, Read, Store};
use stream_testkit::canary::Canary;

use crate::common::{Fixture, context_source};

const MEMORY: &str = "---\nid: memory-1\n---\n# Memory\n\nLikes tea.\n";

fn events(f: &Fixture) -> Vec<stream_core::StoredEvent> {
    f.store
        .events(&EventQuery::source_after(&context_source(), 0))
        .unwrap()
}

#[test]
fn first_scan_records_document_version_pointer_and_event() {
    let f = Fixture::new();
    f.write("memory.md", MEMORY);
    let report = scan(&f.store, &context_source(), &f.root()).unwrap();
    assert_eq!((report.files, report.unchanged, report.missing), (1, 0, 0));
    assert_eq!(report.skipped.total(), 0);
    let [v] = report.new_versions.as_slice() else {
        panic!("{report:?}")
    };

    let doc_id = derive_document_id(SourceName::CONTEXT, "memory.md").unwrap();
    assert_eq!(v.document_id, doc_id);
    assert_eq!(v.path, "memory.md");
    assert_eq!(v.sha256, sha256(MEMORY.as_bytes()));
    assert_eq!(v.size, MEMORY.len() as u64);
    assert_eq!(v.previous_version_id, None);
    assert_eq!(
        v.version_id,
        derive_version_id(&doc_id, &v.sha256, None).unwrap()
    );

    let doc = f.store.document(&doc_id).unwrap().unwrap();
    assert_eq!(doc.path, "memory.md");
    assert_eq!(doc.source, context_source());
    assert_eq!(doc.current_version.as_ref(), Some(&v.version_id));
    let row = f.store.version(&v.version_id).unwrap().unwrap();
    assert_eq!(row.content_type, "text/markdown");
    assert_eq!(row.size, MEMORY.len() as u64);
    assert_eq!(
        f.store.blob(&row.sha256).unwrap().unwrap(),
        MEMORY.as_bytes()
    );

    let [event] = events(&f).try_into().unwrap();
    assert_eq!(event.id(), &v.event_id);
    assert_eq!(event.event.authorship, Authorship::System);
    assert!(event.event.sensitive);
    assert_eq!(
        (event.event.root.as_ref(), event.event.parent.as_ref()),
        (None, None)
    );
    let payload: FileChanged = event.decode().unwrap();
    assert_eq!(payload.document_id, doc_id);
    assert_eq!(payload.version_id, v.version_id);
    assert_eq!(payload.path.as_str(), "memory.md");
    assert_eq!(payload.content_type.as_str(), "text/markdown");
}

#[test]
fn second_scan_of_unchanged_files_writes_nothing() {
    let f = Fixture::new();
    f.write("memory.md", MEMORY);
    f.write("notes/plants.md", "---\nid: plants\n---\nTomatoes.\n");
    let first = scan(&f.store, &context_source(), &f.root()).unwrap();
    assert_eq!(first.new_versions.len(), 2);
    let head = f.store.source_head(&context_source()).unwrap();
    let files = f.store_files();

    let second = scan(&f.store, &context_source(), &f.root()).unwrap();
    assert_eq!((second.files, second.unchanged), (2, 2));
    assert!(second.new_versions.is_empty(), "{second:?}");
    assert_eq!(f.store.source_head(&context_source()).unwrap(), head);
    assert_eq!(f.store_files(), files, "the store file or its WAL changed");
}

#[test]
fn an_edit_makes_exactly_one_new_version() {
    let f = Fixture::new();
    f.write("memory.md", MEMORY);
    f.write("other.md", "unchanged\n");
    let first = scan(&f.store, &context_source(), &f.root()).unwrap();
    let old = first
        .new_versions
        .iter()
        .find(|v| v.path == "memory.md")
        .unwrap()
        .clone();

    let edited = format!("{MEMORY}Likes green tea.\n");
    f.write("memory.md", &edited);
    let report = scan(&f.store, &context_source(), &f.root()).unwrap();
    assert_eq!(report.unchanged, 1);
    let [new] = report.new_versions.as_slice() else {
        panic!("{report:?}")
    };
    assert_eq!(new.document_id, old.document_id);
    assert_eq!(new.previous_version_id.as_ref(), Some(&old.version_id));
    assert_ne!(new.version_id, old.version_id);
    assert_eq!(events(&f).len(), 3);
    let doc = f.store.document(&old.document_id).unwrap().unwrap();
    assert_eq!(doc.current_version.as_ref(), Some(&new.version_id));
    // The old version is immutable and still readable.
    let old_row = f.store.version(&old.version_id).unwrap().unwrap();
    assert_eq!(
        f.store.blob(&old_row.sha256).unwrap().unwrap(),
        MEMORY.as_bytes()
    );
    let payload: FileChanged = events(&f).last().unwrap().decode().unwrap();
    assert_eq!(payload.previous_version_id.as_ref(), Some(&old.version_id));

    // Reverting is a change too: a third version, not the first one again.
    f.write("memory.md", MEMORY);
    let report = scan(&f.store, &context_source(), &f.root()).unwrap();
    let [reverted] = report.new_versions.as_slice() else {
        panic!("{report:?}")
    };
    assert_ne!(reverted.version_id, old.version_id);
    assert_eq!(reverted.previous_version_id.as_ref(), Some(&new.version_id));
}

#[test]
fn symlinks_are_skipped_never_followed_even_out_of_the_root() {
    let f = Fixture::new();
    let canary = Canary::new("outside");
    let outside = f.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.md"), canary.as_str()).unwrap();
    f.write("memory.md", MEMORY);
    symlink(&outside, f.root().join("linked-dir")).unwrap();
    symlink(outside.join("secret.md"), f.root().join("secret.md")).unwrap();
    symlink("../outside/secret.md", f.root().join("relative.md")).unwrap();
    symlink(f.root().join("memory.md"), f.root().join("alias.md")).unwrap();
    symlink("nowhere", f.root().join("dangling.md")).unwrap();

    let report = scan(&f.store, &context_source(), &f.root()).unwrap();
    assert_eq!(report.skipped.symlinks, 5, "{report:?}");
    assert_eq!(report.files, 1);
    let docs = f.store.documents(&context_source()).unwrap();
    let paths: Vec<_> = docs.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(paths, ["memory.md"]);
    assert!(
        f.store
            .blob(&sha256(canary.as_str().as_bytes()))
            .unwrap()
            .is_none(),
        "content from outside the root was stored"
    );
}

#[test]
fn special_files_are_skipped_and_never_opened() {
    let f = Fixture::new();
    f.write("memory.md", MEMORY);
    // A FIFO: opening it for reading without O_NONBLOCK would hang the scan.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.root().join("pipe.md"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        0,
    )
    .unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(f.root().join("sock.md")).unwrap();
    let report = scan(&f.store, &context_source(), &f.root()).unwrap();
    assert_eq!(report.skipped.special, 2, "{report:?}");
    assert_eq!(report.files, 1);
    assert_eq!(report.new_versions.len(), 1);
}

#[test]
fn the_root_must_be_a_real_directory() {
    let f = Fixture::new();
    f.write("memory.md", MEMORY);
    let link = f.dir.path().join("link-to-context");
    symlink(f.root(), &link).unwrap();
    assert!(matches!(
        scan(&f.store, &context_source(), &link),
        Err(ScanError::RootIsSymlink)
    ));
    let file = f.root().join("memory.md");
    assert!(matches!(
        scan(&f.store, &context_source(), &file),
        Err(ScanError::RootNotADirectory)
    ));
    assert!(matches!(
        scan(&f.store, &context_source(), &f.dir.path().join("absent")),
        Err(ScanError::RootMissing)
    ));
    assert_eq!(f.store.source_head(&context_source()).unwrap(), 0);
    assert!(f.store.documents(&context_source()).unwrap().is_empty());
}

#[test]
fn nested_hidden_deep_and_large_entries() {
    let f = Fixture::new();
    f.write("memory.md", MEMORY);
    f.write("notes/garden/plan.md", "beds\n");
    f.write(".memory.md.tmp", "half-written\n");
    f.write(".git/config", "[core]\n");
    f.write("big.md", &"x".repeat(101));
    f.write("a/b/c/d.md", "deep\n");
    let limits = ScanLimits {
        max_file_bytes: 100,
        max_depth: 2,
        ..ScanLimits::default()
    };
    let report = scan_with_limits(&f.store, &context_source(), &f.root(), &limits).unwrap();
    let paths: Vec<_> = report
        .new_versions
        .iter()
        .map(|v| v.path.as_str())
        .collect();
    assert_eq!(paths, ["memory.md", "notes/garden/plan.md"]);
    assert_eq!(report.skipped.hidden, 2);
    assert_eq!(report.skipped.too_large, 1);
    assert_eq!(report.skipped.too_deep, 1);
}

#[test]
fn unusable_names_are_skipped() {
    use std::os::unix::ffi::OsStrExt;
    let f = Fixture::new();
    let name = std::ffi::OsStr::from_bytes(b"bad-\xff.md");
    std::fs::write(f.root().join(name), "x").unwrap();
    std::fs::write(f.root().join("new\nline.md"), "x").unwrap();
    let report = scan(&f.store, &context_source(), &f.root()).unwrap();
    assert_eq!(report.skipped.unnamed, 2, "{report:?}");
    assert_eq!(report.files, 0);
}

#[test]
fn a_deleted_file_keeps_its_last_version_and_is_counted_missing() {
    let f = Fixture::new();
    f.write("memory.md", MEMORY);
    let first = scan(&f.store, &context_source(), &f.root()).unwrap();
    let v1 = first.new_versions[0].clone();
    std::fs::remove_file(f.root().join("memory.md")).unwrap();
    let files = f.store_files();

    let report = scan(&f.store, &context_source(), &f.root()).unwrap();
    assert_eq!((report.files, report.missing), (0, 1));
    assert!(report.new_versions.is_empty());
    assert_eq!(f.store_files(), files);
    let doc = f.store.document(&v1.document_id).unwrap().unwrap();
    assert_eq!(doc.current_version.as_ref(), Some(&v1.version_id));

    // Restored with the same bytes: nothing new. With other bytes: a version.
    f.write("memory.md", MEMORY);
    let report = scan(&f.store, &context_source(), &f.root()).unwrap();
    assert_eq!((report.unchanged, report.missing), (1, 0));
    f.write("memory.md", "---\nid: memory-1\n---\nnew\n");
    let report = scan(&f.store, &context_source(), &f.root()).unwrap();
    assert_eq!(
        report.new_versions[0].previous_version_id.as_ref(),
        Some(&v1.version_id)
    );
}

#[test]
fn one_transaction_per_scan_so_a_conflict_writes_nothing() {
    let f = Fixture::new();
    f.write("a.md", "first file\n");
    f.write("b.md", "second file\n");
    // Plant a different event under the id b.md's first version will need.
    let source = context_source();
    let doc_b = derive_document_id(SourceName::CONTEXT, "b.md").unwrap();
    let sha_b = sha256(b"second file\n");
    let version_b = derive_version_id(&doc_b, &sha_b, None).unwrap();
    let forged = FileChanged {
        document_id: doc_b,
        path: BoundedText::new("b.md").unwrap(),
        version_id: version_b,
        previous_version_id: None,
        sha256: sha_b,
        size: 999,
        content_type: Label::new("text/markdown").unwrap(),
    };
    f.store
        .append(&NewEvent::build(&source, None, None, &forged).unwrap())
        .unwrap();

    let err = scan(&f.store, &source, &f.root()).unwrap_err();
    assert!(
        matches!(
            err,
            ScanError::Store(stream_store::StoreError::Conflict { .. })
        ),
        "{err}"
    );
    // a.md, scanned first, was not committed either.
    assert!(f.store.documents(&source).unwrap().is_empty());
    assert_eq!(f.store.source_head(&source).unwrap(), 1);
    assert!(f.store.blob(&sha256(b"first file\n")).unwrap().is_none());
}

#[test]
fn scan_errors_and_reports_never_show_content() {
    let f = Fixture::new();
    let canary = Canary::new("memory");
    f.write("memory.md", &format!("---\nid: m\n---\n{canary}\n"));
    let report = scan(&f.store, &context_source(), &f.root()).unwrap();
    assert!(!canary.found_in(&format!("{report:?}")));
    let err = scan(&f.store, &context_source(), &f.root().join("memory.md")).unwrap_err();
    assert!(!canary.found_in(&format!("{err} {err:?}")));
}

#[test]
fn only_filesystem_sources_are_scanned() {
    let f = Fixture::new();
    let err = scan(&f.store, &SourceName::new("telegram:1").unwrap(), &f.root()).unwrap_err();
    assert!(
        matches!(err, ScanError::NotAFilesystemSource { .. }),
        "{err}"
    );
}
