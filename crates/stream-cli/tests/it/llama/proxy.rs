//! A recording HTTP proxy between `thestream` and llama-server: each
//! exchange (path, request body, response status and body, round trip) is
//! kept, so a test reads the exact request the parent sent and the
//! server's `timings`. One request per connection (`Connection: close`).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One request and its answer, as they crossed the proxy.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub path: String,
    pub request: Value,
    pub status: u16,
    pub response: Value,
    pub round_trip: Duration,
}

pub struct Proxy {
    port: u16,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`
    /// (`http://127.0.0.1:PORT`).
    pub fn start(upstream: &str) -> Self {
        let upstream = upstream
            .strip_prefix("http://")
            .unwrap()
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let exchanges = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (kept, stopped) = (exchanges.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let (kept, upstream) = (kept.clone(), upstream.clone());
                std::thread::spawn(move || {
                    if let Some(exchange) = forward(client, &upstream) {
                        kept.lock().unwrap().push(exchange);
                    }
                });
            }
        });
        Self {
            port,
            exchanges,
            stop,
        }
    }

    /// The `base_url` to configure (`…/v1`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every chat completion exchange so far, in order.
    pub fn chats(&self) -> Vec<Exchange> {
        self.exchanges
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.path.ends_with("/chat/completions"))
            .cloned()
            .collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Reads an HTTP message's head and (Content-Length) body from `stream`.
fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length = header(&head, "content-length").map_or(0, |v| v.parse().unwrap_or(0));
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((head, buf[head_end..head_end + length].to_vec()))
}

fn forward(mut client: TcpStream, upstream: &str) -> Option<Exchange> {
    let (head, body) = read_request(&mut client)?;
    let path = head.split_whitespace().nth(1)?.to_owned();
    let mut lines: Vec<&str> = head
        .trim_end()
        .lines()
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .collect();
    lines.push("Connection: close");
    let started = Instant::now();
    let mut server = TcpStream::connect(upstream).ok()?;
    server
        .set_read_timeout(Some(Duration::from_secs(1800)))
        .ok()?;
    server
        .write_all(format!("{}\r\n\r\n", lines.join("\r\n")).as_bytes())
        .ok()?;
    server.write_all(&body).ok()?;
    let mut response = Vec::new();
    server.read_to_end(&mut response).ok()?;
    let round_trip = started.elapsed();
    client.write_all(&response).ok()?;
    let _ = client.shutdown(Shutdown::Both);

    let split = find(&response, b"\r\n\r\n")? + 4;
    let response_head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status = response_head.split_whitespace().nth(1)?.parse().ok()?;
    let mut response_body = response[split..].to_vec();
    if header(&response_head, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        response_body = dechunk(&response_body);
    }
    Some(Exchange {
        path,
        request: serde_json::from_slice(&body).unwrap_or(Value::Null),
        status,
        response: serde_json::from_slice(&response_body).unwrap_or(Value::Null),
        round_trip,
    })
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(i) = find(body, b"\r\n") {
        let size = std::str::from_utf8(&body[..i])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 || body.len() < i + 2 + size {
            break;
        }
        out.extend_from_slice(&body[i + 2..i + 2 + size]);
        body = &body[(i + 4 + size).min(body.len())..];
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
