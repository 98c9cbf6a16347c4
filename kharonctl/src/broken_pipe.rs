//! Output piped into a reader that stops early (`kharonctl clusters | head`) ends kharonctl
//! quietly, as it ends `ls` or `grep`.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe is an error, and `println!` turns it into a
//! panic with a backtrace. Restoring SIGPIPE's default would do, but it would also kill kharonctl
//! without a word when kharond's control socket closes mid-request, where the user needs the
//! "kharond went away" message. So only that one panic is caught: it exits with 141 (128 +
//! SIGPIPE), the status a shell shows for a program a pipe ended.

use std::panic::PanicHookInfo;

use crate::exit;

/// Installs the hook: the broken-pipe panic of standard output or standard error exits quietly,
/// every other panic is reported by the hook installed before (Rust's default one).
pub fn quiet_on_closed_output() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if is_closed_output(info) {
            std::process::exit(i32::from(exit::BROKEN_PIPE));
        }
        report(info);
    }));
}

/// Whether this is std's "failed printing to stdout/stderr" panic for EPIPE.
fn is_closed_output(info: &PanicHookInfo<'_>) -> bool {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or_default();
    message.starts_with("failed printing to std") && message.contains(&format!("(os error {})", libc::EPIPE))
}
