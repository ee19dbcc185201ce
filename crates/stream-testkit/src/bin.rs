//! Locating the workspace's real binaries for end-to-end tests.
//!
//! Tests run from `target/<profile>/deps/`; the binaries sit one folder up.
//! When a binary is missing (a test run with `-p` of another package), it is
//! built once with the same cargo and profile.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

static BUILD_LOCK: Mutex<()> = Mutex::new(());

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
/// built from package `package` if it is not there yet.
pub fn binary(package: &str, name: &str) -> Result<PathBuf, BinError> {
    let dir = profile_dir()?;
    let path = dir.join(name);
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if !path.is_file() {
        build(package, name, &dir)?;
    }
    Ok(path)
}

fn build(package: &str, name: &str, dir: &Path) -> Result<(), BinError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", package, "--bin", name]);
    if dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .map_err(|e| BinError(format!("cargo build {name}: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(BinError(format!("cargo build of {name} failed: {status}")))
    }
}
