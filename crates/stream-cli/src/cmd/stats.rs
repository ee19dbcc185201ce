//! `thestream events --stats`: the store's size, its event count and its
//! bytes by kind (events, snapshot parts, photos, documents, other blobs),
//! so an operator sees growth before the disk fills. Counts only: no content.

use std::collections::BTreeMap;
use std::io::Write as _;

use anyhow::anyhow;
use serde_json::json;
use stream_core::Payload as _;
use stream_core::payload::MessageReceived;
use stream_store::{EventQuery, Read};

use crate::exit::{CmdResult, Failure};
use crate::store::OpenedStore;

/// Bytes of distinct photos named by stored owner messages.
fn photo_bytes(store: &dyn Read) -> Result<(u64, u64), Failure> {
    let mut photos = BTreeMap::new();
    for e in store.events(&EventQuery::of_type(MessageReceived::TYPE))? {
        // A message that does not decode is counted nowhere rather than
        // failing the report.
        if let Ok(m) = serde_json::from_slice::<MessageReceived>(&e.event.payload)
            && let Some(p) = m.photo
        {
            photos.insert(p.blob_sha256, p.size);
        }
    }
    Ok((photos.len() as u64, photos.values().sum()))
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = "B";
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    if unit == "B" {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {unit}")
    }
}

/// Prints the report; `json` as one object.
pub fn print(store: &OpenedStore, json: bool) -> CmdResult {
    let u = store.usage()?;
    let (photos, photo_bytes) = photo_bytes(store)?;
    let other_blobs = u.other_blobs.saturating_sub(photos);
    let other_bytes = u.other_blob_bytes.saturating_sub(photo_bytes);
    let mut out = std::io::stdout().lock();
    let text = if json {
        json!({
            "storeBytes": u.file_bytes,
            "events": u.events,
            "snapshots": u.snapshots,
            "bytes": {
                "events": u.event_bytes,
                "snapshotParts": u.snapshot_part_bytes,
                "photos": photo_bytes,
                "documents": u.document_bytes,
                "other": other_bytes,
            },
            "counts": {
                "snapshotParts": u.snapshot_parts,
                "photos": photos,
                "documents": u.document_blobs,
                "other": other_blobs,
            },
        })
        .to_string()
    } else {
        let rows = [
            ("events", u.events, u.event_bytes),
            ("snapshot parts", u.snapshot_parts, u.snapshot_part_bytes),
            ("photos", photos, photo_bytes),
            ("documents", u.document_blobs, u.document_bytes),
            ("other blobs", other_blobs, other_bytes),
        ];
        let mut text = format!(
            "store {} ({} bytes, write-ahead log included), {} events, {} snapshots\n",
            human(u.file_bytes),
            u.file_bytes,
            u.events,
            u.snapshots
        );
        for (kind, count, bytes) in rows {
            text.push_str(&format!("  {kind:<15} {count:>8}  {:>10}\n", human(bytes)));
        }
        text.trim_end().to_owned()
    };
    writeln!(out, "{text}").map_err(|e| Failure::runtime(anyhow!("stdout: {e}")))
}
