//! The stream.sandbox/1 frame parser: bounded line reading and strict frame
//! parsing in both directions never panic, and whatever parses survives a
//! round trip unchanged.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use stream_protocol::framing::{parse_frame, read_frame, write_frame};
use stream_protocol::{ParentFrame, WorkerFrame};

fuzz_target!(|data: &[u8]| {
    let mut cursor = Cursor::new(data);
    while let Ok(frame) = read_frame::<_, ParentFrame>(&mut cursor, 4096) {
        let mut out = Vec::new();
        if write_frame(&mut out, &frame, usize::MAX).is_ok() {
            let back: ParentFrame = read_frame(&mut Cursor::new(out), usize::MAX).unwrap();
            assert_eq!(back, frame);
        }
    }
    if let Ok(frame) = parse_frame::<WorkerFrame>(data) {
        let text = serde_json::to_vec(&frame).unwrap();
        assert_eq!(parse_frame::<WorkerFrame>(&text).unwrap(), frame);
    }
});
