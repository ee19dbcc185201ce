//! The `memory.md` frontmatter parser: arbitrary documents never panic, and
//! whatever parses has a nonempty id and starts with the `---` fence.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stream_memory::frontmatter::parse_bytes;

fuzz_target!(|data: &[u8]| {
    if let Ok(front) = parse_bytes(data) {
        assert!(!front.id().is_empty());
        assert!(data.starts_with(b"---"));
    }
});
