//! The turn latency benchmark (docs/performance.md): a first turn and a
//! later one (the server reuses the cached prompt prefix), each split into
//! the server's prompt and generation time (its `timings`) and our trusted
//! overhead, the rest of `serve --drain`'s wall time. Ignored: run it under
//! `scripts/with-llama` with `--ignored --nocapture`.

use super::{Turn, llama, real_stack, turn};
use crate::llama::proxy::Proxy;

fn report(label: &str, t: &Turn) {
    let chat = t.chats.last().unwrap();
    let timings = &chat.response["timings"];
    let ms = |k: &str| timings[k].as_f64().unwrap_or(f64::NAN);
    let server = ms("prompt_ms") + ms("predicted_ms");
    let total = t.elapsed.as_secs_f64() * 1000.0;
    let attempt_us = t
        .stderr
        .lines()
        .find(|l| l.contains("run settled"))
        .and_then(|l| l.split("attempt_us=").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or("?");
    println!(
        "{label}: turn {total:.0} ms = server {server:.0} ms (prompt {:.0} ms for {} tokens, {} cached; \
         generation {:.0} ms for {} tokens) + trusted overhead {:.0} ms \
         (of which HTTP round trip beyond timings {:.0} ms; attempt_us={attempt_us})",
        ms("prompt_ms"),
        timings["prompt_n"],
        timings["cache_n"],
        ms("predicted_ms"),
        timings["predicted_n"],
        total - server,
        chat.round_trip.as_secs_f64() * 1000.0 - server,
    );
}

#[test]
#[ignore = "a benchmark: needs scripts/with-llama and prints figures"]
fn turn_latency_first_and_later_split_into_server_and_trusted_time() {
    let Some(l) = llama() else { return };
    let proxy = Proxy::start(&l.url);
    let s = real_stack(&proxy.base_url(), &l.model);
    let first = turn(&s, &proxy, "What is the capital of France?");
    let later = turn(&s, &proxy, "And the capital of Italy?");
    report("first turn", &first);
    report("later turn", &later);
}
