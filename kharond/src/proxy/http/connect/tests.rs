use std::net::SocketAddr;

use base64::Engine;
use kharon_config::SocksAuth;

use super::super::request::Judged;

use super::*;

fn creds() -> Credentials {
    Credentials::new(&SocksAuth { username: "kh".into(), password: "s3:cret".into() }, None)
}

fn connect(target: &str, headers: &str) -> String {
    format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{headers}\r\n")
}

/// What a request head is to this module, as `read_head` judges it and the handshake admits it:
/// `None` when it is not a complete CONNECT request (the PAC path answers it), else its target or
/// why it is refused.
fn judge(head: &[u8], auth: Option<&Credentials>) -> Option<Result<Target, Error>> {
    match super::super::request::judge(head, |request| decide(request, auth)) {
        Judged::Proxy { verdict, .. } => {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
            Some(runtime.block_on(admit(verdict, auth, crate::proxy::credentials::Caller::TEST)))
        }
        Judged::Partial | Judged::Answer { .. } => None,
    }
}

fn verdict(target: &str, headers: &str, auth: Option<&Credentials>) -> Result<Target, Error> {
    judge(connect(target, headers).as_bytes(), auth).expect("a complete CONNECT")
}

fn basic(user_pass: &str) -> String {
    format!("Proxy-Authorization: Basic {}\r\n", base64::engine::general_purpose::STANDARD.encode(user_pass))
}

#[test]
fn only_a_complete_connect_is_taken() {
    for other in [
        "GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n",
        "CONNECT example.com:443 HTTP/1.1\r\nHost example.com\r\n\r\n",
        "CONNECTX example.com:443 HTTP/1.1\r\n\r\n",
    ] {
        assert!(judge(other.as_bytes(), None).is_none(), "{other:?}");
    }
    // HTTP/1.0 and bare LF line ends, as Python's http.client and printf send them.
    let target = judge(b"CONNECT example.com:443 HTTP/1.0\n\n", None).expect("CONNECT").expect("target");
    assert_eq!(target, Target::Name("example.com".into(), 443));
}

#[test]
fn targets_are_authority_form_and_checked_like_socks_names() {
    let ok = |t: &str| verdict(t, "", None).unwrap_or_else(|e| panic!("{t}: {e}"));
    assert_eq!(ok("API.Example.COM.:6443"), Target::Name("api.example.com".into(), 6443));
    assert_eq!(ok("10.1.2.3:443"), Target::Ip("10.1.2.3:443".parse().unwrap()));
    assert_eq!(ok("[::1]:443"), Target::Ip("[::1]:443".parse::<SocketAddr>().unwrap()));
    assert_eq!(ok("[2001:DB8::1]:1"), Target::Ip("[2001:db8::1]:1".parse::<SocketAddr>().unwrap()));
    assert_eq!(ok("a_b.example:65535"), Target::Name("a_b.example".into(), 65535));

    for bad in [
        "example.com",
        "example.com:",
        "example.com:https",
        "example.com:+443",
        "example.com:65536",
        "example.com:000443",
        "::1:443",
        "[::1]",
        "[::1]443",
        "[::1:443",
        "[example.com]:443",
        "[10.0.0.1]:443",
        "https://example.com:443",
    ] {
        assert!(matches!(verdict(bad, "", None), Err(Error::Authority(_))), "{bad} accepted");
    }
    for bad in [":443", "a..b:443", "user@example.com:443", "é.example:443", "a%00b:443"] {
        assert!(matches!(verdict(bad, "", None), Err(Error::Target(_))), "{bad} accepted");
    }
    assert!(matches!(verdict("example.com:0", "", None), Err(Error::Target(target::Error::PortZero))));
    assert!(matches!(verdict("[::1]:0", "", None), Err(Error::Target(target::Error::PortZero))));
}

#[test]
fn with_a_password_configured_only_the_right_basic_credentials_pass() {
    let auth = creds();
    let with = |headers: &str| verdict("example.com:443", headers, Some(&auth));
    assert!(with(&basic("kh:s3:cret")).is_ok(), "the password may hold a colon");
    assert!(
        with(&basic("kh:s3:cret").replace("Proxy-Authorization: Basic", "proxy-authorization: bAsIc"))
            .is_ok()
    );
    assert!(matches!(with(""), Err(Error::NoCredentials)));
    for wrong in ["kh:s3", "kh:s3:cretx", "kx:s3:cret", "kh:", ":s3:cret", "KH:s3:cret"] {
        assert!(matches!(with(&basic(wrong)), Err(Error::AuthRejected)), "{wrong}");
    }
    for malformed in [
        "Proxy-Authorization: Bearer a2g6czM6Y3JldA==\r\n".to_owned(),
        "Proxy-Authorization: Basic\r\n".to_owned(),
        "Proxy-Authorization: Basic !!!\r\n".to_owned(),
        basic("no colon"),
        // A second header could hide the first from a check that reads only one.
        basic("kh:s3:cret") + &basic("kh:s3:cret"),
    ] {
        assert!(matches!(with(&malformed), Err(Error::MalformedCredentials)), "{malformed:?}");
    }
    // Credentials are judged before the target: a client without them learns nothing else.
    assert!(matches!(verdict("a..b:443", "", Some(&auth)), Err(Error::NoCredentials)));
    // Without a password configured, a header (even a wrong one) is ignored.
    assert!(verdict("example.com:443", &basic("x:y"), None).is_ok());
}

fn status_line(answer: &str) -> &str {
    answer.split("\r\n").next().unwrap_or("")
}

/// The body after the head, checked against the head's Content-Length.
fn body(answer: &str) -> &str {
    let (head, body) = answer.split_once("\r\n\r\n").expect("end of head");
    assert!(head.contains(&format!("\r\nContent-Length: {}\r\n", body.len())), "{answer}");
    assert!(head.contains("\r\nContent-Type: text/plain; charset=utf-8\r\n"), "{answer}");
    body
}

#[test]
fn each_failure_maps_to_its_status_with_one_line_naming_the_route() {
    let target = Target::Name("api.c1.example".into(), 6443);
    let why = "via jump host hop1: channel open failed:\nconnect refused\x1b[31m";
    for (failure, status) in [
        (Unreachable::Refused, "HTTP/1.1 502 Bad Gateway"),
        (Unreachable::Host, "HTTP/1.1 502 Bad Gateway"),
        (Unreachable::Network, "HTTP/1.1 502 Bad Gateway"),
        (Unreachable::General, "HTTP/1.1 502 Bad Gateway"),
        (Unreachable::TimedOut, "HTTP/1.1 504 Gateway Timeout"),
        (Unreachable::NotAllowed, "HTTP/1.1 403 Forbidden"),
    ] {
        let answer = failure_answer(&target, failure, why);
        assert_eq!(status_line(&answer), status, "{failure:?}");
        let body = body(&answer);
        assert_eq!(
            body,
            "kharond cannot reach api.c1.example:6443 via jump host hop1: channel open failed: connect \
             refused [31m\n"
        );
    }
}

#[test]
fn refusals_are_400_or_407_with_a_challenge() {
    for e in [Error::NoCredentials, Error::MalformedCredentials, Error::AuthRejected] {
        let answer = refusal(&e);
        assert_eq!(status_line(&answer), "HTTP/1.1 407 Proxy Authentication Required");
        assert!(answer.contains("\r\nProxy-Authenticate: Basic realm=\"kharon\"\r\n"), "{answer}");
        assert!(body(&answer).contains("--proxy-user"), "{answer}");
    }
    let e = verdict("evil!name:443", "", None).expect_err("refused");
    let answer = refusal(&e);
    assert_eq!(status_line(&answer), "HTTP/1.1 400 Bad Request");
    assert!(!answer.contains("Proxy-Authenticate"), "{answer}");
    assert!(body(&answer).contains(r#""evil!name""#), "{answer}");
    let e = verdict("example.com", "", None).expect_err("refused");
    assert!(body(&refusal(&e)).contains("port is required"), "{e}");
}

#[test]
fn the_tunnel_opens_with_a_bare_200() {
    assert_eq!(ESTABLISHED, b"HTTP/1.1 200 Connection established\r\n\r\n");
}
