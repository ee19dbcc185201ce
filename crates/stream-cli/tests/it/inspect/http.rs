//! The inspector over HTTP, without a browser.

use sha2::{Digest, Sha256};

use super::client::{Inspector, Response, next_event};
use super::{runs, scripted};

const ROUTES: [&str; 6] = [
    "/",
    "/conversation",
    "/proposals",
    "/memory",
    "/exports",
    "/assets/inspect.css",
];

fn assert_secure_headers(r: &Response, what: &str) {
    let csp = r
        .header("content-security-policy")
        .unwrap_or_else(|| panic!("{what}: no CSP"));
    assert!(csp.contains("default-src 'none'"), "{what}: {csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{what}: {csp}");
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{what}: {csp}"
    );
    assert_eq!(
        r.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{what}");
}

fn assert_dark(r: &Response, what: &str) {
    for canary in ["canary-inspect", "like tea", "script"] {
        assert!(
            !r.body.contains(canary),
            "{what} leaks {canary}: {}",
            r.body
        );
    }
}

#[test]
fn the_token_becomes_a_cookie_and_everything_else_is_refused() {
    let sc = scripted();
    let i = Inspector::start(&sc.s);
    let host = i.host();
    let cookie = i.cookie();

    // No cookie, a wrong token, a wrong cookie: 401.
    let none = i.raw("GET", "/", &[("Host", &host)]);
    assert_eq!(none.status, 401);
    let wrong = i.raw("GET", "/?token=0000", &[("Host", &host)]);
    assert_eq!(wrong.status, 401);
    let forged = i.raw(
        "GET",
        "/",
        &[("Host", &host), ("Cookie", "thestream_inspect=0000")],
    );
    assert_eq!(forged.status, 401);

    // The token: 303 to `/` with an HttpOnly, SameSite=Strict cookie.
    let enter = i.raw("GET", &format!("/?token={}", i.token), &[("Host", &host)]);
    assert_eq!(enter.status, 303);
    assert_eq!(enter.header("location"), Some("/"));
    let set = enter.header("set-cookie").unwrap();
    assert!(set.starts_with(&format!("{cookie};")), "{set}");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );

    // A foreign Host (DNS rebinding) and a cross-site request, cookie or not.
    let rebound = i.raw(
        "GET",
        "/",
        &[("Host", "evil.example:7878"), ("Cookie", &cookie)],
    );
    assert!(matches!(rebound.status, 421 | 403), "{}", rebound.status);
    for site in ["cross-site", "same-site"] {
        let r = i.raw(
            "GET",
            "/",
            &[
                ("Host", &host),
                ("Cookie", &cookie),
                ("Sec-Fetch-Site", site),
            ],
        );
        assert_eq!(r.status, 403, "{site}");
    }
    // Writing methods, even with the cookie.
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let r = i.raw(
            method,
            "/proposals",
            &[
                ("Host", &host),
                ("Cookie", &cookie),
                ("Content-Length", "0"),
            ],
        );
        assert_eq!(r.status, 405, "{method}");
    }
    // Every refusal says nothing of the store, and carries the headers.
    for (what, r) in [
        ("none", &none),
        ("wrong", &wrong),
        ("forged", &forged),
        ("rebound", &rebound),
    ] {
        assert_dark(r, what);
        assert_secure_headers(r, what);
    }
    // Every route with the cookie: 200 and the headers; HEAD too.
    for route in ROUTES {
        let r = i.get(route);
        assert_eq!(r.status, 200, "{route}");
        assert_secure_headers(&r, route);
        let head = i.raw("HEAD", route, &[("Host", &host), ("Cookie", &cookie)]);
        assert_eq!(head.status, 200, "HEAD {route}");
        assert!(head.body.is_empty());
    }
    // Unknown ids and paths: 404.
    for route in [
        "/turns/0000000000000000000000000000000000000000000000000000000000000000",
        "/turns/not-an-id",
        "/proposals/0000000000000000000000000000000000000000000000000000000000000000",
        "/nothing-here",
    ] {
        let r = i.get(route);
        assert_eq!(r.status, 404, "{route}");
        assert_secure_headers(&r, route);
    }
    assert!(i.stop().success(), "SIGTERM ends the inspector with 0");
}

/// Every file of the store, by name, with its bytes' SHA-256. The `-shm`
/// index is shared memory that SQLite readers write by design; the
/// database and its log are what must not change.
fn store_bytes(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("store.db") && !name.ends_with("-shm")
        })
        .map(|e| {
            let bytes = std::fs::read(e.path()).unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                hex::encode(Sha256::digest(&bytes)),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_session_of_page_loads_leaves_the_store_byte_for_byte_unchanged() {
    if std::env::var(crate::common::BACKEND_ENV).as_deref() == Ok("postgres") {
        // PostgreSQL's side is the read-only session and role, tested in
        // stream-store (`the_session_refuses_every_write`).
        eprintln!("skipped on PostgreSQL: this test compares the SQLite store's files");
        return;
    }
    let sc = scripted();
    let dir = sc.s.path().join(".thestream");
    let memory = std::fs::read(sc.s.path().join("context/memory.md")).unwrap();
    let before = store_bytes(&dir);
    let i = Inspector::start(&sc.s);
    for route in ROUTES {
        i.page_or_asset(route);
    }
    for run in runs(&sc.s) {
        i.page(&format!("/turns/{run}"));
    }
    for id in [&sc.accepted, &sc.hostile] {
        i.page(&format!("/proposals/{id}"));
    }
    let mut stream = i.stream(Some(0));
    let _ = next_event(&mut stream);
    drop(stream);
    assert!(i.stop().success());
    // SQLite gives a WAL database an empty `-wal` at open when none was
    // there (a `serve` that stopped cleanly removed it): no byte of data.
    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    let after: Vec<_> = store_bytes(&dir)
        .into_iter()
        .filter(|(name, sha)| {
            !(name == "store.db-wal" && sha == EMPTY && !before.iter().any(|(n, _)| n == name))
        })
        .collect();
    assert_eq!(after, before, "the inspector changed the store");
    assert_eq!(
        std::fs::read(sc.s.path().join("context/memory.md")).unwrap(),
        memory
    );
}

#[test]
fn a_turn_shows_the_exact_request_the_provider_received() {
    let sc = scripted();
    let i = Inspector::start(&sc.s);
    let requests = sc.s.provider.requests();
    let runs = runs(&sc.s);
    assert_eq!(runs.len(), requests.len(), "one request per completed run");
    for (run, request) in runs.iter().zip(&requests) {
        let page = i.page(&format!("/turns/{run}"));
        let sha = hex::encode(Sha256::digest(&request.body));
        assert!(
            page.contains(&format!("<code id=\"request-sha256\">{sha}</code>")),
            "turn {run} does not show the SHA-256 of the body the provider received"
        );
        // The body itself, as the page escapes it.
        let body = String::from_utf8(request.body.clone()).unwrap();
        let escaped = body
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;");
        assert!(page.contains(&escaped), "turn {run} does not show the body");
        // Never a header or a key.
        assert!(!page.contains("sk-loopback-test-key"));
    }
}

#[test]
fn the_live_tail_resumes_by_id_with_no_gap_and_no_duplicate() {
    let sc = scripted();
    let i = Inspector::start(&sc.s);
    let total = sc.s.events().unwrap().len() as u64;
    // From the start: every stored event once, positions increasing.
    let mut stream = i.stream(Some(0));
    let mut seen = Vec::new();
    for _ in 0..total {
        let (id, line) = next_event(&mut stream);
        assert_eq!(line["position"], id);
        seen.push(id);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    drop(stream);
    // Resume in the middle: exactly the rest.
    let middle = seen[seen.len() / 2];
    let mut resumed = i.stream(Some(middle));
    let rest: Vec<u64> = seen.iter().copied().filter(|p| *p > middle).collect();
    for want in &rest {
        assert_eq!(next_event(&mut resumed).0, *want);
    }
    // The store grows while the stream is open: the new events arrive, in order.
    sc.s.say("A new message while the page is open.");
    sc.s.script(stream_testkit::provider::Reply::completion(
        stream_testkit::provider::ScriptedCompletion::text("Seen."),
    ));
    let s = &sc.s;
    let drained = s.drain().unwrap();
    assert_eq!(drained.code, 0);
    let grown = s.events().unwrap().len() as u64;
    let mut last = *seen.last().unwrap();
    for _ in total..grown {
        let (id, line) = next_event(&mut resumed);
        assert!(id > last, "{id} after {last}");
        assert!(line["type"].is_string());
        last = id;
    }
    // Lines are content-dark.
    let (_, line) = next_event(&mut i.stream(Some(0)));
    let text = line.to_string();
    assert!(
        !text.contains("canary") && !text.contains("Australia"),
        "{text}"
    );
}

#[test]
fn at_most_32_streams_are_open_at_once() {
    let sc = scripted();
    let i = Inspector::start(&sc.s);
    let open: Vec<_> = (0..32).map(|_| i.stream(None)).collect();
    let host = i.host();
    let cookie = i.cookie();
    let refused = i.raw(
        "GET",
        "/events/stream",
        &[("Host", &host), ("Cookie", &cookie)],
    );
    assert_eq!(refused.status, 503);
    drop(open);
    // A slot frees when a client goes.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let _again = i.stream(None);
}

#[test]
fn a_remote_address_needs_allow_remote_and_credentials_are_shed() {
    let sc = scripted();
    let run = sc.s.run(&["inspect", "--listen", "0.0.0.0:0"]).unwrap();
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--allow-remote"), "{}", run.stderr);
    // Started with the Telegram and provider variables set, it holds neither.
    let i = Inspector::start_with(
        &sc.s,
        &[
            ("TELEGRAM_BOT_TOKEN", "canary-inspect-token"),
            ("OPENAI_API_KEY", "canary-inspect-key"),
        ],
    );
    let environ = std::fs::read(format!("/proc/{}/environ", i.child.id())).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(!environ.contains("canary-inspect-token") && !environ.contains("canary-inspect-key"));
    assert_eq!(i.get("/").status, 200);
}

#[test]
fn hostile_text_is_escaped_and_made_visible_on_the_proposal_and_memory_pages() {
    let sc = scripted();
    let i = Inspector::start(&sc.s);
    let page = i.page(&format!("/proposals/{}", sc.hostile));
    for raw in [
        "<script>window",
        "<img src",
        "<a href=\"javascript",
        "\u{1b}",
        "\u{202e}",
        "\r",
    ] {
        assert!(!page.contains(raw), "raw {raw:?} on the proposal page");
    }
    assert!(page.contains("&lt;script&gt;window.__pwned=1&lt;/script&gt;"));
    assert!(page.contains(r#"<span class="hidden-char" title="hidden character">\u{202e}</span>"#));
    assert!(page.contains("hidden characters made visible"));
    assert!(page.contains("stale"), "the hand edit made it stale");
    assert!(page.contains(&format!(
        "thestream proposal-decision --proposal {} --accept",
        sc.hostile
    )));
    let memory = i.page("/memory");
    assert!(memory.contains(sc.accepted_line));
    assert!(
        memory.contains(&format!("href=\"/proposals/{}\"", sc.accepted)),
        "blame links the proposal"
    );
}

impl Inspector {
    /// 200 for a page or an asset.
    fn page_or_asset(&self, route: &str) {
        assert_eq!(self.get(route).status, 200, "{route}");
    }
}

/// Pages as stored goldens, one element a line: ids, hashes, times and the
/// random `memory.md` id are the only parts that vary between runs.
fn html_golden(name: &str, page: &str) {
    let lines = page.replace("><", ">\n<");
    insta::with_settings!({filters => vec![
        (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[time]"),
        (r"memory-[0-9a-f]{16}", "memory-[random]"),
        (r"[0-9a-f]{64}", "[id]"),
        (r"[0-9a-f]{12}", "[short]"),
        (r"\b\d+ bytes\b", "[n] bytes"),
    ]}, {
        insta::assert_snapshot!(name, lines);
    });
}

#[test]
fn golden_html_of_the_hostile_proposal_and_memory_pages() {
    let sc = scripted();
    let i = Inspector::start(&sc.s);
    html_golden(
        "inspect_hostile_proposal",
        &i.page(&format!("/proposals/{}", sc.hostile)),
    );
    html_golden("inspect_memory", &i.page("/memory"));
}

#[test]
fn a_review_only_config_inspects_the_same_store() {
    let sc = scripted();
    let path = sc.s.path().join("thestream.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    let start = config.find("[context]").unwrap();
    let end = start + 1 + config[start + 1..].find("\n[").unwrap();
    std::fs::write(&path, format!("{}{}", &config[..start], &config[end..])).unwrap();
    assert!(
        !std::fs::read_to_string(&path)
            .unwrap()
            .contains("[context]")
    );
    let i = Inspector::start(&sc.s);
    for route in ROUTES {
        assert_eq!(i.get(route).status, 200, "{route}");
    }
    let memory = i.page("/memory");
    assert!(memory.contains(sc.accepted_line));
    let proposal = i.page(&format!("/proposals/{}", sc.hostile));
    assert!(proposal.contains("stale"));
}

#[test]
fn a_store_of_a_newer_schema_or_no_store_is_refused_at_start() {
    let s = crate::common::sqlite_stack(stream_core::payload::ProviderApi::OpenaiChat);
    // No store yet: refused, and nothing is created.
    let run = s.run(&["inspect", "--listen", "127.0.0.1:0"]).unwrap();
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(!s.store_path().exists(), "the inspector created a store");
    // A store written by a newer build: refused, its bytes untouched.
    std::fs::create_dir_all(s.store_path().parent().unwrap()).unwrap();
    drop(stream_store::SqliteStore::open(&s.store_path()).unwrap());
    rusqlite::Connection::open(s.store_path())
        .unwrap()
        .execute_batch("PRAGMA user_version = 999")
        .unwrap();
    let before = std::fs::read(s.store_path()).unwrap();
    let run = s.run(&["inspect", "--listen", "127.0.0.1:0"]).unwrap();
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("newer"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "no URL is printed: {}", run.stdout);
    assert_eq!(std::fs::read(s.store_path()).unwrap(), before);
}
