//! A running `thestream inspect` and a minimal HTTP/1.1 client over raw TCP:
//! every header (Host, Sec-Fetch-Site, Cookie, Last-Event-ID) is the test's
//! to set, as a hostile page or a rebinding DNS name would set it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::time::Duration;

use stream_testkit::stack::Stack;

/// One HTTP response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `thestream inspect` on a free loopback port, killed when dropped.
pub struct Inspector {
    pub child: Child,
    pub addr: SocketAddr,
    pub token: String,
}

impl Inspector {
    /// Starts it in the stack's home with `env` added to the environment.
    pub fn start_with(s: &Stack, env: &[(&str, &str)]) -> Self {
        let mut command = s.command(&["inspect", "--listen", "127.0.0.1:0"]);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .strip_prefix("inspector: http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .trim_end();
        let (addr, token) = url.split_once("/?token=").unwrap();
        Self {
            child,
            addr: addr.parse().unwrap(),
            token: token.to_owned(),
        }
    }

    pub fn start(s: &Stack) -> Self {
        Self::start_with(s, &[])
    }

    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    pub fn cookie(&self) -> String {
        format!("thestream_inspect={}", self.token)
    }

    /// A request with exactly these headers (`Connection: close` added).
    pub fn raw(&self, method: &str, target: &str, headers: &[(&str, &str)]) -> Response {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut request = format!("{method} {target} HTTP/1.1\r\n");
        for (k, v) in headers {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        request.push_str("Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).unwrap();
        parse(&bytes)
    }

    /// A GET as the owner's browser makes it: right Host, the cookie.
    pub fn get(&self, target: &str) -> Response {
        let host = self.host();
        let cookie = self.cookie();
        self.raw("GET", target, &[("Host", &host), ("Cookie", &cookie)])
    }

    /// A GET that must answer 200 with HTML.
    pub fn page(&self, target: &str) -> String {
        let r = self.get(target);
        assert_eq!(r.status, 200, "{target}: {}", r.body);
        assert!(r.header("content-type").unwrap().starts_with("text/html"));
        r.body
    }

    /// Opens the live stream after `last_event_id` and returns the reader
    /// positioned at the first event.
    pub fn stream(&self, last_event_id: Option<u64>) -> BufReader<TcpStream> {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut request = format!(
            "GET /events/stream HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nAccept: text/event-stream\r\n",
            self.host(),
            self.cookie()
        );
        if let Some(id) = last_event_id {
            request.push_str(&format!("Last-Event-ID: {id}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
        }
        reader
    }

    /// SIGTERM, and the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap()
    }
}

impl Drop for Inspector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The next SSE event's `(id, data)` from a stream (chunked transfer
/// encoding: size lines are skipped).
pub fn next_event(reader: &mut BufReader<TcpStream>) -> (u64, serde_json::Value) {
    let mut id = None;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the stream ended");
        let line = line.trim_end_matches(['\r', '\n']);
        if let Some(v) = line
            .strip_prefix("id: ")
            .or_else(|| line.strip_prefix("id:"))
        {
            id = Some(v.trim().parse().unwrap());
        } else if let Some(v) = line
            .strip_prefix("data: ")
            .or_else(|| line.strip_prefix("data:"))
        {
            return (
                id.expect("an id before the data"),
                serde_json::from_str(v).unwrap(),
            );
        } else if line.starts_with("event:") {
            panic!("no named events: {line}");
        }
    }
}

fn parse(bytes: &[u8]) -> Response {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}
