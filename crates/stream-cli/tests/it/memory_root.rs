//! One store, one context root, through the binary: a second config whose
//! `[context]` points elsewhere is refused (exit 2, both ids, nothing
//! written); an append keeps a CRLF base's bytes, and `proposal-show`
//! shows exactly what is written.

use stream_core::payload::{MaterializationFailed, MemoryChangeMaterialized, MemoryOperation};

use crate::memory_decisions::{Scene, no_leak};

const OTHER: &str = "---\nid: memory-2\n---\n# Another bot\n";

/// Points the config's `[context] root` at `root` (relative to the home).
fn point_at(s: &Scene, root: &str) {
    let config = s.home.config();
    let text = std::fs::read_to_string(&config).unwrap();
    let line = |r: &str| format!("root = \"{r}\"");
    let from = ["context", "context-b"]
        .into_iter()
        .find(|r| text.contains(&line(r)))
        .unwrap();
    std::fs::write(&config, text.replace(&line(from), &line(root))).unwrap();
}

#[test]
fn a_second_config_with_another_context_root_is_refused_and_writes_nothing() {
    let mut s = Scene::new();
    let run = s.decide(&s.w.memory.clone(), &["--accept"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let a = s.memory();

    let b = s.home.path().join("context-b");
    std::fs::create_dir(&b).unwrap();
    std::fs::write(b.join("memory.md"), OTHER).unwrap();
    point_at(&s, "context-b");
    assert_eq!(s.run(&["scan"]).code, 0);
    let proposal = s.propose(MemoryOperation::Append, "canary-root-b: likes coffee");
    let run = s.decide(&proposal, &["--accept"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("memory-1") && run.stderr.contains("memory-2"),
        "{}",
        run.stderr
    );
    no_leak(&run, "canary-root-b");
    no_leak(&run, "context-b");
    assert_eq!(std::fs::read_to_string(b.join("memory.md")).unwrap(), OTHER);
    assert_eq!(
        std::fs::read_dir(&b).unwrap().count(),
        1,
        "no temporary left"
    );
    assert_eq!(s.memory(), a);
    assert_eq!(s.count::<MemoryChangeMaterialized>(), 1);
    assert_eq!(s.count::<MaterializationFailed>(), 0);

    // The same root again works.
    point_at(&s, "context");
    assert_eq!(s.run(&["scan"]).code, 0);
    let proposal = s.propose(MemoryOperation::Append, "likes scones");
    let run = s.decide(&proposal, &["--accept"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(s.memory(), format!("{a}\nlikes scones\n"));
    assert_eq!(s.count::<MemoryChangeMaterialized>(), 2);
}

#[test]
fn a_crlf_base_keeps_its_bytes_and_the_shown_diff_is_what_is_written() {
    let mut s = Scene::new();
    let base = "---\r\nid: memory-1\r\n---\r\n# Memory\r\n- tea\r\n";
    std::fs::write(s.memory_path(), base).unwrap();
    assert_eq!(s.run(&["scan"]).code, 0);
    let proposal = s.propose(MemoryOperation::Append, "canary-crlf: scones\nand jam");
    let shown = s.run(&[
        "proposal-show",
        proposal.as_str(),
        "--json",
        "--show-sensitive",
    ]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let json: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    let diff = json["diff"].as_str().unwrap().to_owned();
    let mut from_diff = base.to_owned();
    for line in diff.split_inclusive('\n') {
        if let Some(added) = line.strip_prefix('+').filter(|_| !line.starts_with("+++")) {
            from_diff.push_str(added);
        }
    }
    let run = s.decide(&proposal, &["--accept"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let written = std::fs::read(s.memory_path()).unwrap();
    assert_eq!(
        written,
        format!("{base}\r\ncanary-crlf: scones\r\nand jam\r\n").as_bytes()
    );
    assert_eq!(from_diff.as_bytes(), written);
}
