//! `thestream-worker`: see the `stream_worker` crate.

fn main() -> std::process::ExitCode {
    stream_worker::run_main()
}
