//! The inspector in a real browser: Debian's `chromium`, headless, driven
//! over WebDriver by `chromedriver`. Skipped with a printed reason when
//! either is missing, unless `THESTREAM_REQUIRE_BROWSER` is set (as
//! `.ci/run` sets it), where a missing browser fails. With
//! `THESTREAM_SCREENSHOTS=DIR` each page is saved as `DIR/NAME.png` (the
//! pictures of docs/inspector.md).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use sha2::{Digest, Sha256};
use stream_testkit::provider::{Reply, ScriptedCompletion};

use super::client::Inspector;
use super::{runs, scripted};
use crate::common::Serve;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// `chromedriver` on a free loopback port, killed when dropped.
struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn driver() -> Option<Driver> {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !std::path::Path::new(p).exists())
        .collect();
    if !missing.is_empty() {
        assert!(
            std::env::var_os("THESTREAM_REQUIRE_BROWSER").is_none(),
            "THESTREAM_REQUIRE_BROWSER is set and {missing:?} are missing (apt-get install chromium chromium-driver)"
        );
        eprintln!(
            "skipped: the browser tests need {missing:?} (apt-get install chromium chromium-driver)"
        );
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Some(Driver { child, port })
}

async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--no-first-run", "--disable-extensions"],
        }),
    );
    let url = format!("http://127.0.0.1:{}", driver.port);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(client) => return client,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("chromedriver did not start a session: {e}"),
        }
    }
}

async fn text(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn screenshot(c: &Client, name: &str) {
    if let Some(dir) = std::env::var_os("THESTREAM_SCREENSHOTS") {
        let png = c.screenshot().await.unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(std::path::Path::new(&dir).join(format!("{name}.png")), png).unwrap();
    }
}

/// Every resource the page loaded came from the inspector itself.
async fn assert_same_origin(c: &Client, origin: &str) {
    let names = c
        .execute(
            "return performance.getEntriesByType('resource').map(e => e.name)",
            vec![],
        )
        .await
        .unwrap();
    for name in names.as_array().unwrap() {
        let name = name.as_str().unwrap();
        assert!(
            name.starts_with(origin),
            "a request left for another origin: {name}"
        );
    }
}

async fn assert_no_script_ran(c: &Client) {
    let pwned = c
        .execute("return typeof window.__pwned", vec![])
        .await
        .unwrap();
    assert_eq!(pwned, "undefined", "a hostile proposal ran script");
}

#[test]
fn every_page_in_a_real_browser_with_the_live_tail_and_hostile_text_inert() {
    let Some(driver) = driver() else { return };
    let sc = scripted();
    let i = Inspector::start(&sc.s);
    let origin = format!("http://{}", i.addr);
    let turn = runs(&sc.s).last().unwrap().clone();
    let sent = hex::encode(Sha256::digest(
        &sc.s.provider.requests().last().unwrap().body,
    ));
    let serve = Serve::start(&sc.s);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let c = browser(&driver).await;
        // The printed URL: the token is exchanged for the cookie and dropped.
        c.goto(&format!("{origin}/?token={}", i.token))
            .await
            .unwrap();
        assert_eq!(
            c.current_url().await.unwrap().as_str(),
            format!("{origin}/")
        );
        let health = text(&c, "ul.health").await;
        assert!(health.contains("proposals pending"), "{health}");
        // serve reports itself running once its engine is built.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !text(&c, "#serve-state").await.starts_with("running") {
            assert!(Instant::now() < deadline, "serve never showed as running");
            tokio::time::sleep(Duration::from_millis(300)).await;
            c.refresh().await.unwrap();
        }
        screenshot(&c, "now").await;

        // A new message appears in the live tail while serve answers it.
        let rows = |c: &Client| {
            let c = c.clone();
            async move {
                c.find_all(Locator::Css("#tail tbody tr"))
                    .await
                    .unwrap()
                    .len()
            }
        };
        let before = rows(&c).await;
        let first = text(&c, "#tail tbody tr td").await;
        sc.s.script(Reply::completion(ScriptedCompletion::text(
            "Live and well.",
        )));
        sc.s.say("Are you there?");
        let deadline = Instant::now() + Duration::from_secs(15);
        while rows(&c).await == before || text(&c, "#tail tbody tr td").await == first {
            assert!(
                Instant::now() < deadline,
                "no new event reached the live tail"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let newest: u64 = text(&c, "#tail tbody tr td").await.parse().unwrap();
        assert!(newest > first.parse().unwrap());
        assert_same_origin(&c, &origin).await;

        // The turn: the SHA-256 the provider's received body hashes to.
        c.goto(&format!("{origin}/turns/{turn}")).await.unwrap();
        assert_eq!(text(&c, "#request-sha256").await, sent);
        screenshot(&c, "turn").await;

        // The hostile proposal: visible as text, flagged, stale, inert.
        c.goto(&format!("{origin}/proposals/{}", sc.hostile))
            .await
            .unwrap();
        let body = text(&c, "main").await;
        assert!(
            body.contains("<script>window.__pwned=1</script>"),
            "the markup is shown as text"
        );
        assert!(
            body.contains("\\u{202e}"),
            "the bidi override is made visible"
        );
        assert!(body.contains("hidden characters made visible"));
        assert!(body.contains("stale"), "the hand edit made it stale");
        assert!(body.contains(&format!(
            "thestream proposal-decision --proposal {} --accept",
            sc.hostile
        )));
        assert_eq!(
            c.find_all(Locator::Css(
                "main img, main script, main a[href^='javascript']"
            ))
            .await
            .unwrap()
            .len(),
            0
        );
        assert_no_script_ran(&c).await;
        screenshot(&c, "proposal").await;

        // The queue, with the hostile one pending first.
        c.goto(&format!("{origin}/proposals")).await.unwrap();
        let first_row = text(&c, "table.list tbody tr").await;
        assert!(
            first_row.contains("pending") && first_row.contains("stale"),
            "{first_row}"
        );
        assert_no_script_ran(&c).await;
        screenshot(&c, "proposals").await;

        // The memory page: the accepted line blamed on its proposal.
        c.goto(&format!("{origin}/memory")).await.unwrap();
        let mut rows_text = Vec::new();
        for row in c
            .find_all(Locator::Css("table.blame tbody tr"))
            .await
            .unwrap()
        {
            rows_text.push(row.text().await.unwrap());
        }
        let line = rows_text
            .iter()
            .find(|r| r.contains(sc.accepted_line))
            .unwrap_or_else(|| panic!("the accepted line is not in the blame: {rows_text:?}"));
        assert!(
            line.contains("materialized") && line.contains(&sc.accepted[..12]),
            "{line}"
        );
        let edit = rows_text
            .iter()
            .find(|r| r.contains("Edited by hand."))
            .unwrap();
        assert!(
            edit.contains("edited"),
            "the hand-edited line is blamed on the edit: {edit}"
        );
        screenshot(&c, "memory").await;

        for (route, name) in [("/conversation", "conversation"), ("/exports", "exports")] {
            c.goto(&format!("{origin}{route}")).await.unwrap();
            assert!(!text(&c, "main").await.is_empty());
            assert_same_origin(&c, &origin).await;
            screenshot(&c, name).await;
        }
        c.close().await.unwrap();
    });
    serve.stop();
}
