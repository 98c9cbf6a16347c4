//! What a failed test prints: each real component's log as the test unwinds, and after each log
//! the failure itself. CI shows the end of a long output; the panic message comes first, above
//! thousands of log lines, so every log repeats it at its end.

use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    /// The message and place of this thread's panic, once it panicked.
    static FAILED_WITH: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Keeps each thread's panic message for [`print_log_if_failing`], then reports the panic as the
/// default hook does. `collect_output` calls it for every component whose log a test prints;
/// installs once.
pub fn keep_panic_messages() {
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(a panic without a message)".to_owned());
            let place = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
            // Logs make messages long; the first lines say which assertion failed.
            let head: Vec<&str> = message.lines().take(12).collect();
            FAILED_WITH.with(|f| *f.borrow_mut() = Some(format!("{place}: {}", head.join("\n"))));
            default(info);
        }));
    });
}

/// Prints `log` under `title` if this thread's test is failing (unwinding), followed by the panic
/// that failed it; nothing otherwise.
pub fn print_log_if_failing(title: &str, log: impl FnOnce() -> String) {
    if !std::thread::panicking() {
        return;
    }
    let log = log();
    eprintln!("---- {title} ----\n{log}");
    if let Some(failed) = FAILED_WITH.with(|f| f.borrow().clone()) {
        eprintln!("---- end of {title}; the test failed at {failed}");
    }
}
