//! `thestream doctor [--json]`: can this machine and this config run the bot?
//!
//! One line per check, `ok` or `FAIL` with a one-line hint (docs/design.md
//! §19). Secrets are reported by variable NAME only; the Telegram check is
//! one `getMe`, the provider check one `GET …/models` (no tokens, no run)
//! and, for a local server only, one tiny chat request with the tool schemas
//! (`chat`).
//! The kernel checks come from a real sandboxed self-test of the worker, so
//! they report what the sandbox achieves, not what the kernel advertises.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use serde::Serialize;
use stream_broker::ProbeError;
use stream_sandbox::{Enforcement, LandlockStatus, SeccompStatus};

use crate::Ctx;

mod chat;
mod disk;
use crate::config::{Config, TelegramMode, TimeoutSecs};
use crate::exit::{CmdResult, Failure};

/// `doctor` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print a JSON array of `{check, ok, detail}`.
    #[arg(long)]
    json: bool,
}

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Check {
    check: &'static str,
    ok: bool,
    detail: String,
}

fn ok(check: &'static str, detail: impl Into<String>) -> Check {
    Check {
        check,
        ok: true,
        detail: detail.into(),
    }
}

fn fail(check: &'static str, detail: impl std::fmt::Display, hint: &str) -> Check {
    Check {
        check,
        ok: false,
        detail: format!("{detail}; hint: {hint}"),
    }
}

/// Runs `doctor`: exit 0 when every check passes, 1 otherwise.
pub fn run(ctx: &Ctx, args: Args) -> CmdResult {
    let checks = checks(ctx);
    if args.json {
        let text = serde_json::to_string_pretty(&checks)
            .map_err(|e| Failure::runtime(anyhow!("cannot render the checks: {e}")))?;
        println!("{}", stream_core::terminal::json(&text));
    } else {
        for c in &checks {
            let verdict = if c.ok { "ok" } else { "FAIL" };
            // A detail may quote a server (the bot's name): render it.
            let detail = stream_core::terminal::render(&c.detail).text;
            println!("{verdict:<4} {:<15} {detail}", c.check);
        }
    }
    let failed = checks.iter().filter(|c| !c.ok).count();
    if failed == 0 {
        Ok(())
    } else {
        Err(Failure::runtime(anyhow!("{failed} check(s) failed")))
    }
}

fn checks(ctx: &Ctx) -> Vec<Check> {
    let config = match ctx.config() {
        Ok(config) => config,
        Err(e) => {
            return vec![fail(
                "config",
                e.error(),
                "fix the named key, or point --config / THESTREAM_CONFIG at the file `thestream init` wrote",
            )];
        }
    };
    let mut out = vec![ok(
        "config",
        format!("{} parses", ctx.config_path.display()),
    )];
    out.push(owner(&config));
    out.push(private_dir("data-dir", &config.data_dir, true));
    out.push(store(&config));
    out.push(match &config.context {
        Some(context) => private_dir("context-root", &context.root, false),
        None => ok(
            "context-root",
            "none: a review-only config (decisions are materialized by the serve that holds memory.md)",
        ),
    });
    out.extend(sandbox(&config));
    out.push(secrets(&config));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    match runtime {
        Ok(runtime) => {
            out.push(runtime.block_on(telegram(&config)));
            out.push(runtime.block_on(provider(&config)));
        }
        Err(e) => out.push(fail("runtime", e, "the async runtime could not start")),
    }
    out
}

fn owner(config: &Config) -> Check {
    if config.telegram.owner_user_id > 0 {
        ok(
            "owner",
            format!("owner_user_id = {}", config.telegram.owner_user_id),
        )
    } else {
        fail(
            "owner",
            "telegram.owner_user_id is not set",
            "run `thestream pair` and send the code to your bot",
        )
    }
}

/// The data dir must be owner-only (it may not exist yet: `serve` creates it
/// 0700); the context root must exist and be writable by its owner only.
fn private_dir(check: &'static str, dir: &Path, may_be_missing: bool) -> Check {
    use std::os::unix::fs::PermissionsExt;
    let meta = match std::fs::metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && may_be_missing => {
            return ok(
                check,
                format!("{} will be created (0700) by serve", dir.display()),
            );
        }
        Err(e) => {
            return fail(
                check,
                format!("{}: {:?}", dir.display(), e.kind()),
                "create it, or run `thestream init` again in an empty folder",
            );
        }
    };
    let mode = meta.permissions().mode() & 0o777;
    let unsafe_bits = if may_be_missing { 0o077 } else { 0o022 };
    if !meta.is_dir() {
        fail(
            check,
            format!("{} is not a folder", dir.display()),
            "point the config at a folder",
        )
    } else if mode & unsafe_bits != 0 {
        fail(
            check,
            format!("{} has mode {mode:o}", dir.display()),
            if may_be_missing {
                "chmod 700 it: it holds every message"
            } else {
                "chmod go-w it: only its owner may change what the model reads"
            },
        )
    } else {
        ok(check, format!("{} mode {mode:o}", dir.display()))
    }
}

/// The worker's hash and a sandboxed self-test, and from its report the
/// kernel features: `worker`, `landlock`, `seccomp`, `user-namespaces`;
/// and `worker-forked` when serve forks its workers.
fn sandbox(config: &Config) -> Vec<Check> {
    let worker = match &config.sandbox.worker {
        Some(path) => path.clone(),
        None => match super::serve::default_worker() {
            Ok(path) => path,
            Err(e) => {
                return vec![fail(
                    "worker",
                    e.error(),
                    "run thestream from its install folder",
                )];
            }
        },
    };
    let missing = "build it with `cargo build --release --bins` (it sits beside `thestream`) or set [sandbox] worker";
    let sealed = match stream_broker::SealedWorker::load(&worker) {
        Ok(sealed) => sealed,
        Err(_) => {
            return vec![fail(
                "worker",
                format!("{} cannot be read", worker.display()),
                missing,
            )];
        }
    };
    let bundle = sealed.sha256();
    // The report is asked for even when something is not enforced, so that
    // each feature gets its own verdict; the worker verdict is `verify`'s.
    let enforcement = match sealed.self_test(true, config.provider.timeout_secs.duration()) {
        Ok(enforcement) => enforcement,
        Err(e) => {
            return vec![fail(
                "worker",
                format!(
                    "{} sha256 {bundle}: self-test failed: {e}",
                    worker.display()
                ),
                missing,
            )];
        }
    };
    // A file replaced under a running serve changes nothing until restart:
    // say so, rather than vouch for a worker that is not the one running.
    let running = running_bundle(config).filter(|running| running != bundle);
    let verdict = match stream_sandbox::verify(&enforcement, config.sandbox.allow_unenforced) {
        Ok(()) if running.is_some() => fail(
            "worker",
            format!(
                "{} sha256 {bundle}: the running serve executes {}, loaded before this file changed",
                worker.display(),
                running.map(|b| b.to_string()).unwrap_or_default(),
            ),
            "restart serve to run the new worker (it executes the copy it loaded at start)",
        ),
        Ok(()) => ok(
            "worker",
            format!(
                "{} sha256 {bundle}: sandboxed self-test passed",
                worker.display()
            ),
        ),
        Err(e) => fail(
            "worker",
            format!("{} sha256 {bundle}: {e}", worker.display()),
            "serve refuses this worker; see the kernel checks",
        ),
    };
    let mut checks = vec![
        landlock(&enforcement),
        seccomp(&enforcement),
        user_namespaces(&enforcement),
        verdict,
    ];
    if stream_broker::serve_forks_workers() {
        checks.push(forked(&sealed, config));
    }
    checks
}

/// `worker-forked`: serve forks its workers, so a worker forked from the
/// same bytes passes the same self-test.
fn forked(sealed: &stream_broker::SealedWorker, config: &Config) -> Check {
    let check = "worker-forked";
    let timeout = config.provider.timeout_secs.duration();
    match sealed.self_test_forked(true, timeout) {
        Ok(enforcement) => {
            match stream_sandbox::verify(&enforcement, config.sandbox.allow_unenforced) {
                Ok(()) => ok(
                    check,
                    "a worker forked as serve forks them passed its sandboxed self-test",
                ),
                Err(e) => fail(
                    check,
                    format!("a forked worker: {e}"),
                    "serve refuses such workers; see the kernel checks",
                ),
            }
        }
        Err(e) => fail(
            check,
            format!("a forked worker's self-test failed: {e}"),
            "serve would spawn its workers instead; rebuild the worker with this thestream",
        ),
    }
}

/// A synced write in the data dir succeeds (when it exists: `serve`
/// creates it), and the store opens: the SQLite file (when it exists:
/// doctor never creates it), or the PostgreSQL database (reachable, ours,
/// migrated).
fn store(config: &Config) -> Check {
    use crate::config::StoreBackend;
    use crate::store::OpenedStore;
    if config.data_dir.is_dir()
        && let Err(e) = disk::synced_write(&config.data_dir)
    {
        return fail(
            "store",
            format!(
                "a synced write in the data dir {} failed: {e}",
                config.data_dir.display()
            ),
            "the disk under the data dir is full or failing; serve would stop on it (docs/operating.md)",
        );
    }
    if config.store.backend == StoreBackend::Sqlite && !config.store_path().is_file() {
        return ok(
            "store",
            format!(
                "sqlite: {} will be created by serve",
                config.store_path().display()
            ),
        );
    }
    match super::open_store(config) {
        Ok(OpenedStore::Sqlite(s)) => ok("store", format!("sqlite: {}", s.path().display())),
        Ok(OpenedStore::Postgres(p)) => ok(
            "store",
            format!(
                "postgres: {} (schema {})",
                p.label(),
                stream_store::PG_SCHEMA_VERSION
            ),
        ),
        Err(failure) => fail(
            "store",
            format!("{:#}", failure.error()),
            match config.store.backend {
                StoreBackend::Sqlite => {
                    "point data_dir at a thestream store, or restore one from a backup (docs/backup.md)"
                }
                StoreBackend::Postgres => {
                    "check the URL in the variable [store] url_env names, and that the server is reachable"
                }
            },
        ),
    }
}

/// The worker bundle a live `serve` of this store executes (its sealed copy
/// from start), if one runs. Doctor never creates the store to ask.
fn running_bundle(config: &Config) -> Option<stream_core::Sha256Hex> {
    if config.store.backend == crate::config::StoreBackend::Sqlite && !config.store_path().is_file()
    {
        return None;
    }
    let store = super::open_store(config).ok()?;
    stream_engine::cooperation::serving_status(&store)
        .ok()
        .flatten()
        .map(|status| status.worker_bundle_sha256)
}

/// What a Landlock ruleset of `abi` covers: each ABI adds one item.
fn landlock_rights(abi: u32) -> String {
    const ADDED: [&str; 7] = [
        "file access",
        "re-parenting",
        "truncation",
        "TCP bind/connect",
        "device ioctl",
        "abstract sockets and signals",
        "audit logging",
    ];
    let covered: Vec<&str> = ADDED
        .iter()
        .take(usize::try_from(abi).unwrap_or(ADDED.len()))
        .copied()
        .collect();
    if covered.is_empty() {
        "nothing".to_owned()
    } else {
        covered.join(", ")
    }
}

fn landlock(e: &Enforcement) -> Check {
    let abi = e
        .landlock
        .kernel_abi
        .map_or_else(|| "none".to_owned(), |abi| abi.to_string());
    let detail = format!(
        "kernel ABI {abi}, ruleset ABI {} covers {}",
        e.landlock.ruleset_abi,
        landlock_rights(e.landlock.ruleset_abi)
    );
    match e.landlock.status {
        LandlockStatus::FullyEnforced => ok("landlock", detail),
        LandlockStatus::PartiallyEnforced | LandlockStatus::NotEnforced => fail(
            "landlock",
            format!("{detail} (not fully enforced)"),
            "use Linux 5.13+ with `landlock` in the lsm= boot list (CONFIG_SECURITY_LANDLOCK)",
        ),
    }
}

fn seccomp(e: &Enforcement) -> Check {
    match e.seccomp.status {
        SeccompStatus::Installed => ok(
            "seccomp",
            format!(
                "allowlist of {} syscalls installed ({:?})",
                e.seccomp.allowed_syscalls, e.seccomp.arch
            ),
        ),
        SeccompStatus::NotInstalled => fail(
            "seccomp",
            "no filter installed",
            "use a kernel with CONFIG_SECCOMP_FILTER, and no container profile forbidding it",
        ),
    }
}

fn user_namespaces(e: &Enforcement) -> Check {
    let ns = &e.namespaces;
    if ns.user && ns.network && ns.mount && ns.ipc {
        return ok(
            "user-namespaces",
            "user, network, mount and IPC namespaces entered",
        );
    }
    let apparmor =
        std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
            .is_ok_and(|v| v.trim() == "1");
    let hint = if apparmor {
        "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+): allow them for the worker with an AppArmor profile (see docs/operating.md)"
    } else {
        "enable unprivileged user namespaces (sysctl user.max_user_namespaces > 0)"
    };
    fail(
        "user-namespaces",
        format!(
            "entered user={} network={} mount={} ipc={}: serve still runs, but the worker keeps the host's network, mount and IPC views (Landlock and seccomp still apply)",
            ns.user, ns.network, ns.mount, ns.ipc
        ),
        hint,
    )
}

/// A duration as doctor prints it: seconds with 2 decimals.
fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// The warning a provider check carries when its request took more than
/// half of `timeout_secs` (the check still passes): a turn, which also
/// evaluates the prompt and generates, takes longer than a model listing.
fn slow_warning(took: Duration, timeout: TimeoutSecs) -> String {
    if took > timeout.duration() / 2 {
        format!(
            "; warning: over half of provider.timeout_secs ({} s): a turn takes longer still, raise it (docs/providers.md)",
            timeout.secs()
        )
    } else {
        String::new()
    }
}

/// Each secret variable the config names: set or not, by NAME only.
fn secrets(config: &Config) -> Check {
    let mut names = vec![config.telegram.bot_token_env.as_str()];
    if !config.provider.api_key_env.is_empty() {
        names.push(config.provider.api_key_env.as_str());
    }
    if config.telegram.mode == TelegramMode::Webhook {
        names.push(config.telegram.webhook_secret_env.as_str());
    }
    let (set, missing): (Vec<&str>, Vec<&str>) = names
        .into_iter()
        .partition(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
    if missing.is_empty() {
        let keyless = if config.provider.api_key_env.is_empty() {
            " (provider keyless: api_key_env = \"\")"
        } else {
            ""
        };
        ok("secrets", format!("set: {}{keyless}", set.join(", ")))
    } else {
        fail(
            "secrets",
            format!("not set: {}", missing.join(", ")),
            "export each named variable in serve's environment (values never go in the config)",
        )
    }
}

async fn telegram(config: &Config) -> Check {
    let options = stream_telegram::ClientOptions {
        retry: stream_telegram::RetryPolicy {
            max_attempts: 1,
            ..stream_telegram::RetryPolicy::default()
        },
        request_timeout: Duration::from_secs(10),
        ..stream_telegram::ClientOptions::default()
    };
    let api = match super::bot_api_with(config, options) {
        Ok(api) => api,
        Err(e) => {
            return fail(
                "telegram",
                e.error(),
                "export the bot token BotFather gave you",
            );
        }
    };
    match api.get_me().await {
        Ok(me) => {
            // Telegram usernames are [A-Za-z0-9_]; anything else is dropped
            // rather than printed.
            let username: String = me
                .username
                .unwrap_or_default()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            ok("telegram", format!("getMe: @{username} (id {})", me.id))
        }
        Err(e) => match e.telegram_code() {
            Some(code @ (401 | 404)) => fail(
                "telegram",
                format!("getMe refused ({code})"),
                &format!(
                    "{} does not hold a valid bot token: copy it again from BotFather",
                    config.telegram.bot_token_env
                ),
            ),
            _ => fail(
                "telegram",
                format!("getMe failed: {}", e.code()),
                "check telegram.api_base_url and this machine's outbound HTTPS",
            ),
        },
    }
}

async fn provider(config: &Config) -> Check {
    let api = config.provider.api;
    let timeout = config.provider.timeout_secs;
    // Bounded as an attempt's request is, by `timeout_secs`.
    let broker_config = stream_broker::BrokerConfig::new(
        std::path::PathBuf::new(),
        config.provider.base_url.clone(),
        config.provider.api_key_env.clone(),
    )
    .with_attempt_timeout(timeout.duration());
    // The worker is not needed to ask for the model list (the worker check
    // is separate): the probe never reads `broker_config.worker`.
    let started = Instant::now();
    let listed = stream_broker::list_models(&broker_config, api).await;
    let took = started.elapsed();
    match listed {
        Err(ProbeError::Setup(e)) => fail(
            "provider",
            e,
            "export the named key, or set api_key_env = \"\" for a keyless local server",
        ),
        Ok(status @ 200..=299) => {
            let listed = format!(
                "GET models answered {status} in {}{}",
                seconds(took),
                slow_warning(took, timeout)
            );
            match chat::check(config, api, &broker_config).await {
                None => ok("provider", listed),
                Some(Check {
                    ok: true, detail, ..
                }) => ok("provider", format!("{listed}; {detail}")),
                Some(failed) => failed,
            }
        }
        Ok(status @ (401 | 403)) => fail(
            "provider",
            format!("GET models answered {status}"),
            &format!(
                "the key in {} is refused by the provider",
                config.provider.api_key_env
            ),
        ),
        Ok(status) => fail(
            "provider",
            format!("GET models answered {status}"),
            "check provider.base_url (OpenAI-shaped URLs end in /v1)",
        ),
        Err(ProbeError::Request(e)) => fail(
            "provider",
            format!("GET models failed: {e}"),
            "is the server running at provider.base_url, and reachable from here?",
        ),
    }
}
