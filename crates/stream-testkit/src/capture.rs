//! [`Captured`]: a writer whose bytes stay readable through every clone,
//! for capturing a tracing subscriber's logs or a frame stream in process.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes written through any clone, readable through any other.
#[derive(Debug, Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far.
    pub fn bytes(&self) -> Vec<u8> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Everything written so far, as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_clone_writes_to_and_reads_from_the_same_bytes() {
        let captured = Captured::default();
        let mut writer = captured.clone();
        writer.write_all(b"one ").unwrap();
        captured.clone().write_all(b"two").unwrap();
        assert_eq!(captured.bytes(), b"one two");
        assert_eq!(writer.text(), "one two");
    }
}
