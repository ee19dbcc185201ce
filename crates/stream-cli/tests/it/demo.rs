//! `thestream demo`, the README's run command, as a newcomer runs it.

use std::process::Command;

#[test]
fn the_demo_runs_the_whole_chain() {
    // The demo finds thestream-worker beside thestream.
    stream_testkit::bin::binary("thestream-worker").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_thestream"))
        .arg("demo")
        .env_clear()
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for expected in [
        "bot   › Sydney.",
        "bot   › I saved that as a memory suggestion.",
        "bot   › I saved that as a focus proposal.",
        "bot   › Usage: /focus <description>",
        "judgment ",
        "memory.md materialized",
        "focus proposals cannot be decided yet",
        "the provider saw the judged text in place of \"Sydney.\": true",
        "the provider saw the approved memory line: true",
        "1 examples written",
        "0 examples written",
        "6 provider requests for 6 model turns; the literal \"latest\" stored: false",
        "+- The owner prefers short answers.",
        "[-Sydney.-]{+The capital of Australia is Canberra.+}",
        "stale",
        "rejected",
        "materialized  proposal ",
        "edited",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
}
