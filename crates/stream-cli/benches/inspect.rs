//! The inspector on a large store: 100,000 events, 1,000 proposals, a
//! 64 KiB `memory.md`. For each page, time to first byte and to the last
//! byte (server side, over loopback), as a ratio to `thestream events
//! --json | tail -1` on the same store in the same run; the latency from a
//! commit to the event's arrival in an open live stream (median, p90); the
//! inspector's RSS and its CPU over 10 idle seconds.
//!
//! `cargo bench -p stream-cli --bench inspect`. Samples alternate with the
//! baseline, so machine load hits both alike.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stream_core::NewEvent;
use stream_core::payload::{EvidenceIds, MemoryOperation, MessageReceived, PrivateChat};
use stream_core::text::BoundedText;
use stream_proposals::settle::ValidatedProposal;
use stream_proposals::testing::World;
use stream_store::Store;

const EVENTS: usize = 100_000;
const PROPOSALS: usize = 1_000;
const SAMPLES: usize = 7;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn p90(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[(v.len() * 9 / 10).min(v.len() - 1)]
}

/// A GET with the cookie: (time to first byte, time to last byte, bytes).
fn get(addr: SocketAddr, cookie: &str, path: &str) -> (Duration, Duration, usize) {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut first = [0u8; 1];
    s.read_exact(&mut first).unwrap();
    let ttfb = start.elapsed();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    let full = start.elapsed();
    assert!(
        rest.starts_with(b"TTP/1.1 200"),
        "{path}: {:?}",
        String::from_utf8_lossy(&rest[..40.min(rest.len())])
    );
    (ttfb, full, rest.len() + 1)
}

fn baseline(home: &Path) -> Duration {
    let start = Instant::now();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' events --json | tail -1 >/dev/null",
            env!("CARGO_BIN_EXE_thestream")
        ))
        .current_dir(home)
        .env_clear()
        .status()
        .unwrap();
    assert!(status.success());
    start.elapsed()
}

fn build_store(home: &Path) -> World {
    let init = Command::new(env!("CARGO_BIN_EXE_thestream"))
        .args(["init", "."])
        .current_dir(home)
        .env_clear()
        .output()
        .unwrap();
    assert!(init.status.success());
    std::fs::create_dir_all(home.join(".thestream")).unwrap();
    let mut w = World::at(&home.join(".thestream/store.db"));
    let mut memory = String::from("---\nid: memory-1\n---\n# Memory\n");
    while memory.len() < 64 * 1024 {
        memory.push_str("- a remembered line of ordinary length, about sixty bytes\n");
    }
    std::fs::write(home.join("context/memory.md"), &memory).unwrap();
    let scan = Command::new(env!("CARGO_BIN_EXE_thestream"))
        .args(["scan"])
        .current_dir(home)
        .env_clear()
        .output()
        .unwrap();
    assert!(scan.status.success());
    for i in 0..PROPOSALS {
        let trigger = w.base.message("Please remember this.");
        w.base.settle_run(&trigger, Some("Noted."), |s| {
            vec![ValidatedProposal::Memory {
                target: s.capabilities.memory_target.clone().unwrap(),
                operation: MemoryOperation::Append,
                text: BoundedText::new(format!("- remembered fact {i}")).unwrap(),
                reason: BoundedText::new("asked").unwrap(),
                evidence: EvidenceIds::new(vec![s.trigger.event_id.clone()]).unwrap(),
            }]
        });
    }
    // The rest: owner messages, a thousand to a transaction.
    let mut update = 10_000_000;
    while stream_store::Read::last_position(&w.base.store).unwrap() < EVENTS as u64 {
        let mut tx = w.base.store.begin().unwrap();
        for _ in 0..1_000 {
            update += 1;
            let msg = MessageReceived {
                update_id: update,
                message_id: update,
                chat_id: 42,
                chat_type: PrivateChat,
                sender_id: 42,
                date: 1_790_000_000,
                text: Some(BoundedText::new(format!("filler message {update}")).unwrap()),
                photo: None,
                photo_too_large: false,
                reply_to_message_id: None,
                command: None,
            };
            tx.append(&NewEvent::build(&w.base.telegram, None, None, &msg).unwrap())
                .unwrap();
        }
        tx.commit().unwrap();
    }
    w
}

fn start_inspector(home: &Path) -> (Child, SocketAddr, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_thestream"))
        .args(["inspect", "--listen", "127.0.0.1:0"])
        .current_dir(home)
        .env_clear()
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim_end().strip_prefix("inspector: http://").unwrap();
    let (addr, token) = url.split_once("/?token=").unwrap();
    (
        child,
        addr.parse().unwrap(),
        format!("thestream_inspect={token}"),
    )
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap()
}

fn main() {
    let home = tempfile::tempdir().unwrap();
    let setup = Instant::now();
    let mut w = build_store(home.path());
    let last_proposal = stream_proposals::review::list(
        &w.base.store,
        false,
        stream_proposals::review::Depth::Summary,
        &stream_proposals::authority::TrustedKeys::default(),
    )
    .unwrap()
    .last()
    .map(|p| p.id.to_string())
    .unwrap();
    eprintln!(
        "setup: {EVENTS} events, {PROPOSALS} proposals in {:?}",
        setup.elapsed()
    );
    let (mut child, addr, cookie) = start_inspector(home.path());
    let pid = child.id();
    let pages = [
        "/".to_owned(),
        "/conversation".to_owned(),
        "/proposals".to_owned(),
        format!("/proposals/{last_proposal}"),
        "/memory".to_owned(),
        "/exports".to_owned(),
    ];
    // Warm-up, and the store's size measured in the background.
    std::thread::sleep(Duration::from_secs(3));
    for page in &pages {
        get(addr, &cookie, page);
    }
    baseline(home.path());
    let mut base = Vec::new();
    let mut timings: Vec<(Vec<Duration>, Vec<Duration>, usize)> =
        pages.iter().map(|_| (Vec::new(), Vec::new(), 0)).collect();
    for _ in 0..SAMPLES {
        base.push(baseline(home.path()));
        for (page, t) in pages.iter().zip(timings.iter_mut()) {
            let (ttfb, full, bytes) = get(addr, &cookie, page);
            t.0.push(ttfb);
            t.1.push(full);
            t.2 = bytes;
        }
    }
    let base = median(base);
    println!("baseline `thestream events --json | tail -1`: {base:?} (median of {SAMPLES})");
    for (page, (ttfb, full, bytes)) in pages.iter().zip(timings) {
        let (ttfb, full) = (median(ttfb), median(full));
        println!(
            "{page:<22} ttfb {ttfb:>10.2?} full {full:>10.2?} ({bytes} bytes) ratio {:.3}",
            full.as_secs_f64() / base.as_secs_f64()
        );
    }

    // Commit → arrival in an open live stream.
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /events/stream HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(s);
    let mut latencies = Vec::new();
    for i in 0..30 {
        std::thread::sleep(Duration::from_millis(50 + (i * 37) % 200));
        w.base.message("a live message");
        let committed = Instant::now();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.starts_with("data:") {
                break;
            }
        }
        latencies.push(committed.elapsed());
    }
    println!(
        "commit → live stream: median {:?}, p90 {:?} ({} events; the poll interval is 200 ms)",
        median(latencies.clone()),
        p90(latencies.clone()),
        latencies.len()
    );
    drop(reader);

    // Idle: RSS and CPU over 10 s.
    std::thread::sleep(Duration::from_secs(1));
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(10));
    let ticks = cpu_ticks(pid) - before;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    println!(
        "inspector RSS {} KiB; CPU over 10 idle s: {:.0} ms ({:.2} %)",
        rss_kib(pid),
        ticks as f64 / hz * 1000.0,
        ticks as f64 / hz / 10.0 * 100.0
    );
    let _ = child.kill();
    let _ = child.wait();
}
