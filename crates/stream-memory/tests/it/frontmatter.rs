//! Frontmatter: one row per case, each error variant distinct.

use proptest::prelude::*;
use stream_memory::frontmatter::{FrontmatterError, parse, parse_bytes};

#[test]
fn frontmatter_table() {
    use FrontmatterError::*;
    let rows: &[(&str, Result<&str, FrontmatterError>)] = &[
        // A leading `---` line, YAML, the next `---` line.
        ("---\nid: memory-1\n---\n# Memory\n", Ok("memory-1")),
        ("---\nid: a\ntitle: Notes\ntags: [x, y]\n---\nbody", Ok("a")),
        ("---\r\nid: crlf\r\n---\r\nbody\r\n", Ok("crlf")),
        ("---  \nid: spaced-fences\n---\t\nbody", Ok("spaced-fences")),
        ("---\nid: no-body\n---", Ok("no-body")),
        ("---\nid: 'quoted id'\n---\n", Ok("quoted id")),
        ("---\nid: a\n---\nlater\n---\nnot frontmatter\n", Ok("a")),
        // Missing: the first line is not a fence.
        ("", Err(Missing)),
        ("# Memory\n---\nid: a\n---\n", Err(Missing)),
        ("\n---\nid: a\n---\n", Err(Missing)),
        (" ---\nid: a\n---\n", Err(Missing)),
        ("----\nid: a\n----\n", Err(Missing)),
        ("--- id: a\n---\n", Err(Missing)),
        ("\u{feff}---\nid: a\n---\n", Err(Missing)),
        // Opened, never closed.
        ("---\nid: a\n", Err(Unterminated)),
        ("---\nid: a\n...\n", Err(Unterminated)),
        ("---", Err(Unterminated)),
        // Malformed YAML.
        ("---\nid: [a\n---\n", Err(MalformedYaml { line: 0 })),
        ("---\nid: a\nid: b\n---\n", Err(MalformedYaml { line: 0 })),
        (
            "---\nid: a\n  b: : c\n---\n",
            Err(MalformedYaml { line: 0 }),
        ),
        ("---\n\tid: a\n---\n", Err(MalformedYaml { line: 0 })),
        // Not a mapping.
        ("---\n---\n", Err(NotAMapping)),
        ("---\n\n  \n---\n", Err(NotAMapping)),
        ("---\n- id\n- a\n---\n", Err(NotAMapping)),
        ("---\njust text\n---\n", Err(NotAMapping)),
        ("---\n42\n---\n", Err(NotAMapping)),
        ("---\n~\n---\n", Err(NotAMapping)),
        // No `id`.
        ("---\ntitle: x\n---\n", Err(MissingId)),
        ("---\nID: a\n---\n", Err(MissingId)),
        ("---\n{}\n---\n", Err(MissingId)),
        // Empty `id`.
        ("---\nid:\n---\n", Err(EmptyId)),
        ("---\nid: ''\n---\n", Err(EmptyId)),
        ("---\nid: '   '\n---\n", Err(EmptyId)),
        ("---\nid: ~\n---\n", Err(EmptyId)),
        // `id` of another type.
        ("---\nid: 42\n---\n", Err(IdNotAString)),
        ("---\nid: true\n---\n", Err(IdNotAString)),
        ("---\nid: [a]\n---\n", Err(IdNotAString)),
        ("---\nid: {a: b}\n---\n", Err(IdNotAString)),
    ];
    for (doc, expected) in rows {
        let got = parse(doc).map(|fm| fm.id().to_owned());
        match (expected, &got) {
            (Ok(id), Ok(found)) => assert_eq!(found, id, "{doc:?}"),
            // The line is where the parser stopped; the variant is the rule.
            (Err(MalformedYaml { .. }), Err(MalformedYaml { .. })) => {}
            (Err(e), Err(found)) => assert_eq!(found, e, "{doc:?}"),
            _ => panic!("{doc:?}: expected {expected:?}, got {got:?}"),
        }
    }
}

#[test]
fn malformed_yaml_reports_the_document_line() {
    let err = parse("---\nid: a\nlist: [1, 2\nmore: x\n---\n").unwrap_err();
    let FrontmatterError::MalformedYaml { line } = err else {
        panic!("{err:?}")
    };
    assert!((3..=5).contains(&line), "{line}");
}

#[test]
fn bytes_must_be_utf8() {
    assert_eq!(
        parse_bytes(b"---\nid: \xff\n---\n"),
        Err(FrontmatterError::NotUtf8)
    );
    assert_eq!(parse_bytes(b"---\nid: a\n---\n").unwrap().id(), "a");
}

#[test]
fn errors_never_carry_content() {
    let canary = stream_testkit::canary::Canary::new("frontmatter");
    let c = canary.as_str();
    for doc in [
        format!("---\nid: [{c}\n---\n"),
        format!("---\n{c}: : :\n---\n"),
        format!("---\n- {c}\n---\n"),
        format!("---\ntitle: {c}\n---\n"),
        format!("{c}\n"),
        format!("---\n{c}\n"),
    ] {
        let err = parse(&doc).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(!canary.found_in(&shown), "{shown}");
    }
}

proptest! {
    #[test]
    fn any_text_parses_or_refuses_without_panicking(doc in "(---\n)?[a-z:\\[\\]{} \n'-]{0,80}(\n---\n)?") {
        if let Ok(fm) = parse(&doc) {
            prop_assert!(!fm.id().trim().is_empty());
            prop_assert!(fm.body_start() <= doc.len());
        }
    }
}
