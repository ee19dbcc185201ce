//! The Telegram update parser (admission, command entities, UTF-16 offsets):
//! arbitrary JSON never panics, and whatever is admitted comes from the
//! owner's own private chat.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stream_telegram::admission::admit;

const OWNER: i64 = 42;

fuzz_target!(|data: &[u8]| {
    let Ok(update) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    if let Ok(admitted) = admit(&update, OWNER, "thestream_bot") {
        assert_eq!(admitted.sender_id, OWNER);
        assert_eq!(admitted.chat_id, OWNER);
    }
});
