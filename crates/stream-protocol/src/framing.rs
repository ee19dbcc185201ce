//! Bounded JSON-lines framing: a frame is one line of at most
//! [`MAX_FRAME_BYTES`](crate::MAX_FRAME_BYTES), read without ever buffering
//! more than the cap.

use std::io::{BufRead, Write};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A frame could not be written or read. Content-dark: never carries frame text.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer closed the stream.
    #[error("stream closed")]
    Closed,
    /// A line exceeded the cap.
    #[error("frame larger than {cap} bytes")]
    Oversized {
        /// The cap.
        cap: usize,
    },
    /// The line was not a valid frame of the expected direction.
    #[error("malformed frame")]
    Malformed,
    /// Reading or writing failed.
    #[error("frame i/o failed: {0}")]
    Io(std::io::ErrorKind),
}

/// Writes one frame and a newline, refusing frames over `cap`.
pub fn write_frame<W: Write, T: Serialize>(
    w: &mut W,
    frame: &T,
    cap: usize,
) -> Result<(), FrameError> {
    let mut line = serde_json::to_vec(frame).map_err(|_| FrameError::Malformed)?;
    line.push(b'\n');
    if line.len() > cap {
        return Err(FrameError::Oversized { cap });
    }
    w.write_all(&line)
        .and_then(|()| w.flush())
        .map_err(|e| FrameError::Io(e.kind()))
}

/// Reads one line of at most `cap` bytes (newline included), without
/// buffering more than that.
pub fn read_line<R: BufRead>(r: &mut R, cap: usize) -> Result<Vec<u8>, FrameError> {
    let mut line = Vec::new();
    loop {
        let available = match r.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FrameError::Io(e.kind())),
        };
        if available.is_empty() {
            return Err(FrameError::Closed);
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        if line.len() + chunk.len() > cap {
            return Err(FrameError::Oversized { cap });
        }
        line.extend_from_slice(chunk);
        let used = chunk.len();
        r.consume(used);
        if done {
            line.pop();
            return Ok(line);
        }
    }
}

/// Parses one frame line.
pub fn parse_frame<T: DeserializeOwned>(line: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(line).map_err(|_| FrameError::Malformed)
}

/// Reads and parses one frame.
pub fn read_frame<R: BufRead, T: DeserializeOwned>(r: &mut R, cap: usize) -> Result<T, FrameError> {
    parse_frame(&read_line(r, cap)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn reads_lines_and_refuses_oversized_ones() {
        let mut r = Cursor::new(b"{\"a\":1}\n0123456789\n".to_vec());
        assert_eq!(read_line(&mut r, 16).unwrap(), b"{\"a\":1}");
        assert!(matches!(
            read_line(&mut r, 8),
            Err(FrameError::Oversized { cap: 8 })
        ));
    }

    #[test]
    fn a_stream_ending_mid_line_is_closed() {
        let mut r = Cursor::new(b"{\"a\"".to_vec());
        assert!(matches!(read_line(&mut r, 64), Err(FrameError::Closed)));
    }

    #[test]
    fn write_refuses_oversized_frames() {
        let mut out = Vec::new();
        assert!(matches!(
            write_frame(&mut out, &"x".repeat(100), 50),
            Err(FrameError::Oversized { cap: 50 })
        ));
        assert!(out.is_empty());
    }
}
