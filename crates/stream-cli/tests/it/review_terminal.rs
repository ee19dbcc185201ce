//! The review surface on a real terminal: `thestream` runs with its stdout
//! on a pseudo-terminal. Tables fit the terminal's width (its own, or
//! `COLUMNS`); diffs are coloured unless `NO_COLOR` is set, and the only
//! escape sequences are the colours added after escaping.

use std::io::Read as _;
use std::path::Path;
use std::process::Stdio;

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};
use stream_core::terminal::columns;

use crate::common;
use crate::review::{Scene, golden, hostile};

/// Runs `thestream` with its stdout on a pseudo-terminal `cols` wide, `env`
/// added; the terminal's output with `\r\n` back to `\n`, and the exit code.
fn on_terminal(cwd: &Path, args: &[&str], cols: u16, env: &[(&str, &str)]) -> (i32, String) {
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().unwrap())
        .unwrap();
    let size = Winsize {
        ws_row: 40,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    tcsetwinsize(&slave, size).unwrap();
    let mut command = common::command(cwd, args);
    command
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(slave)
        .stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    // The slave's last copy in this process goes with the command.
    drop(command);
    let mut master = std::fs::File::from(master);
    let mut out = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match master.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            // Linux: every slave descriptor closed.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
            Err(e) => panic!("reading the terminal: {e}"),
        }
    }
    let done = child.wait_with_output().unwrap();
    let text = String::from_utf8(out).unwrap().replace("\r\n", "\n");
    assert!(
        done.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    (done.status.code().unwrap_or(-1), text)
}

/// The colours `render_styled` adds, and nothing else.
const SGR: [&str; 4] = ["\u{1b}[1m", "\u{1b}[32m", "\u{1b}[31m", "\u{1b}[0m"];

/// Every ESC in `text` starts one of the added colours.
fn only_added_colours(text: &str) {
    for (at, _) in text.match_indices('\u{1b}') {
        assert!(
            SGR.iter().any(|s| text[at..].starts_with(s)),
            "a raw escape at {at}: {:?}",
            &text[at..(at + 12).min(text.len())]
        );
    }
}

fn widest(text: &str) -> usize {
    text.lines().map(columns).max().unwrap_or_default()
}

/// `proposal-list`'s lines are never wider than the terminal (its own width,
/// or `COLUMNS` when set); each cut summary still says how much it leaves
/// out. A wide summary of CJK text counts two columns a character. (The
/// fixed columns themselves need 64 to 91 columns, by content.)
#[test]
fn proposal_list_fits_the_terminal_s_width() {
    let mut s = Scene::new();
    let hostile = s.propose(&hostile(), "asked");
    s.propose(&"日本語のメモ ".repeat(30), "asked");
    let cwd = s.home.path();
    for cols in [80, 100, 120, 200] {
        let (_, table) = on_terminal(cwd, &["proposal-list"], cols, &[]);
        assert!(widest(&table) <= usize::from(cols), "{cols}:\n{table}");
        let row = table
            .lines()
            .position(|l| l.starts_with(&hostile.as_str()[..12]))
            .unwrap();
        // The summary: beside the row, or under it when too narrow.
        let summary = [
            table.lines().nth(row).unwrap(),
            table.lines().nth(row + 1).unwrap(),
        ]
        .join("\n");
        assert!(summary.contains("… 39 more lines"), "{cols}:\n{table}");
        if cols == 120 {
            golden("list_terminal_120", &table);
        }
        if cols == 80 {
            golden("list_terminal_80", &table);
        }
    }
    // COLUMNS wins over the terminal's own width.
    let (_, table) = on_terminal(cwd, &["proposal-list"], 200, &[("COLUMNS", "90")]);
    assert!(widest(&table) <= 90, "{table}");
    assert!(widest(&table) > 80, "{table}");
    // Piped: the layout of the goldens, whatever COLUMNS says.
    let piped = s.ok(&["proposal-list", "--show-sensitive"]);
    assert!(widest(&piped) > 200, "{piped}");
}

/// `memory-log`'s lines fit too: a line that would pass the edge continues
/// on an indented line, and a long actor is cut with an announcement.
#[test]
fn memory_log_fits_the_terminal_s_width() {
    let mut s = Scene::new();
    let id = s.propose("canary-log-width: x", "asked");
    let actor = "operator-with-a-very-long-name-".repeat(4);
    let run = s.run(&[
        "proposal-decision",
        "--proposal",
        id.as_str(),
        "--accept",
        "--actor",
        &actor,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let cwd = s.home.path();
    for cols in [60, 80, 100] {
        let (_, log) = on_terminal(cwd, &["memory-log"], cols, &[]);
        assert!(widest(&log) <= usize::from(cols), "{cols}:\n{log}");
        assert!(
            log.contains("more chars: memory-log --json"),
            "{cols}:\n{log}"
        );
    }
    let (_, wide) = on_terminal(cwd, &["memory-log"], 300, &[]);
    assert_eq!(wide.lines().count(), 2, "{wide}");
    assert!(wide.contains(&actor), "{wide}");
}

/// On a terminal a diff is coloured: added lines green, removed red,
/// headers bold; with `NO_COLOR` (any value, empty too) or piped, none. A
/// proposal's own escape sequences are shown escaped, never as colour.
#[test]
fn diffs_are_coloured_on_a_terminal_unless_no_color() {
    let mut s = Scene::new();
    let id = s.propose("canary-colour \u{1b}[32mfake green\u{1b}[0m", "asked");
    let cwd = s.home.path();
    let (_, shown) = on_terminal(cwd, &["proposal-show", id.as_str()], 120, &[]);
    only_added_colours(&shown);
    assert!(shown.contains("\u{1b}[1m--- memory.md@"), "{shown}");
    assert!(shown.contains("\u{1b}[1m@@ "), "{shown}");
    assert!(
        shown.contains("\u{1b}[32m+canary-colour \\u{1b}[32mfake green\\u{1b}[0m\u{1b}[0m"),
        "{shown}"
    );
    // The proposed text outside the diff is never coloured.
    assert!(shown.contains("\n  canary-colour \\u{1b}[32m"), "{shown}");

    // A removed line: memory-log --patch of a hand edit that drops one.
    std::fs::write(s.memory_path(), "---\nid: memory-1\n---\n").unwrap();
    let (_, patch) = on_terminal(cwd, &["memory-log", "--patch"], 120, &[]);
    only_added_colours(&patch);
    assert!(patch.contains("\u{1b}[31m-# Memory\u{1b}[0m"), "{patch}");

    for value in ["1", ""] {
        for args in [
            &["proposal-show", id.as_str()][..],
            &["memory-log", "--patch"],
        ] {
            let (_, plain) = on_terminal(cwd, args, 120, &[("NO_COLOR", value)]);
            assert!(
                !plain.contains('\u{1b}'),
                "NO_COLOR={value:?} {args:?}:\n{plain}"
            );
            assert!(plain.contains("+"), "{plain}");
        }
    }
    let piped = s.ok(&["proposal-show", id.as_str(), "--show-sensitive"]);
    assert!(!piped.contains('\u{1b}'), "{piped}");
}
