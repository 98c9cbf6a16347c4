//! `kharonctl route HOST`: how kharond would route a host right now, and which rule decided.
//! With `--trace`: waits for the next connection to HOST and shows it step by step, with times
//! (route decision, each hop's connect and auth or the reused session, channel, reply, first byte).
//!
//! HOST may be pasted as a URL (a kubeconfig's `server:`) or as `host:port`: kharond routes by
//! the host alone, so that is what is asked, and the answer says so. Anything that is not a host
//! name or IP address is a usage error (exit code 2), never "direct".

use std::process::ExitCode;
use std::time::Duration;

use kharon_common::text::{Escaped, cell};
use kharon_proto::v1 as pb;
use serde::Serialize;

use crate::context::Context;
use crate::daemon::Daemon;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  kharonctl route api.c-example.vshnmanaged.net\n  \
    kharonctl route api.c-example.vshnmanaged.net -o json\n  \
    kharonctl route api.c-example.vshnmanaged.net --trace      # then run kubectl in another terminal\n  \
    kharonctl route https://api.c-example.vshnmanaged.net:6443/version   # a URL: its host\n  \
    kharonctl route api.c-example.vshnmanaged.net --trace --port 6443 --timeout 2m\n\n\
    --trace answers \"why is kubectl slow on this cluster\": it shows the next connection to HOST \
    with the time of each step since kharond accepted it, and how long the step took: the route \
    decision, the SSH session (reused, and for how long it has been up; or each hop's TCP connect, \
    SSH handshake and authentication when it is dialled for this connection), the channel at the \
    last hop (or the direct connect), the reply to the client, and the first byte from the server.")]
pub struct Args {
    // The help text is clap's: a bare URL reads better on a terminal than a Markdown link.
    #[allow(rustdoc::bare_urls)]
    /// Host name or IP as a client would send it, e.g. api.c-example.vshnmanaged.net; a URL
    /// (https://api.c-example.vshnmanaged.net:6443/version) or host:port stands for its host
    pub host: String,
    /// Output format (with --trace, JSON is one object per step, one a line)
    #[arg(short, long, value_enum, default_value_t)]
    pub output: Format,
    /// Wait for the next connection to HOST and show its steps with times
    #[arg(long)]
    pub trace: bool,
    /// With --trace: only a connection to this port (default: the port of a URL or host:port, else any)
    #[arg(long, value_name = "PORT", requires = "trace", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// With --trace: how long to wait for the connection: seconds, or with a unit (500ms, 30s, 2m)
    #[arg(long, value_name = "DURATION", default_value = "30s", requires = "trace", value_parser = trace_timeout)]
    pub timeout: Duration,
}

/// `--timeout`: what kharond accepts for a trace, from 1 s to an hour.
fn trace_timeout(text: &str) -> Result<Duration, String> {
    crate::duration::within(text, Duration::from_secs(1), Duration::from_secs(3600))
}

/// What was asked about: the host kharond routes by, and where it came from when that was not
/// the host alone.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    host: String,
    /// A URL's port (given, or its scheme's), or the port of `host:port`.
    port: Option<u16>,
    /// The URL or `host:port` as given, when it was one.
    given: Option<String>,
}

/// The host of a URL (`scheme://host[:port]/…`), of `host:port` or `[v6]:port` (a path after
/// either is dropped too: `host/version`), or the text itself.
fn target(text: &str) -> Target {
    let text = text.trim();
    let given = Some(text.to_owned());
    if !text.contains("://")
        && let Some((authority, _path)) = text.split_once('/')
        && !authority.is_empty()
    {
        let inner = target(authority);
        return Target { host: inner.host, port: inner.port, given };
    }
    if text.contains("://") {
        if let Ok(url) = url::Url::parse(text)
            && let Some(host) = url.host_str()
        {
            let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
            return Target { host, port: url.port_or_known_default(), given };
        }
        return Target { host: text.to_owned(), port: None, given: None };
    }
    if let Some(rest) = text.strip_prefix('[') {
        // `[::1]` or `[::1]:443`
        if let Some((host, after)) = rest.split_once(']') {
            let port = after.strip_prefix(':').and_then(|p| p.parse().ok());
            return Target { host: host.to_owned(), port, given };
        }
    }
    match text.rsplit_once(':') {
        // One colon: host:port. More (a bare IPv6 address) is the address itself.
        Some((host, port))
            if !host.contains(':') && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Target { host: host.to_owned(), port: port.parse().ok(), given }
        }
        _ => Target { host: text.to_owned(), port: None, given: None },
    }
}

async fn trace(args: &Args, target: &Target, ctx: &Context) -> anyhow::Result<ExitCode> {
    let mut daemon = ctx.daemon().await?;
    let port = args.port.or(target.port);
    if let Some(given) = &target.given {
        let on = port.map(|p| format!(", port {p}")).unwrap_or_default();
        eprintln!("tracing {}{on}, the host of {}", Escaped(&target.host), Escaped(given));
    }
    let mut events = match daemon.trace(&target.host, port.unwrap_or(0), args.timeout).await {
        Ok(events) => events,
        // A host that is not one is the command line's fault, as for `route` without --trace.
        Err(e) if e.is_bad_request() => {
            eprintln!("kharonctl: {}", kharon_common::errors::shown(&e));
            return Ok(ExitCode::from(crate::exit::USAGE));
        }
        Err(e) => return Err(e.into()),
    };
    while let Some(step) = Daemon::next_trace_event(&mut events).await? {
        match args.output {
            // The step as it serializes (kharon_proto::json), one a line.
            Format::Json => println!("{}", serde_json::to_string(&step)?),
            // Waiting is said on stderr: stdout holds only the connection's steps.
            Format::Table if step.step == "armed" => eprintln!("{} (Ctrl-C to stop)", Escaped(&step.detail)),
            Format::Table => {
                let took = if step.took_us > 0 {
                    format!("({:.1} ms)", step.took_us as f64 / 1000.0)
                } else {
                    String::new()
                };
                let (name, detail) = (cell(&step.step), Escaped(&step.detail));
                println!("{:>10.1} ms  {name:<10} {took:<12} {detail}", step.at_us as f64 / 1000.0);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `route -o json`: the reply as it serializes (kharon_proto::json), and what was given.
#[derive(Debug, Serialize)]
struct Answer<'a> {
    #[serde(flatten)]
    reply: &'a pb::RouteResponse,
    /// The URL or host:port as given, when HOST was one (the host is what is routed); else null.
    given: Option<&'a str>,
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let target = target(&args.host);
    if args.trace {
        return trace(&args, &target, ctx).await;
    }
    let reply = ctx.daemon().await?.route(&target.host).await?;
    let answer = Answer { reply: &reply, given: target.given.as_deref() };
    if reply.rule == "invalid" {
        // Not a host a client could ask for: no route to tell, and a script must not read "direct".
        if args.output == Format::Json {
            output::json(&answer)?;
        }
        eprintln!(
            "kharonctl: {:?} is not a host: {}; give a host name or IP address (a URL or host:port \
             is read as its host), e.g. api.c-example.vshnmanaged.net",
            args.host,
            Escaped(&reply.reason)
        );
        return Ok(ExitCode::from(crate::exit::USAGE));
    }
    match args.output {
        Format::Json => output::json(&answer)?,
        Format::Table => {
            let asked = match &target.given {
                Some(given) => format!("{} (the host of {})", Escaped(&reply.host), Escaped(given)),
                None => Escaped(&reply.host).to_string(),
            };
            if reply.jumphost.is_empty() {
                println!("{asked} → direct\n  {}", Escaped(&reply.reason));
            } else {
                let cluster = if reply.cluster.is_empty() { "?" } else { &reply.cluster };
                println!(
                    "{asked} → jump host {} (cluster {})\n  {}",
                    Escaped(&reply.jumphost),
                    Escaped(cluster),
                    Escaped(&reply.reason)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(host: &str, port: Option<u16>, given: Option<&str>) -> Target {
        Target { host: host.into(), port, given: given.map(Into::into) }
    }

    #[test]
    fn a_url_or_host_port_is_read_as_its_host() {
        let url = "https://api.c-x.example:6443/version";
        assert_eq!(target(url), t("api.c-x.example", Some(6443), Some(url)));
        assert_eq!(
            target("https://console.apps.c-x.example/"),
            t("console.apps.c-x.example", Some(443), Some("https://console.apps.c-x.example/"))
        );
        assert_eq!(
            target("api.c-x.example:6443"),
            t("api.c-x.example", Some(6443), Some("api.c-x.example:6443"))
        );
        assert_eq!(target("[::1]:443"), t("::1", Some(443), Some("[::1]:443")));
        assert_eq!(target("https://[::1]:8443/x"), t("::1", Some(8443), Some("https://[::1]:8443/x")));
        assert_eq!(
            target("api.c-x.example/version"),
            t("api.c-x.example", None, Some("api.c-x.example/version"))
        );
        assert_eq!(
            target("api.c-x.example:6443/x"),
            t("api.c-x.example", Some(6443), Some("api.c-x.example:6443/x"))
        );
        // What is a host already stays as it is.
        assert_eq!(target("api.c-x.example"), t("api.c-x.example", None, None));
        assert_eq!(target("::1"), t("::1", None, None));
        assert_eq!(target("10.0.0.1"), t("10.0.0.1", None, None));
        // Not a host, and not made into one: kharond says why.
        assert_eq!(target("bad host!"), t("bad host!", None, None));
        assert_eq!(target("host:"), t("host:", None, None));
    }
}
