//! Helpers: run the real `thestream` binary in a temporary folder.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Self {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// A temporary folder initialized with `thestream init`.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn init() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let run = thestream(dir.path(), &["init", "."]);
        assert_eq!(run.code, 0, "init failed: {}", run.stderr);
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn config(&self) -> PathBuf {
        self.path().join("thestream.toml")
    }

    pub fn run(&self, args: &[&str]) -> Run {
        thestream(self.path(), args)
    }

    /// The signing key `init` wrote, which its config lists.
    pub fn signing_key(&self) -> stream_proposals::authority::SigningKey {
        let bytes = std::fs::read(self.path().join(".thestream/signing.key")).unwrap();
        stream_proposals::authority::SigningKey::from_bytes(&bytes.try_into().unwrap())
    }

    pub fn store(&self) -> stream_store::SqliteStore {
        std::fs::create_dir_all(self.path().join(".thestream")).unwrap();
        stream_store::SqliteStore::open(&self.path().join(".thestream/store.db")).unwrap()
    }
}

/// The `thestream` command with `args` in `cwd`, with a clean environment.
pub fn command(cwd: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_thestream"));
    command
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    command
}

/// Runs `thestream` with `args` in `cwd`, with a clean environment.
pub fn thestream(cwd: &Path, args: &[&str]) -> Run {
    command(cwd, args).output().unwrap().into()
}

/// The variable that runs the end-to-end suites on PostgreSQL:
/// `THESTREAM_TEST_BACKEND=postgres` (with a server from
/// `stream_store::pgtest`, e.g. under `scripts/with-postgres`).
pub const BACKEND_ENV: &str = "THESTREAM_TEST_BACKEND";

/// A loopback stack running this build's `thestream` and `thestream-worker`,
/// on the backend [`BACKEND_ENV`] names (SQLite by default).
pub fn stack(api: stream_core::payload::ProviderApi) -> stream_testkit::stack::Stack {
    let mut s = sqlite_stack(api);
    match std::env::var(BACKEND_ENV).as_deref() {
        Ok("postgres") => {
            let url = stream_store::pgtest::fresh_url()
                .expect("THESTREAM_TEST_BACKEND=postgres needs a PostgreSQL server");
            s.use_postgres(&url).unwrap();
        }
        Ok("sqlite") | Err(_) => {}
        Ok(other) => panic!("{BACKEND_ENV}={other}: expected sqlite or postgres"),
    }
    s
}

/// A loopback stack on SQLite, whatever [`BACKEND_ENV`] says (for tests that
/// read or damage the store file itself).
pub fn sqlite_stack(api: stream_core::payload::ProviderApi) -> stream_testkit::stack::Stack {
    let worker = stream_testkit::bin::binary("thestream-worker").unwrap();
    stream_testkit::stack::Stack::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_thestream")),
        &worker,
        api,
    )
    .unwrap()
}

/// Points the config's `sandbox.worker` at `worker`.
pub fn configure_worker(s: &stream_testkit::stack::Stack, worker: &Path) {
    let path = s.path().join("thestream.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    let start = config.find("worker = \"").unwrap();
    let end = start + 10 + config[start + 10..].find('"').unwrap();
    let config = format!(
        "{}worker = \"{}{}",
        &config[..start],
        worker.display(),
        &config[end..]
    );
    std::fs::write(path, config).unwrap();
}

/// A running `serve` of a stack, stopped with SIGTERM when dropped.
pub struct Serve(pub std::process::Child);

impl Serve {
    /// Starts `serve` in the stack's home, its output discarded.
    pub fn start(s: &stream_testkit::stack::Stack) -> Self {
        Self(
            s.command(&["serve"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    /// SIGTERM: serve finishes what it is committing (a delivery receipt
    /// included) and exits 0, so nothing it sent is sent again later.
    pub fn stop(mut self) {
        let status = self.terminate();
        assert!(status.success(), "serve exits 0 on SIGTERM: {status:?}");
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        self.0.wait().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.terminate();
        }
    }
}
