//! The review surface through the real binary: `proposal-list`,
//! `proposal-show`, `memory-log` — goldens, safe rendering of hostile text,
//! staleness after a hand edit, the shown diff equal to what an accept
//! writes, the audit log's origins, and bad input.

use std::path::PathBuf;

use serde_json::Value;
use stream_core::EventId;
use stream_core::payload::{EvidenceIds, MemoryOperation};
use stream_core::terminal::is_hidden;
use stream_core::text::BoundedText;
use stream_proposals::settle::ValidatedProposal;
use stream_proposals::testing::World;

use crate::common::{Home, Run};

/// The `memory.md` version `World` records.
const WORLD_MEMORY: &str = "---\nid: memory-1\n---\n# Memory\n";

pub(crate) struct Scene {
    pub(crate) home: Home,
    pub(crate) w: World,
}

impl Scene {
    pub(crate) fn new() -> Self {
        let home = Home::init();
        std::fs::create_dir_all(home.path().join(".thestream")).unwrap();
        let w = World::at(&home.path().join(".thestream/store.db"));
        std::fs::write(home.path().join("context/memory.md"), WORLD_MEMORY).unwrap();
        Self { home, w }
    }

    pub(crate) fn memory_path(&self) -> PathBuf {
        self.home.path().join("context/memory.md")
    }

    pub(crate) fn run(&self, args: &[&str]) -> Run {
        let run = self.home.run(args);
        assert_no_raw_controls(&run);
        run
    }

    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let run = self.run(args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        run.stdout
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }

    /// A new run (with a reply) whose one proposal is this memory change.
    pub(crate) fn propose(&mut self, text: &str, reason: &str) -> EventId {
        let trigger = self.w.base.message("Please remember this.");
        let (settlement, _) = self.w.base.settle_run(&trigger, Some("Noted."), |s| {
            vec![ValidatedProposal::Memory {
                target: s.capabilities.memory_target.clone().unwrap(),
                operation: MemoryOperation::Append,
                text: BoundedText::new(text).unwrap(),
                reason: BoundedText::new(reason).unwrap(),
                evidence: EvidenceIds::new(vec![s.trigger.event_id.clone()]).unwrap(),
            }]
        });
        settlement.proposals()[0].id.clone()
    }
}

fn assert_no_raw_controls(run: &Run) {
    for (name, out) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        let raw: Vec<u32> = out
            .chars()
            .filter(|c| *c != '\n' && *c != '\t' && is_hidden(*c))
            .map(u32::from)
            .collect();
        assert!(raw.is_empty(), "raw hidden characters {raw:x?} in {name}");
    }
}

/// Times and ages vary from run to run.
pub(crate) fn golden(name: &str, text: &str) {
    insta::with_settings!({filters => vec![
        (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[time]"),
        (r"\b\d+ (s|min|h|d)\b", "[age]"),
    ]}, {
        insta::assert_snapshot!(name, text);
    });
}

/// `\r` overwriting a line, `ESC[8m` concealing one, U+202E reversing one,
/// and 40 lines: everything a reviewer could be made to miss.
pub(crate) fn hostile() -> String {
    let mut text = String::from(
        "- harmless line\rcanary-hidden-by-cr\n\u{1b}[8mcanary-concealed\u{1b}[0m\n\u{202e}txet desrever",
    );
    for i in 4..=40 {
        text.push_str(&format!("\nline {i}"));
    }
    text
}

#[test]
fn list_and_show_goldens_with_and_without_show_sensitive() {
    let mut s = Scene::new();
    let hostile_id = s.propose(&hostile(), "because\u{1b}[2J");
    let w = &s.w;

    let table = s.ok(&["proposal-list", "--show-sensitive"]);
    golden("list_show_sensitive", &table);
    let hostile_row = table
        .lines()
        .find(|l| l.starts_with(&hostile_id.as_str()[..12]))
        .unwrap();
    assert!(hostile_row.contains("controls"), "{hostile_row}");
    assert!(hostile_row.contains("… 39 more lines"), "{hostile_row}");
    let redacted = s.ok(&["proposal-list"]);
    golden("list_redacted", &redacted);
    assert!(!redacted.contains("canary-"), "{redacted}");

    for (name, id) in [
        ("show_memory", &w.memory),
        ("show_correction", &w.correction),
        ("show_focus", &w.focus),
        ("show_hostile", &hostile_id),
    ] {
        let shown = s.ok(&["proposal-show", id.as_str(), "--show-sensitive"]);
        golden(name, &shown);
        let dark = s.ok(&["proposal-show", &id.as_str()[..12]]);
        golden(&format!("{name}_redacted"), &dark);
        assert!(!dark.contains("canary-"), "{dark}");
    }
    let shown = s.ok(&["proposal-show", hostile_id.as_str(), "--show-sensitive"]);
    // Every hidden line is shown, escaped.
    for visible in [
        "\\rcanary-hidden-by-cr",
        "\\u{1b}[8mcanary-concealed",
        "\\u{202e}txet desrever",
        "line 40",
    ] {
        assert!(shown.contains(visible), "{visible} missing:\n{shown}");
    }

    let json = s.json(&["proposal-show", w.correction.as_str(), "--json"]);
    assert_eq!(json["original"], "[sensitive: 5 chars]");
    let json = s.json(&[
        "proposal-show",
        w.correction.as_str(),
        "--json",
        "--show-sensitive",
    ]);
    assert_eq!(json["original"], "Lyon.");
    assert_eq!(json["replacement"], "Paris.");
    assert_eq!(json["diff"], "[-Lyon.-]{+Paris.+}");
    assert_eq!(json["shortId"], &w.correction.as_str()[..12]);
    assert_eq!(json["evidence"][0]["kind"], "reply");
    assert_eq!(json["evidence"][0]["text"], "Lyon.");
}

#[test]
fn the_shown_diff_is_what_accept_writes() {
    let mut s = Scene::new();
    let id = s.propose("canary-diff: first line\r\nsecond line\n\n", "asked");
    let shown = s.json(&["proposal-show", id.as_str(), "--json", "--show-sensitive"]);
    let diff = shown["diff"].as_str().unwrap().to_owned();
    assert!(diff.starts_with("--- memory.md@"), "{diff}");
    let added: Vec<&str> = diff
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .map(|l| &l[1..])
        .collect();
    let run = s.run(&["proposal-decision", "--proposal", id.as_str(), "--accept"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let written = std::fs::read_to_string(s.memory_path()).unwrap();
    let new_lines: Vec<&str> = written
        .strip_prefix(WORLD_MEMORY)
        .unwrap()
        .lines()
        .collect();
    assert_eq!(added, new_lines);
}

#[test]
fn a_hand_edit_makes_a_proposal_stale_in_the_next_list() {
    let s = Scene::new();
    let memory = |s: &Scene| {
        let list = s.json(&["proposal-list", "--json"]);
        list.as_array()
            .unwrap()
            .iter()
            .find(|v| v["kind"] == "memory-change")
            .unwrap()
            .clone()
    };
    assert_eq!(memory(&s)["stale"], false);
    std::fs::write(s.memory_path(), format!("{WORLD_MEMORY}- edited by hand\n")).unwrap();
    let now = memory(&s);
    assert_eq!(now["stale"], true);
    assert_eq!(now["flags"], serde_json::json!(["stale"]));
    let shown = s.ok(&["proposal-show", s.w.memory.as_str(), "--show-sensitive"]);
    golden("show_memory_stale", &shown);
    assert!(shown.contains("stale: memory.md is now version"), "{shown}");
    assert!(shown.contains("+- edited by hand"), "{shown}");
}

/// `stale` is for pending proposals only: after an accept the current
/// version is the one it wrote, and nothing decided is applied again. An
/// accepted (materialized), an accepted whose materialization failed, an
/// edited (failed) and a rejected proposal on a replaced base: none stale in
/// `--json`, in the table's flags or in `proposal-show`; a pending one is.
#[test]
fn a_decided_proposal_is_never_stale() {
    let mut s = Scene::new();
    let failed = s.propose("canary-stale: failed", "asked");
    let edited = s.propose("canary-stale: edited", "asked");
    let rejected = s.propose("canary-stale: rejected", "asked");
    let pending = s.propose("canary-stale: pending", "asked");
    let decide = |id: &EventId, how: &[&str]| {
        let mut args = vec!["proposal-decision", "--proposal", id.as_str()];
        args.extend_from_slice(how);
        s.run(&args).code
    };
    assert_eq!(decide(&s.w.memory, &["--accept"]), 0);
    assert_ne!(decide(&failed, &["--accept"]), 0);
    let edit = s.home.path().join("edit.txt");
    std::fs::write(&edit, "canary-stale: the edit\n").unwrap();
    assert_ne!(decide(&edited, &["--edit-file", edit.to_str().unwrap()]), 0);
    assert_eq!(decide(&rejected, &["--reject"]), 0);

    let list = s.json(&["proposal-list", "--all", "--json"]);
    let by_id = |id: &EventId| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|v| v["id"] == id.as_str())
            .unwrap()
            .clone()
    };
    for (id, state, outcome) in [
        (&s.w.memory, "accepted", "materialized"),
        (&failed, "accepted", "materialization-failed"),
        (&edited, "edited", "materialization-failed"),
    ] {
        let v = by_id(id);
        assert_eq!(
            (v["state"].as_str(), v["outcome"].as_str()),
            (Some(state), Some(outcome))
        );
        assert_eq!(v["stale"], false, "{state} {outcome}");
        assert_eq!(v["flags"], serde_json::json!([]), "{state} {outcome}");
    }
    assert_eq!(by_id(&rejected)["state"], "rejected");
    assert_eq!(by_id(&rejected)["stale"], false);
    assert_eq!(by_id(&pending)["stale"], true);

    let table = s.ok(&["proposal-list", "--all"]);
    for line in table.lines().skip(1) {
        let stale = line.contains(" stale ");
        assert_eq!(stale, line.starts_with(&pending.as_str()[..12]), "{table}");
    }
    for id in [&s.w.memory, &failed, &edited, &rejected] {
        let shown = s.ok(&["proposal-show", id.as_str()]);
        assert!(!shown.contains("stale"), "{shown}");
        let json = s.json(&["proposal-show", id.as_str(), "--json"]);
        assert_eq!(json["stale"], false);
        assert_eq!(json["memory"]["changedSinceBase"], Value::Null);
    }
    let shown = s.ok(&["proposal-show", pending.as_str()]);
    assert!(shown.contains("flags     stale"), "{shown}");
    assert!(shown.contains("stale: memory.md is now version"), "{shown}");
}

/// A pending memory change's diff says what accepting would change; an
/// accepted one's what it changed (or was to change, when materialization
/// failed); a rejected one's what accepting would have changed.
#[test]
fn a_decided_memory_change_s_diff_says_what_it_changed() {
    let mut s = Scene::new();
    let failed = s.propose("canary-tense: failed", "asked");
    let rejected = s.propose("canary-tense: rejected", "asked");
    for (id, how) in [
        (&s.w.memory, "--accept"),
        (&failed, "--accept"),
        (&rejected, "--reject"),
    ] {
        s.run(&["proposal-decision", "--proposal", id.as_str(), how]);
    }
    let pending = s.propose("canary-tense: pending", "asked");
    let shown = s.ok(&["proposal-show", s.w.memory.as_str(), "--show-sensitive"]);
    golden("show_memory_accepted", &shown);
    for (id, heading) in [
        (&pending, "diff of memory.md: what accepting would change:"),
        (&s.w.memory, "diff of memory.md: what the decision changed:"),
        (
            &failed,
            "diff of memory.md: what the decision was to change (not written):",
        ),
        (
            &rejected,
            "diff of memory.md: what accepting would have changed:",
        ),
    ] {
        let shown = s.ok(&["proposal-show", id.as_str()]);
        let headings: Vec<&str> = shown.lines().filter(|l| l.starts_with("diff of")).collect();
        assert_eq!(headings, [heading], "{shown}");
    }
}

#[test]
fn memory_log_origins_actors_and_order() {
    let mut s = Scene::new();
    // init's version of the World: edited (found by a scan).
    let first = s.w.memory.clone();
    // A hand edit: the first proposal turns stale; accepting it fails.
    std::fs::write(s.memory_path(), format!("{WORLD_MEMORY}- by hand\n")).unwrap();
    s.ok(&["scan"]);
    let failed = s.run(&[
        "proposal-decision",
        "--proposal",
        first.as_str(),
        "--accept",
    ]);
    assert_ne!(failed.code, 0);
    // Two materializations on the edited file.
    let b = s.propose("canary-log: b", "asked");
    let run = s.run(&[
        "proposal-decision",
        "--proposal",
        b.as_str(),
        "--accept",
        "--actor",
        "alice",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let c = s.propose("canary-log: c", "asked");
    let run = s.run(&[
        "proposal-decision",
        "--proposal",
        c.as_str(),
        "--accept",
        "--actor",
        "bob",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let log = s.json(&["memory-log", "--json"]);
    let rows: Vec<(String, Value, Value)> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["origin"].as_str().unwrap().to_owned(),
                e["proposalId"].clone(),
                e["actor"].clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("materialized".into(), c.as_str().into(), "bob".into()),
            ("materialized".into(), b.as_str().into(), "alice".into()),
            ("edited".into(), Value::Null, Value::Null),
            ("edited".into(), Value::Null, Value::Null),
        ]
    );
    for e in log.as_array().unwrap() {
        assert_eq!(e["sha256"].as_str().unwrap().len(), 64);
        assert!(e["bytes"].as_u64().unwrap() > 0);
    }
    let patch = s.ok(&["memory-log", "--patch"]);
    assert!(!patch.contains("canary-log"), "{patch}");
    assert!(patch.contains("[sensitive: "), "{patch}");
    let patch = s.ok(&["memory-log", "--patch", "--show-sensitive"]);
    assert!(patch.contains("+canary-log: c"), "{patch}");
}

#[test]
fn bad_input_exits_without_printing_content() {
    let s = Scene::new();
    let short = s.run(&["proposal-show", &s.w.memory.as_str()[..3]]);
    assert_eq!(short.code, 2, "{}", short.stderr);
    assert!(short.stdout.is_empty());
    let unknown = s.run(&["proposal-show", "000000000000"]);
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
    assert!(unknown.stdout.is_empty());
    let format = s.run(&[
        "private-training-export",
        "--output",
        "x.jsonl",
        "--acknowledge-sensitive-private-training",
        "--format",
        "yaml",
    ]);
    assert_eq!(format.code, 2, "{}", format.stderr);

    // A memory.md without frontmatter, with a long single line and controls:
    // listed and shown (stale), escaped, nothing leaks when not asked.
    std::fs::write(
        s.memory_path(),
        format!("no frontmatter\u{1b}[8m {}\n", "canary-long ".repeat(2_000)),
    )
    .unwrap();
    let list = s.ok(&["proposal-list"]);
    assert!(list.contains("stale"), "{list}");
    assert!(!list.contains("canary-"));
    let shown = s.ok(&["proposal-show", s.w.memory.as_str(), "--show-sensitive"]);
    assert!(
        shown.contains("+no frontmatter\\u{1b}[8m canary-long"),
        "{shown}"
    );
    let dark = s.ok(&["proposal-show", s.w.memory.as_str()]);
    assert!(!dark.contains("canary-"));

    // The base version's bytes are gone from the store: show says so, exit 1.
    let conn = rusqlite::Connection::open(s.home.path().join(".thestream/store.db")).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = OFF; DELETE FROM blobs;")
        .unwrap();
    drop(conn);
    let run = s.run(&["proposal-show", s.w.memory.as_str(), "--show-sensitive"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr.contains("missing from the store"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("canary-"));
}

/// `proposal-show` resolves ids as git does: a unique prefix of 4 hex
/// digits or more; an ambiguous one exits 2 naming its candidates (their
/// short ids); an unknown one exits 2. `proposal-decision` keeps its 12.
#[test]
fn proposal_show_takes_a_unique_prefix_of_four_digits() {
    let mut s = Scene::new();
    let memory = s.w.memory.clone();
    let shown = s.json(&["proposal-show", &memory.as_str()[..4], "--json"]);
    assert_eq!(shown["id"], memory.as_str());
    for bad in [&memory.as_str()[..3], "ffffffff"] {
        let run = s.run(&["proposal-show", bad]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        assert!(run.stdout.is_empty());
    }
    let decision = s.run(&[
        "proposal-decision",
        "--proposal",
        &memory.as_str()[..11],
        "--reject",
    ]);
    assert_eq!(decision.code, 2, "{}", decision.stderr);
    assert!(
        decision
            .stderr
            .contains("--proposal must be 12 to 64 hex digits"),
        "{}",
        decision.stderr
    );

    // Proposals until two share their first 4 digits (ids are derived from
    // content, so this stops at the same one every run).
    let mut seen = std::collections::BTreeMap::new();
    let (first, second) = loop {
        let id = s.propose(&format!("canary-prefix {}", seen.len()), "asked");
        if let Some(other) = seen.insert(id.as_str()[..4].to_owned(), id.clone()) {
            break (other, id);
        }
        assert!(seen.len() < 3_000, "no 4-digit collision");
    };
    let run = s.run(&["proposal-show", &first.as_str()[..4]]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stdout.is_empty());
    let mut named = [
        first.as_str()[..12].to_owned(),
        second.as_str()[..12].to_owned(),
    ];
    named.sort();
    let expected = format!(
        "2 proposals start with {}: {}, {}; give more digits",
        &first.as_str()[..4],
        named[0],
        named[1]
    );
    assert!(run.stderr.contains(&expected), "{}", run.stderr);
    assert!(!run.stderr.contains("canary-"));
    eprintln!("4-digit collision after {} proposals", seen.len());
}

/// `serde_json` escapes only C0 controls: a C1 CSI (U+009B), a bidi override
/// or an invisible character in a proposal would reach the terminal raw
/// through any `--json` output or `events`. Each is escaped, and the JSON
/// still parses to the exact text.
#[test]
fn json_and_events_outputs_escape_every_hidden_character() {
    let mut s = Scene::new();
    let text = "canary-c1 \u{9b}31m red\n\u{202e}txet\u{200b}";
    let id = s.propose(text, "why\u{9b}2J");
    let shown = s.json(&["proposal-show", id.as_str(), "--json", "--show-sensitive"]);
    assert_eq!(shown["proposedText"], text, "{shown}");
    let listed = s.json(&["proposal-list", "--json", "--show-sensitive"]);
    assert!(listed.to_string().contains("canary-c1"), "{listed}");
    s.json(&["memory-log", "--json", "--show-sensitive"]);
    let events = s.ok(&["events", "--json", "--show-sensitive"]);
    let parsed: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        parsed.iter().any(|e| e.to_string().contains("canary-c1")),
        "{events}"
    );
    let plain = s.ok(&["events", "--show-sensitive"]);
    assert!(plain.contains("canary-c1 \\u009b31m"), "{plain}");
}
