//! `declaration-check` and `scan`, through the binary.

use serde_json::Value;
use stream_declarations::LoadedDeclaration;
use stream_testkit::canary::Canary;

use crate::common::{Home, thestream};

fn field(stdout: &str, key: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in {stdout}"))
        .to_owned()
}

#[test]
fn declaration_check_passes_on_every_shipped_declaration_written_by_init() {
    let home = Home::init();
    let dir = home.path().join("declarations");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let run = home.run(&["declaration-check", path.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{}: {}", path.display(), run.stderr);
        let loaded = LoadedDeclaration::load(&path).unwrap();
        assert_eq!(field(&run.stdout, "id"), loaded.id());
        assert_eq!(field(&run.stdout, "version"), loaded.version().to_string());
        assert_eq!(
            field(&run.stdout, "fingerprint"),
            loaded.fingerprint.as_str()
        );
        checked.push(format!("{}@{}", loaded.id(), loaded.version()));
    }
    checked.sort();
    assert_eq!(
        checked,
        [
            "telegram-conversation@17",
            "telegram-conversation@18",
            "telegram-replies@2"
        ]
    );
}

#[test]
fn declaration_check_needs_no_config() {
    let home = Home::init();
    let decl = home
        .path()
        .join("declarations/telegram-conversation.v18.yaml");
    let elsewhere = tempfile::tempdir().unwrap();
    let run = thestream(
        elsewhere.path(),
        &["declaration-check", decl.to_str().unwrap()],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn declaration_check_exits_2_naming_the_offending_field() {
    let home = Home::init();
    let v18 = std::fs::read_to_string(
        home.path()
            .join("declarations/telegram-conversation.v18.yaml"),
    )
    .unwrap();
    let cases = [
        (
            v18.replace("externalActions: false", "externalActions: true"),
            "policy.externalActions",
        ),
        (
            v18.replace("  tools: []", "  tools: [web_search]"),
            "policy.tools",
        ),
        (v18.replace("kind: pi", "kind: review"), "kind"),
        (v18.replace("kind: pi", "kind: shell"), "kind"),
        (
            v18.replace(
                "context: telegram-conversation",
                "context: telegram-command",
            ),
            "context",
        ),
        (format!("{v18}temperature: 2\n"), "temperature"),
        (
            v18.replace("maxOutputTokens: 1024", "maxOutputTokens: 1024\n  model: x"),
            "provider.model",
        ),
        (
            v18.replace("prompts/telegram-conversation.v18.md", "prompts/absent.md"),
            "prompt",
        ),
    ];
    for (i, (text, field)) in cases.iter().enumerate() {
        // Beside the shipped one, so the prompt path resolves the same way.
        let path = home.path().join(format!("declarations/bad-{i}.yaml"));
        std::fs::write(&path, text).unwrap();
        let run = home.run(&["declaration-check", path.to_str().unwrap()]);
        assert_eq!(run.code, 2, "{field}: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!("`{field}`")),
            "{field}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{}", run.stdout);
    }
    let run = home.run(&["declaration-check", "no-such-file.yaml"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

fn count(stdout: &str, key: &str) -> u64 {
    field(stdout, key)
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn scan_records_memory_once_and_prints_counts() {
    let home = Home::init();
    let run = home.run(&["scan"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        field(&run.stdout, "source"),
        "filesystem:telegram-agent-context"
    );
    assert_eq!(count(&run.stdout, "files"), 1);
    assert_eq!(count(&run.stdout, "new versions"), 1);
    assert_eq!(count(&run.stdout, "skipped"), 0);

    let run = home.run(&["scan"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(count(&run.stdout, "new versions"), 0);
    assert_eq!(count(&run.stdout, "unchanged"), 1);

    let memory = home.path().join("context/memory.md");
    let mut text = std::fs::read_to_string(&memory).unwrap();
    text.push_str("\nLikes tea.\n");
    std::fs::write(&memory, text).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", home.path().join("context/host.md")).unwrap();
    let run = home.run(&["scan"]);
    assert_eq!(count(&run.stdout, "new versions"), 1, "{}", run.stdout);
    assert!(run.stdout.contains("symlinks 1"), "{}", run.stdout);

    let run = home.run(&[
        "events",
        "--json",
        "--source",
        "filesystem:telegram-agent-context",
    ]);
    let events: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2);
    assert!(
        events
            .iter()
            .all(|e| e["type"] == "stream.filesystem.file.changed")
    );
    assert!(
        events
            .iter()
            .all(|e| e["sensitive"] == true && e["payload"].is_null())
    );
}

#[test]
fn scan_never_prints_content_and_refuses_a_symlinked_root() {
    let home = Home::init();
    let canary = Canary::new("memory");
    std::fs::write(
        home.path().join("context/memory.md"),
        format!("---\nid: m\n---\n{canary}\n"),
    )
    .unwrap();
    let run = home.run(&["scan"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!canary.found_in(&run.stdout) && !canary.found_in(&run.stderr));

    std::fs::rename(
        home.path().join("context"),
        home.path().join("real-context"),
    )
    .unwrap();
    std::os::unix::fs::symlink("real-context", home.path().join("context")).unwrap();
    let run = home.run(&["scan"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("symbolic link"), "{}", run.stderr);
}
