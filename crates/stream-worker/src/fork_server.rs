//! The worker binary as a fork server (`--fork-server`): it enters the
//! fork server's sandbox, runs the warm-up once (so its children inherit
//! compiled schemas and touched code paths), then forks one child per
//! request of the parent. Each child narrows itself to a worker's sandbox
//! (`stream_sandbox::fork`) and serves one attempt as a spawned worker does.

use std::process::ExitCode;

use crate::capture::Compiled;

pub(crate) fn main(policy: &stream_sandbox::Policy) -> ExitCode {
    let Ok(server) = stream_sandbox::enter_fork_server(policy) else {
        return ExitCode::from(crate::EXIT_SANDBOX);
    };
    let mut compiled = crate::warm::warm_up();
    // Called only in a child, with its own copy of the server's memory: the
    // server's schemas stay for its next child.
    let served = stream_sandbox::fork::serve_forks(policy, &server, |entered| {
        crate::attempt(entered, std::mem::replace(&mut compiled, Compiled::none()))
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
