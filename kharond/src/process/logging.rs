//! Where kharond's log goes (stderr) and what it may contain.
//!
//! RUST_LOG (or -v/-vv) chooses the levels, but a fixed cap on the targets that could log secrets
//! applies on top of it: both filters must let an event through, so no RUST_LOG directive, however
//! specific (`fast_socks5::server=debug`), lifts the cap (house rule: no secret is ever logged).
//!
//! Every field of every event and span, the message included, is written through
//! [`kharon_common::text::escape`] ([`EscapedFields`]): a cluster id, a jump host, a host name a
//! client sent or an error text of a server can hold a newline or a terminal escape, and must
//! neither start a line of its own that reads like kharond's (`… INFO kharond::daemon: …`) nor
//! recolour the terminal a log is read on. One place for all of them, whoever logs.

use std::fmt;
use std::io::IsTerminal;

use kharon_common::text::EscapingWriter;
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::filter::{FilterExt, Targets};
use tracing_subscriber::fmt as log_fmt;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::layer::Filter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// Targets capped at info whatever RUST_LOG says, and why.
const CAPPED: &[&str] = &[
    // Logs the client's RFC 1929 password bytes at debug. kharond does not use it; the cap holds
    // should a dependency of a dependency pull it in.
    "fast_socks5",
    // Logs the raw ssh-agent conversation at debug (key blobs, data to sign, signatures): not
    // secrets alone, but credential traffic with no place in a log.
    "russh::keys::agent",
];

/// The daemon's own library crates and the module paths they had inside kharond. They log under
/// their crate names, so a directive for `kharond` (`RUST_LOG=kharond=debug`, `-v`: what `--help`
/// offers) is widened to them too, and one for their old path (`kharond::ssh::pool=debug`) names
/// the crate's module instead.
const OWN_CRATES: &[(&str, &str)] = &[("kharon_ssh", "kharond::ssh"), ("kharon_relay", "kharond::relay")];

/// `directives` with every directive for the `kharond` target repeated for [`OWN_CRATES`], and
/// every one for their old module paths renamed.
fn widened(directives: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for directive in directives.split(',') {
        let trimmed = directive.trim();
        let renamed = OWN_CRATES.iter().find_map(|(krate, old)| {
            let rest = trimmed.strip_prefix(old)?;
            (rest.is_empty() || rest.starts_with("::") || rest.starts_with('='))
                .then(|| format!("{krate}{rest}"))
        });
        if let Some(renamed) = renamed {
            out.push(renamed);
            continue;
        }
        out.push(directive.to_owned());
        let level = match trimmed.strip_prefix("kharond") {
            Some("") => "",
            Some(rest) if rest.starts_with('=') => rest,
            _ => continue,
        };
        out.extend(OWN_CRATES.iter().map(|(krate, _)| format!("{krate}{level}")));
    }
    out.join(",")
}

/// Logs go to stderr, coloured only on a terminal; under systemd (JOURNAL_STREAM set) without
/// timestamps or targets too, since the journal adds its own.
pub fn init(verbose: u8) {
    let default = match verbose {
        0 => "info",
        1 => "info,kharond=debug",
        _ => "debug",
    };
    let directives = std::env::var("RUST_LOG").ok().filter(|d| EnvFilter::try_new(d).is_ok());
    let filter = filter(&widened(directives.as_deref().unwrap_or(default)));
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let layer = log_fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(!journald && std::io::stderr().is_terminal())
        .fmt_fields(EscapedFields);
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

/// Writes fields as the default formatter does (`message` bare, others `name=value`, strings
/// quoted), every value escaped ([`kharon_common::text`]); the `log.*` fields of events from the
/// `log` crate are left out, as the default formatter leaves them out.
pub struct EscapedFields;

impl<'writer> FormatFields<'writer> for EscapedFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut visitor = EscapingVisitor { writer, empty: true, result: Ok(()) };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct EscapingVisitor<'writer> {
    writer: Writer<'writer>,
    empty: bool,
    result: fmt::Result,
}

impl EscapingVisitor<'_> {
    fn write(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        if self.result.is_err() || field.name().starts_with("log.") {
            return;
        }
        let separator = if self.empty { "" } else { " " };
        self.empty = false;
        // Escaped as it is written: no string per field on the way.
        self.result = match field.name() {
            "message" => self.writer.write_str(separator),
            name => write!(self.writer, "{separator}{name}="),
        }
        .and_then(|()| fmt::write(&mut EscapingWriter(&mut self.writer), value));
    }
}

impl Visit for EscapingVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.write(field, format_args!("{value}"));
        } else {
            self.write(field, format_args!("{value:?}"));
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.write(field, format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.write(field, format_args!("{value:?}"));
    }
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
        let layer =
            log_fmt::layer().with_writer(move || writer.clone()).with_ansi(false).fmt_fields(EscapedFields);
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

    #[test]
    fn a_directive_for_kharond_covers_its_own_crates() {
        assert_eq!(widened("info,kharond=debug"), "info,kharond=debug,kharon_ssh=debug,kharon_relay=debug");
        assert_eq!(widened("kharond"), "kharond,kharon_ssh,kharon_relay");
        assert_eq!(widened("kharond::proxy=trace,russh=warn"), "kharond::proxy=trace,russh=warn");
        assert_eq!(
            widened("kharond::ssh=debug,kharond::relay::copy=trace"),
            "kharon_ssh=debug,kharon_relay::copy=trace"
        );
        assert_eq!(widened("kharond::sshx=debug"), "kharond::sshx=debug");
        let captured = Captured::default();
        let writer = captured.clone();
        let layer = log_fmt::layer().with_writer(move || writer.clone()).with_ansi(false);
        let subscriber =
            tracing_subscriber::registry().with(layer.with_filter(filter(&widened("info,kharond=debug"))));
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "kharon_ssh::pool", "engine debug line");
            tracing::debug!(target: "russh::client", "dependency debug line");
        });
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(log.contains("engine debug line") && !log.contains("dependency debug line"), "{log}");
    }

    /// A newline or an escape in data (a cluster id, a jump host) cannot forge a line.
    #[test]
    fn data_in_a_message_or_a_field_never_starts_a_line_or_reaches_the_terminal() {
        let captured = Captured::default();
        let writer = captured.clone();
        let layer =
            log_fmt::layer().with_writer(move || writer.clone()).with_ansi(false).fmt_fields(EscapedFields);
        let subscriber = tracing_subscriber::registry().with(layer);
        let id = "c-x\n2026-11-26T10:00:00Z  INFO kharond::daemon: kharond ready\r\u{1b}[2J";
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("conn", client = %id);
            let _entered = span.enter();
            tracing::warn!(jumphost = %id, quoted = id, number = 3, "cluster {id}: refused");
        });
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert_eq!(log.lines().count(), 1, "{log}");
        assert!(!log.contains('\r') && !log.contains('\u{1b}'), "{log:?}");
        assert!(
            log.contains(
                r"cluster c-x\n2026-11-26T10:00:00Z  INFO kharond::daemon: kharond ready\r\x1b[2J: refused"
            ),
            "{log}"
        );
        assert!(log.contains(r"jumphost=c-x\n2026") && log.contains(r#"quoted="c-x\n2026"#), "{log}");
        assert!(log.contains(r"conn{client=c-x\n2026") && log.contains("number=3"), "{log}");
    }
}
