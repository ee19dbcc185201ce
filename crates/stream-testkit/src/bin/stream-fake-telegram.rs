//! `stream-fake-telegram`: the loopback fake Bot API as a process.
//!
//! `stream-fake-telegram [--listen ADDR] [--token T] [--bot-id N] [--username U]`
//! prints `base_url=http://…` on its first stdout line, then serves until
//! killed. Controls live under `/_fake/` (see `stream_testkit::telegram`).

use std::io::Write as _;
use std::process::ExitCode;

use stream_testkit::telegram::{FakeTelegram, FakeTelegramConfig};

fn usage() -> ExitCode {
    eprintln!(
        "usage: stream-fake-telegram [--listen ADDR] [--token T] [--bot-id N] [--username U]"
    );
    ExitCode::from(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut config = FakeTelegramConfig::default();
    let mut listen = "127.0.0.1:0".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let Some(value) = args.next() else {
            return usage();
        };
        match flag.as_str() {
            "--listen" => listen = value,
            "--token" => config.token = value,
            "--bot-id" => match value.parse() {
                Ok(id) => config.bot_id = id,
                Err(_) => return usage(),
            },
            "--username" => config.username = value,
            _ => return usage(),
        }
    }
    let fake = match FakeTelegram::start_on(&listen, config).await {
        Ok(fake) => fake,
        Err(e) => {
            eprintln!("stream-fake-telegram: cannot listen on {listen}: {e}");
            return ExitCode::from(1);
        }
    };
    let mut out = std::io::stdout().lock();
    if writeln!(out, "base_url={}", fake.base_url()).is_err() || out.flush().is_err() {
        return ExitCode::from(1);
    }
    drop(out);
    std::future::pending::<()>().await;
    ExitCode::SUCCESS
}
