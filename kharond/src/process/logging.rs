//! Where kharond's log goes (stderr) and what it may contain.
//!
//! RUST_LOG (or -v/-vv) chooses the levels, but a fixed cap on the targets that could log secrets
//! applies on top of it: both filters must let an event through, so no RUST_LOG directive, however
//! specific (`fast_socks5::server=debug`), lifts the cap (house rule: no secret is ever logged).

use std::io::IsTerminal;

use tracing::Subscriber;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::{FilterExt, Targets};
use tracing_subscriber::layer::Filter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

/// Targets capped at info whatever RUST_LOG says, and why.
const CAPPED: &[&str] = &[
    // Logged the client's RFC 1929 password bytes at debug. kharond no longer uses it; the cap
    // stays in case it comes back as a dependency of a dependency.
    "fast_socks5",
    // Logs the raw ssh-agent conversation at debug (key blobs, data to sign, signatures): not
    // secrets alone, but credential traffic with no place in a log.
    "russh::keys::agent",
];

/// Logs go to stderr, coloured only on a terminal; under systemd (JOURNAL_STREAM set) without
/// timestamps or targets too, since the journal adds its own.
pub fn init(verbose: u8) {
    let default = match verbose {
        0 => "info",
        1 => "info,kharond=debug",
        _ => "debug",
    };
    let directives = std::env::var("RUST_LOG").ok().filter(|d| EnvFilter::try_new(d).is_ok());
    let filter = filter(directives.as_deref().unwrap_or(default));
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let layer =
        fmt::layer().with_writer(std::io::stderr).with_ansi(!journald && std::io::stderr().is_terminal());
    let registry = tracing_subscriber::registry();
    if journald {
        registry.with(layer.without_time().with_target(false).with_filter(filter)).init();
    } else {
        registry.with(layer.with_filter(filter)).init();
    }
}

/// The user's directives, and the cap on [`CAPPED`] on top of them.
fn filter<S>(directives: &str) -> impl Filter<S> + use<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let cap = Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_targets(CAPPED.iter().map(|target| (*target, LevelFilter::INFO)));
    EnvFilter::new(directives).and(cap)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn log_with(directives: &str) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        let layer = fmt::layer().with_writer(move || writer.clone()).with_ansi(false);
        let subscriber = tracing_subscriber::registry().with(layer.with_filter(filter(directives)));
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "fast_socks5::server", "password: s3cret-socks");
            tracing::trace!(target: "russh::keys::agent::client", "sign_request: s3cret-agent");
            tracing::info!(target: "fast_socks5::server", "capped target still says info");
            tracing::debug!(target: "kharond::connection", "own debug line");
        });
        String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn no_directive_lifts_the_cap() {
        for directives in
            ["trace", "trace,fast_socks5::server=debug,russh::keys::agent::client=trace", "debug"]
        {
            let log = log_with(directives);
            assert!(!log.contains("s3cret"), "{directives}: {log}");
            assert!(log.contains("capped target still says info"), "{directives}: {log}");
            assert!(log.contains("own debug line"), "{directives}: {log}");
        }
        assert!(!log_with("info").contains("own debug line"), "RUST_LOG levels still apply");
    }
}
