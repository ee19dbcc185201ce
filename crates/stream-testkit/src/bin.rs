//! Locating the workspace's real binaries for end-to-end tests.
//!
//! Tests run from `target/<profile>/deps/`; the binaries sit one folder up.
//! Each binary is brought up to date once per test process with the same
//! cargo and profile, whether or not a file is there: `cargo test -p` of one
//! package does not rebuild another package's binary, and a stale one (an
//! older worker, say) would be tested instead without a word.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The binaries this process has brought up to date.
static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A child process killed (SIGKILL) and reaped when dropped, so that a
/// failing assertion never leaves it running.
#[derive(Debug)]
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Why a binary could not be found or built.
#[derive(Debug)]
pub struct BinError(pub String);

impl std::fmt::Display for BinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BinError {}

/// The `target/<profile>` folder of the running test.
pub fn profile_dir() -> Result<PathBuf, BinError> {
    let exe = std::env::current_exe().map_err(|e| BinError(format!("current_exe: {e}")))?;
    let deps = exe
        .parent()
        .ok_or_else(|| BinError("test binary has no folder".into()))?;
    let dir = if deps.ends_with("deps") {
        deps.parent().unwrap_or(deps)
    } else {
        deps
    };
    Ok(dir.to_owned())
}

/// The path of workspace binary `name` (e.g. `thestream`, `thestream-worker`),
/// brought up to date by cargo the first time this process asks for it (a
/// no-op build when it is fresh).
pub fn binary(name: &str) -> Result<PathBuf, BinError> {
    let dir = profile_dir()?;
    let path = dir.join(name);
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    if !built.iter().any(|b| b == name) {
        build(name, &dir)?;
        built.push(name.to_owned());
    }
    Ok(path)
}

/// Whether `name` is a variable cargo sets for the crate it runs (this test
/// or bench binary), not one that configures cargo. A build script that
/// reads one is fingerprinted on it (ring reads `CARGO_MANIFEST_DIR`), so
/// handing them on made every build from here differ from a plain `cargo
/// build` or `cargo test`: ring and everything above it, `thestream`
/// included, were compiled again at each switch between the two.
fn set_for_the_running_crate(name: &str) -> bool {
    matches!(
        name,
        "OUT_DIR"
            | "CARGO_CRATE_NAME"
            | "CARGO_BIN_NAME"
            | "CARGO_PRIMARY_PACKAGE"
            | "CARGO_TARGET_TMPDIR"
            | "CARGO_RUSTC_CURRENT_DIR"
    ) || ["CARGO_MANIFEST_", "CARGO_PKG_", "CARGO_BIN_EXE_"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// The `cargo build` of binary `name`, in the environment a plain `cargo`
/// command would have.
///
/// It selects the whole workspace, as `cargo test --workspace` and the
/// README's `cargo build --release --bins` do, so that dependencies get the
/// same features and are reused. `-p <package>` resolves features for that
/// package alone: serde, regex and the rest below the worker were compiled
/// a second time (23 crates, about a minute of CI).
fn build_command(name: &str, dir: &Path) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--workspace", "--bin", name]);
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    for (var, _) in std::env::vars_os() {
        if var.to_str().is_some_and(set_for_the_running_crate) {
            cmd.env_remove(var);
        }
    }
    cmd
}

fn build(name: &str, dir: &Path) -> Result<(), BinError> {
    let status = build_command(name, dir)
        .status()
        .map_err(|e| BinError(format!("cargo build {name}: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(BinError(format!("cargo build of {name} failed: {status}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The build sees what a plain `cargo` command would: the variables
    /// cargo set for this test binary are removed, cargo's own are kept.
    #[test]
    fn variables_of_the_running_crate_are_not_handed_to_cargo() {
        for (name, set) in [
            ("CARGO_MANIFEST_DIR", true),
            ("CARGO_MANIFEST_PATH", true),
            ("CARGO_PKG_NAME", true),
            ("CARGO_PKG_VERSION_MAJOR", true),
            ("CARGO_BIN_EXE_thestream", true),
            ("CARGO_CRATE_NAME", true),
            ("CARGO_PRIMARY_PACKAGE", true),
            ("CARGO_TARGET_TMPDIR", true),
            ("OUT_DIR", true),
            ("CARGO", false),
            ("CARGO_HOME", false),
            ("CARGO_TARGET_DIR", false),
            ("CARGO_INCREMENTAL", false),
            ("CARGO_PROFILE_RELEASE_DEBUG", false),
            ("CARGO_TERM_COLOR", false),
            ("RUSTFLAGS", false),
            ("PATH", false),
        ] {
            assert_eq!(set_for_the_running_crate(name), set, "{name}");
        }
        // `cargo test` sets it for this test binary: the build must not
        // see it.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let cmd = build_command("thestream", Path::new("target/debug"));
        let removed: Vec<_> = cmd
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| name.to_owned())
            .collect();
        assert!(
            removed.iter().any(|n| n == "CARGO_MANIFEST_DIR"),
            "{removed:?}"
        );
        assert!(
            cmd.get_envs().all(|(name, _)| name != "CARGO"),
            "cargo's own path is kept"
        );
    }

    /// The build resolves features for the whole workspace, as the test
    /// run did, not for the binary's package alone: otherwise the
    /// dependencies below it are compiled again with other features.
    #[test]
    fn a_binary_is_built_with_the_features_of_the_whole_workspace() {
        let cmd = build_command("thestream-worker", Path::new("target/release"));
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(
            args,
            [
                "build",
                "--workspace",
                "--bin",
                "thestream-worker",
                "--release"
            ]
        );
    }

    /// A file of the binary's name is not taken on trust: cargo is asked
    /// every first time, so an unknown binary fails even when the file is
    /// there.
    #[test]
    fn a_binary_that_is_there_is_still_built_by_cargo() {
        let name = "stream-testkit-no-such-binary";
        let path = profile_dir().unwrap().join(name);
        std::fs::write(&path, b"stale").unwrap();
        let got = binary(name);
        std::fs::remove_file(&path).unwrap();
        assert!(got.is_err(), "a stale file was taken as the binary");
    }
}
