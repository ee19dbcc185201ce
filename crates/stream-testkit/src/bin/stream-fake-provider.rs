//! `stream-fake-provider`: the loopback scripted provider as a process,
//! with an empty script.
//!
//! `stream-fake-provider` prints `base_url=http://…/v1` (OpenAI chat) on its
//! first stdout line, then serves until killed. It lists models, so `doctor`'s
//! provider check in the `openai` compat mode passes against it; a chat
//! request finds no scripted reply. CI uses it to run an installed package's
//! `doctor` without reaching any outside service.

use std::io::Write as _;
use std::process::ExitCode;

use stream_core::payload::ProviderApi;
use stream_testkit::provider::ScriptedProvider;

fn main() -> ExitCode {
    if std::env::args().len() > 1 {
        eprintln!("usage: stream-fake-provider");
        return ExitCode::from(2);
    }
    let provider = match ScriptedProvider::start(Vec::new()) {
        Ok(provider) => provider,
        Err(e) => {
            eprintln!("stream-fake-provider: cannot listen: {e}");
            return ExitCode::from(1);
        }
    };
    let mut out = std::io::stdout().lock();
    let url = provider.base_url(ProviderApi::OpenaiChat);
    if writeln!(out, "base_url={url}").is_err() || out.flush().is_err() {
        return ExitCode::from(1);
    }
    drop(out);
    loop {
        std::thread::park();
    }
}
