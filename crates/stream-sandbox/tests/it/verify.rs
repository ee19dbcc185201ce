//! The parent's decision on a hello-frame report, and the report's wire form.

use stream_sandbox::{
    Enforcement, FdReport, LandlockReport, LandlockStatus, Missing, NamespaceReport, NotEnforced,
    RlimitReport, SeccompArch, SeccompReport, SeccompStatus, verify,
};

use stream_testkit::capture::Captured;

use crate::common::*;

fn enforced() -> Enforcement {
    Enforcement {
        fds: FdReport {
            inherited_closed: 0,
        },
        rlimits: RlimitReport {
            address_space_bytes: 1 << 30,
            cpu_seconds: 30,
            open_files: 8,
            processes: 0,
            file_size_bytes: 0,
            core_bytes: 0,
        },
        namespaces: NamespaceReport {
            user: true,
            network: true,
            mount: true,
            ipc: true,
        },
        no_new_privs: true,
        dumpable: false,
        landlock: LandlockReport {
            kernel_abi: Some(7),
            ruleset_abi: 7,
            status: LandlockStatus::FullyEnforced,
        },
        seccomp: SeccompReport {
            status: SeccompStatus::Installed,
            arch: SeccompArch::X86_64,
            allowed_syscalls: 27,
        },
    }
}

fn refused(missing: &[Missing]) -> Result<(), NotEnforced> {
    Err(NotEnforced {
        missing: missing.to_vec(),
    })
}

#[test]
fn verify_refuses_every_shortfall_unless_the_dev_switch_is_on() {
    type Edit = fn(&mut Enforcement);
    let rows: &[(&str, Edit, &[Missing])] = &[
        ("fully enforced", |_| {}, &[]),
        (
            "no namespaces (not required)",
            |e| {
                e.namespaces = NamespaceReport {
                    user: false,
                    network: false,
                    mount: false,
                    ipc: false,
                }
            },
            &[],
        ),
        // "the parent refuses a worker that did not enforce Landlock"
        (
            "without Landlock",
            |e| {
                e.landlock = LandlockReport {
                    kernel_abi: None,
                    ruleset_abi: 0,
                    status: LandlockStatus::NotEnforced,
                }
            },
            &[Missing::Landlock],
        ),
        (
            "Landlock partially enforced",
            |e| e.landlock.status = LandlockStatus::PartiallyEnforced,
            &[Missing::Landlock],
        ),
        // "… and seccomp"
        (
            "without seccomp",
            |e| e.seccomp.status = SeccompStatus::NotInstalled,
            &[Missing::Seccomp],
        ),
        (
            "without either",
            |e| {
                e.landlock.status = LandlockStatus::NotEnforced;
                e.seccomp.status = SeccompStatus::NotInstalled;
            },
            &[Missing::Landlock, Missing::Seccomp],
        ),
        (
            "without no_new_privs",
            |e| e.no_new_privs = false,
            &[Missing::NoNewPrivs],
        ),
        (
            "may start processes",
            |e| e.rlimits.processes = 1,
            &[Missing::ProcessLimit],
        ),
        (
            "may write files",
            |e| e.rlimits.file_size_bytes = 1,
            &[Missing::FileSizeLimit],
        ),
        (
            "may dump core",
            |e| e.rlimits.core_bytes = u64::MAX,
            &[Missing::CoreLimit],
        ),
        (
            "unlimited memory, CPU and files",
            |e| {
                e.rlimits.address_space_bytes = u64::MAX;
                e.rlimits.cpu_seconds = u64::MAX;
                e.rlimits.open_files = u64::MAX;
            },
            &[
                Missing::AddressSpaceLimit,
                Missing::CpuLimit,
                Missing::OpenFilesLimit,
            ],
        ),
    ];
    for (name, edit, missing) in rows {
        let mut e = enforced();
        edit(&mut e);
        let expected = if missing.is_empty() {
            Ok(())
        } else {
            refused(missing)
        };
        assert_eq!(verify(&e, false), expected, "{name}");
        assert_eq!(verify(&e, true), Ok(()), "{name} with the dev switch");
    }
}

fn logs_of(f: impl FnOnce()) -> String {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    String::from_utf8(captured.bytes()).unwrap()
}

#[test]
fn the_dev_switch_is_logged_loudly_on_every_call() {
    let mut bare = enforced();
    bare.landlock.status = LandlockStatus::NotEnforced;
    bare.seccomp.status = SeccompStatus::NotInstalled;
    let logs = logs_of(|| {
        assert_eq!(verify(&enforced(), true), Ok(()));
        assert_eq!(verify(&bare, true), Ok(()));
    });
    assert_eq!(
        logs.matches("WARN").count(),
        2,
        "one warning per call: {logs}"
    );
    assert_eq!(logs.matches("allow_unenforced is ON").count(), 2, "{logs}");
    assert!(logs.contains("ERROR"), "{logs}");
    assert!(logs.contains("NOT ENFORCED"), "{logs}");
    assert!(logs.contains("landlock, seccomp"), "{logs}");

    // Without the switch a refusal is logged, a pass is silent.
    let logs = logs_of(|| {
        assert_eq!(verify(&enforced(), false), Ok(()));
        assert!(verify(&bare, false).is_err());
    });
    assert_eq!(logs.matches("ERROR").count(), 1, "{logs}");
    assert!(!logs.contains("WARN"), "{logs}");
}

#[test]
fn a_real_probe_passes_verify_without_the_dev_switch() {
    let line = run(&["enforcement"]).line.unwrap();
    let e = enforcement_of(&line);
    assert_eq!(verify(&e, false), Ok(()));
}

#[test]
fn refusal_codes_are_golden() {
    let codes: Vec<_> = Missing::ALL.iter().map(|m| m.as_str()).collect();
    insta::assert_snapshot!(codes.join("\n"));
    insta::assert_snapshot!(
        NotEnforced {
            missing: vec![Missing::Landlock, Missing::Seccomp]
        }
        .to_string(),
        @"worker sandbox not enforced: landlock, seccomp"
    );
}

#[test]
fn enforcement_wire_form_is_golden() {
    insta::assert_json_snapshot!(enforced());
}

#[test]
fn enforcement_refuses_unknown_fields() {
    let mut json = serde_json::to_value(enforced()).unwrap();
    json["seccomp"]["extra"] = serde_json::Value::Bool(true);
    assert!(serde_json::from_value::<Enforcement>(json).is_err());
    let mut json = serde_json::to_value(enforced()).unwrap();
    json["landlock"]["status"] = serde_json::Value::from("enforced-enough");
    assert!(serde_json::from_value::<Enforcement>(json).is_err());
}
