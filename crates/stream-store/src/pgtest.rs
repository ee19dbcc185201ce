//! A PostgreSQL server for tests (feature `conformance`): the one named by
//! `THESTREAM_TEST_DATABASE_URL`, else a throwaway cluster this process
//! starts with the local `initdb` in a temporary directory, listening only
//! on a socket there. Each caller gets a fresh, empty database on it.
//!
//! `None` (the caller skips, saying why) when neither is possible: no
//! PostgreSQL installed, or running as root, which `initdb` refuses;
//! `.ci/run` and `scripts/with-postgres` start one as an unprivileged user
//! and set the variable.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The variable naming a server tests may create databases on.
pub const TEST_URL_ENV: &str = "THESTREAM_TEST_DATABASE_URL";

/// A server on which fresh databases are created.
#[derive(Debug)]
pub struct TestServer {
    admin: postgres::Config,
}

static SERVER: OnceLock<Result<TestServer, String>> = OnceLock::new();
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The shared server, or why there is none.
pub fn server() -> Result<&'static TestServer, &'static str> {
    SERVER
        .get_or_init(|| match std::env::var(TEST_URL_ENV) {
            Ok(url) if !url.is_empty() => url
                .parse()
                .map(|admin| TestServer { admin })
                .map_err(|e| format!("{TEST_URL_ENV} does not parse: {e}")),
            _ => start_cluster(),
        })
        .as_ref()
        .map_err(String::as_str)
}

/// A fresh database's URL, or `None` after printing why tests skip.
pub fn fresh_url() -> Option<String> {
    match server() {
        Ok(server) => Some(server.fresh_url()),
        Err(why) => {
            eprintln!("skipped: no PostgreSQL server for tests ({why})");
            None
        }
    }
}

impl TestServer {
    /// Creates an empty database and returns its key/value URL.
    pub fn fresh_url(&self) -> String {
        let name = format!(
            "thestream_test_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = self.admin.connect(postgres::NoTls).unwrap();
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
            .unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        self.url_for(&name)
    }

    /// The key/value URL of database `name` on this server.
    pub fn url_for(&self, name: &str) -> String {
        let mut parts = Vec::new();
        if let Some(host) = self.admin.get_hosts().first() {
            match host {
                postgres::config::Host::Tcp(h) => parts.push(format!("host={h}")),
                postgres::config::Host::Unix(p) => parts.push(format!("host={}", p.display())),
            }
        }
        if let Some(port) = self.admin.get_ports().first() {
            parts.push(format!("port={port}"));
        }
        if let Some(user) = self.admin.get_user() {
            parts.push(format!("user={user}"));
        }
        if let Some(password) = self.admin.get_password() {
            parts.push(format!("password={}", String::from_utf8_lossy(password)));
        }
        parts.push("sslmode=disable".into());
        parts.push(format!("dbname={name}"));
        parts.join(" ")
    }

    /// An admin connection (to end other sessions, read catalogs).
    pub fn admin(&self) -> postgres::Client {
        self.admin.connect(postgres::NoTls).unwrap()
    }
}

/// Where the PostgreSQL server binaries are: `PATH`, else Debian's layout.
pub fn bin_dir() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
    });
    on_path.or_else(|| {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|d| d.join("initdb").is_file())
            .collect();
        found.sort();
        found.pop()
    })
}

fn start_cluster() -> Result<TestServer, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Err(format!(
            "running as root, which initdb refuses; set {TEST_URL_ENV} (scripts/with-postgres does)"
        ));
    }
    let bin = bin_dir().ok_or("PostgreSQL is not installed (no initdb)")?;
    let dir = std::env::temp_dir().join(format!("thestream-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("data");
    let status = Command::new(bin.join("initdb"))
        .args(["-D"])
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("initdb: {e}"))?;
    if !status.success() {
        return Err(format!("initdb failed: {status}"));
    }
    spawn_postmaster(&bin.join("postgres"), &data, &dir)?;
    let admin: postgres::Config = format!(
        "host={} port=5432 user=postgres dbname=postgres",
        dir.display()
    )
    .parse()
    .map_err(|e| format!("{e}"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while admin.connect(postgres::NoTls).is_err() {
        if Instant::now() > deadline {
            return Err("the test cluster did not start within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(TestServer { admin })
}

/// Starts the postmaster from a thread that lives as long as the process,
/// with a parent-death signal, so the cluster ends with the test process.
fn spawn_postmaster(postgres: &Path, data: &Path, socket_dir: &Path) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(postgres);
    cmd.arg("-D")
        .arg(data)
        .arg("-k")
        .arg(socket_dir)
        .args([
            "-c",
            "listen_addresses=",
            "-c",
            "fsync=off",
            "-c",
            "max_connections=200",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            // SIGQUIT: the postmaster's immediate shutdown.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT);
            Ok(())
        });
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let child = cmd.spawn();
        let ok = child.is_ok();
        let _ = tx.send(child.map(|_| ()).map_err(|e| format!("postgres: {e}")));
        if ok {
            loop {
                std::thread::park();
            }
        }
    });
    rx.recv().map_err(|e| format!("{e}"))?
}

/// The page whose "Least-privilege roles" section the roles are made by.
const POSTGRES_DOC: &str = include_str!("../../../docs/postgres.md");

/// The URLs of the three roles of docs/postgres.md, on one test database.
#[derive(Debug, Clone)]
pub struct RoleUrls {
    pub serve: String,
    pub review: String,
    pub inspect: String,
}

/// The `sql` blocks of docs/postgres.md's "Least-privilege roles" section,
/// in order: as the superuser before the database exists, as the
/// superuser in it, as the serve role after the first open.
pub fn role_steps() -> Vec<String> {
    let start = POSTGRES_DOC.find("\n## Least-privilege roles").unwrap();
    let section = &POSTGRES_DOC[start + 1..];
    let section = &section[..section.find("\n## ").unwrap()];
    section
        .split("```sql\n")
        .skip(1)
        .map(|block| block[..block.find("```").unwrap()].to_owned())
        .collect()
}

impl TestServer {
    /// Makes the roles of docs/postgres.md for the fresh database of `url`,
    /// running that page's statements with the roles named after the
    /// database (roles are per server) and the database, which exists
    /// already, given to the serve role instead of created. The last step
    /// is [`TestServer::grant_after_first_serve`].
    pub fn least_privilege_roles(&self, url: &str) -> RoleUrls {
        let db = url.rsplit("dbname=").next().unwrap().to_owned();
        let steps = role_steps();
        assert_eq!(steps.len(), 3, "three steps: {steps:?}");
        let first = local_names(&steps[0], &db).replace(
            &format!("CREATE DATABASE {db} OWNER"),
            &format!("ALTER DATABASE {db} OWNER TO"),
        );
        self.admin().batch_execute(&first).unwrap();
        let config: postgres::Config = url.parse().unwrap();
        let mut in_db = config.connect(postgres::NoTls).unwrap();
        in_db.batch_execute(&local_names(&steps[1], &db)).unwrap();
        let as_role = |role: &str, password: &str| {
            let mut url = self.url_for(&db);
            if let Some(user) = self.admin.get_user() {
                url = url.replace(&format!("user={user}"), &format!("user={db}_{role}"));
            }
            match self.admin.get_password() {
                Some(p) => url.replace(
                    &format!("password={}", String::from_utf8_lossy(p)),
                    &format!("password={password}"),
                ),
                None => url,
            }
        };
        RoleUrls {
            serve: as_role("serve", "serve-password"),
            review: as_role("review", "review-password"),
            inspect: as_role("inspect", "inspect-password"),
        }
    }

    /// The page's last step, as the serve role once its first open has
    /// created the schema.
    pub fn grant_after_first_serve(&self, roles: &RoleUrls) {
        let db = roles.serve.rsplit("dbname=").next().unwrap().to_owned();
        let config: postgres::Config = roles.serve.parse().unwrap();
        let mut serve = config.connect(postgres::NoTls).unwrap();
        serve
            .batch_execute(&local_names(&role_steps()[2], &db))
            .unwrap();
    }
}

/// The page's statements for database `db`: its roles and its name.
fn local_names(sql: &str, db: &str) -> String {
    sql.replace("thestream_serve", &format!("{db}_serve"))
        .replace("thestream_review", &format!("{db}_review"))
        .replace("thestream_inspect", &format!("{db}_inspect"))
        .replace("DATABASE thestream", &format!("DATABASE {db}"))
}
