//! The SOCKS5 handshake against an in-memory client that hands its bytes over in chosen chunk
//! sizes and takes our answers a few bytes at a time (so a `write` instead of `write_all` shows).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use kharon_config::SocksAuth;
use proptest::prelude::*;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::*;

/// A client whose input is `input`, delivered `chunks[i % len]` bytes per read, then EOF.
struct Client {
    input: Vec<u8>,
    read: usize,
    chunks: Vec<usize>,
    reads: usize,
    written: Vec<u8>,
    /// What the handshake read past the request and handed back for the relay.
    early: Vec<u8>,
}

impl Client {
    fn new(input: &[u8], chunks: &[usize]) -> Self {
        Client {
            input: input.to_vec(),
            read: 0,
            chunks: chunks.to_vec(),
            reads: 0,
            written: Vec::new(),
            early: Vec::new(),
        }
    }

    /// What the relay gets from the client: what the handshake read past the request, then what
    /// it left unread.
    fn for_relay(&self) -> Vec<u8> {
        [&self.early[..], &self.input[self.read..]].concat()
    }

    /// How many bytes the handshake took as its own.
    fn consumed(&self) -> usize {
        self.read - self.early.len()
    }
}

impl AsyncRead for Client {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let chunk = self.chunks[self.reads % self.chunks.len()].max(1);
        self.reads += 1;
        let n = chunk.min(buf.remaining()).min(self.input.len() - self.read);
        let start = self.read;
        buf.put_slice(&self.input[start..start + n]);
        self.read += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Client {
    fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        // Short writes on purpose: an answer sent with `write` would arrive truncated.
        let n = buf.len().min(3);
        self.written.extend_from_slice(&buf[..n]);
        Poll::Ready(Ok(n))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn creds() -> Credentials {
    Credentials::new(&SocksAuth { username: "kh".into(), password: "s3cret".into() }, None)
}

/// A runtime of its own for each handshake: the credentials' gate holds a wrong guess with tokio's
/// timer.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime").block_on(future)
}

/// Runs the handshake; returns the outcome and the client (what we wrote, what is left for the
/// relay).
fn run(input: &[u8], chunks: &[usize], auth: Option<&Credentials>) -> (Result<Target, Error>, Client) {
    let mut client = Client::new(input, chunks);
    let mut received = Vec::new();
    let outcome =
        block_on(negotiate(&mut client, &mut received, auth, crate::proxy::credentials::Caller::TEST));
    if outcome.is_ok() {
        client.early = received;
    }
    (outcome, client)
}

fn greeting(methods: &[u8]) -> Vec<u8> {
    let mut m = vec![5, methods.len() as u8];
    m.extend_from_slice(methods);
    m
}

fn auth_message(user: &[u8], pass: &[u8]) -> Vec<u8> {
    let mut m = vec![1, user.len() as u8];
    m.extend_from_slice(user);
    m.push(pass.len() as u8);
    m.extend_from_slice(pass);
    m
}

fn connect_name(name: &[u8], port: u16) -> Vec<u8> {
    let mut m = vec![5, 1, 0, 3, name.len() as u8];
    m.extend_from_slice(name);
    m.extend_from_slice(&port.to_be_bytes());
    m
}

fn connect_v4(ip: [u8; 4], port: u16) -> Vec<u8> {
    let mut m = vec![5, 1, 0, 1];
    m.extend_from_slice(&ip);
    m.extend_from_slice(&port.to_be_bytes());
    m
}

fn connect_v6(ip: [u8; 16], port: u16) -> Vec<u8> {
    let mut m = vec![5, 1, 0, 4];
    m.extend_from_slice(&ip);
    m.extend_from_slice(&port.to_be_bytes());
    m
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn name(host: &str, port: u16) -> Target {
    Target::Name(host.into(), port)
}

// === the parsers, message by message ===

/// Every proper prefix asks for more without asking past the message; the whole is decided, with
/// its length.
fn assert_needs_exactly<T: std::fmt::Debug>(message: &[u8], parse: fn(&[u8]) -> Result<Parse<T>, Violation>) {
    for cut in 0..message.len() {
        match parse(&message[..cut]) {
            Ok(Parse::Need(n)) => {
                assert!(n >= 1 && cut + n <= message.len(), "{message:?} cut at {cut}: need {n}")
            }
            other => panic!("{message:?} cut at {cut}: {other:?}"),
        }
    }
    assert!(
        matches!(parse(message), Ok(Parse::Done(_, len)) if len == message.len()),
        "{message:?}: {:?}",
        parse(message)
    );
    // Bytes after the message change nothing: it is as long as before.
    let followed = [message, &[0x05, 0x01, 0x00][..]].concat();
    assert!(
        matches!(parse(&followed), Ok(Parse::Done(_, len)) if len == message.len()),
        "{message:?} followed"
    );
}

#[test]
fn each_message_split_at_every_byte_asks_for_no_byte_past_its_end() {
    for methods in [&[0u8][..], &[2], &[0, 2], &[1, 2, 0, 0x80, 0xff]] {
        assert_needs_exactly(&greeting(methods), wire::greeting);
    }
    assert_needs_exactly(&greeting(&[7; 255]), wire::greeting);
    assert_needs_exactly(&auth_message(b"kh", b"s3cret"), wire::credentials);
    assert_needs_exactly(&auth_message(&[b'u'; 255], &[b'p'; 255]), wire::credentials);
    assert_needs_exactly(&auth_message(b"u", b"p"), wire::credentials);
    assert_needs_exactly(&connect_name(b"api.example.com", 443), wire::request);
    assert_needs_exactly(&connect_name(&[b'a'; 255], 443), wire::request);
    assert_needs_exactly(&connect_name(b"", 443), wire::request);
    assert_needs_exactly(&connect_v4([127, 0, 0, 1], 80), wire::request);
    assert_needs_exactly(&connect_v6([0xfe; 16], 80), wire::request);
}

#[test]
fn a_wrong_version_byte_is_judged_on_arrival() {
    assert_eq!(wire::greeting(&[4]), Err(Violation::NotSocks5(4)));
    assert_eq!(wire::greeting(b"G"), Err(Violation::NotSocks5(b'G')));
    assert_eq!(wire::credentials(&[5]), Err(Violation::AuthVersion(5)));
    assert_eq!(wire::request(&[4]), Err(Violation::RequestVersion(4)));
}

// === the handshake, end to end over the in-memory client ===

#[test]
fn each_message_split_into_single_bytes_works() {
    let input = cat(&[&greeting(&[0]), &connect_name(b"API.Example.com.", 6443)]);
    let (outcome, client) = run(&input, &[1], None);
    assert_eq!(outcome.unwrap(), name("api.example.com", 6443));
    assert_eq!(client.written, [5, 0]);
    assert!(client.for_relay().is_empty());

    let input = cat(&[&greeting(&[0, 2]), &auth_message(b"kh", b"s3cret"), &connect_v4([10, 1, 2, 3], 80)]);
    let (outcome, client) = run(&input, &[1], Some(&creds()));
    assert_eq!(outcome.unwrap(), Target::Ip("10.1.2.3:80".parse().unwrap()));
    assert_eq!(client.written, [5, 2, 1, 0]);
}

#[test]
fn pipelined_bytes_after_the_request_are_left_for_the_relay() {
    let payload = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    for auth in [None, Some(creds())] {
        let mut input = match auth {
            None => greeting(&[0]),
            Some(_) => cat(&[&greeting(&[2]), &auth_message(b"kh", b"s3cret")]),
        };
        input.extend_from_slice(&connect_v6([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 8443));
        input.extend_from_slice(payload);
        // One segment holding everything, as a pipelining client sends it.
        let (outcome, client) = run(&input, &[4096], auth.as_ref());
        assert_eq!(outcome.unwrap(), Target::Ip("[::1]:8443".parse().unwrap()));
        assert_eq!(client.for_relay(), payload);
    }
}

#[test]
fn ip_literals_sent_as_names_become_addresses() {
    let input = cat(&[&greeting(&[0]), &connect_name(b"[::1]", 443)]);
    assert_eq!(run(&input, &[64], None).0.unwrap(), Target::Ip("[::1]:443".parse().unwrap()));
    let input = cat(&[&greeting(&[0]), &connect_name(b"192.0.2.7", 22)]);
    assert_eq!(run(&input, &[64], None).0.unwrap(), Target::Ip("192.0.2.7:22".parse().unwrap()));
}

#[test]
fn with_a_password_configured_the_password_method_wins_over_no_auth() {
    let input = cat(&[&greeting(&[0, 2]), &auth_message(b"kh", b"s3cret"), &connect_name(b"a.example", 80)]);
    let (outcome, client) = run(&input, &[64], Some(&creds()));
    assert_eq!(outcome.unwrap(), name("a.example", 80));
    assert_eq!(&client.written[..2], [5, 2]);
    // Without one, no-auth is chosen even when the password method is offered first.
    let input = cat(&[&greeting(&[2, 0]), &connect_name(b"a.example", 80)]);
    let (outcome, client) = run(&input, &[64], None);
    assert_eq!(outcome.unwrap(), name("a.example", 80));
    assert_eq!(client.written, [5, 0]);
}

/// A refusal: what the client was told (all of it) and that nothing after it was read.
fn assert_refused(input: &[u8], auth: Option<&Credentials>, told: &[u8], why: impl Fn(&Error) -> bool) {
    for chunks in [&[4096][..], &[1], &[2, 3]] {
        let (outcome, client) = run(input, chunks, auth);
        let error = outcome.expect_err("refused");
        assert!(why(&error), "{input:?}: {error}");
        assert_eq!(client.written, told, "{input:?} in chunks {chunks:?}: {error}");
    }
}

#[test]
fn bad_greetings_are_refused() {
    let none = [5, 0xff];
    assert_refused(&[4, 1, 0, 80, 127, 0, 0, 1, 0], None, &[], |e| {
        matches!(e, Error::Protocol(Violation::NotSocks5(4)))
    });
    assert_refused(b"GET / HTTP/1.1\r\n\r\n", None, &[], |e| {
        matches!(e, Error::Protocol(Violation::NotSocks5(_)))
    });
    assert_refused(&[5, 0], None, &none, |e| matches!(e, Error::Protocol(Violation::NoMethods)));
    assert_refused(&[5, 1, 1], None, &none, |e| matches!(e, Error::NoAcceptableMethod(_)));
    // Without a password, only 0x00 is acceptable; with one, only 0x02.
    assert_refused(&[5, 1, 2], None, &none, |e| matches!(e, Error::NoAcceptableMethod(_)));
    assert_refused(&[5, 1, 0], Some(&creds()), &none, |e| matches!(e, Error::NoAcceptableMethod(_)));
    // 255 methods announced, a short body: cut short, not answered.
    assert_refused(&[5, 255, 0, 0], None, &[], |e| matches!(e, Error::CutShort));
    assert_refused(&[5], None, &[], |e| matches!(e, Error::CutShort));
    assert_refused(&[], None, &[], |e| matches!(e, Error::CutShort));
}

#[test]
fn bad_credentials_are_refused_with_status_failure() {
    let auth = Some(creds());
    let auth = auth.as_ref();
    let refused = |message: Vec<u8>, why: fn(&Error) -> bool| {
        let input = cat(&[&greeting(&[2]), &message, &connect_name(b"a.example", 80)]);
        assert_refused(&input, auth, &[5, 2, 1, 1], why);
    };
    refused(auth_message(b"kh", b"wrong"), |e| matches!(e, Error::AuthRejected));
    refused(auth_message(b"kh", b"s3cret-and-more"), |e| matches!(e, Error::AuthRejected));
    refused(auth_message(b"kh", b"s3cre"), |e| matches!(e, Error::AuthRejected));
    refused(auth_message(b"KH", b"s3cret"), |e| matches!(e, Error::AuthRejected));
    refused(auth_message(b"", b"s3cret"), |e| matches!(e, Error::Protocol(Violation::EmptyUsername)));
    refused(auth_message(b"kh", b""), |e| matches!(e, Error::Protocol(Violation::EmptyPassword)));
    refused(auth_message(b"", b""), |e| matches!(e, Error::Protocol(Violation::EmptyUsername)));
    let mut wrong_version = auth_message(b"kh", b"s3cret");
    wrong_version[0] = 5;
    refused(wrong_version, |e| matches!(e, Error::Protocol(Violation::AuthVersion(5))));
    // Cut short inside the password: no status at all.
    let input = cat(&[&greeting(&[2]), &auth_message(b"kh", b"s3cret")[..6]]);
    assert_refused(&input, auth, &[5, 2], |e| matches!(e, Error::CutShort));
}

#[test]
fn bad_requests_are_refused_with_their_reply_code() {
    let reply = |code: u8| cat(&[&[5, 0], &[5, code, 0, 1, 0, 0, 0, 0, 0, 0]]);
    let refused = |request: &[u8], code: u8, why: fn(&Error) -> bool| {
        assert_refused(&cat(&[&greeting(&[0]), request]), None, &reply(code), why);
    };
    let mut reserved = connect_v4([127, 0, 0, 1], 80);
    reserved[2] = 1;
    refused(&reserved, 1, |e| matches!(e, Error::Protocol(Violation::Reserved(1))));
    for command in [2u8, 3, 0, 0xff] {
        let mut request = connect_v4([127, 0, 0, 1], 80);
        request[1] = command;
        refused(&request, 7, |e| matches!(e, Error::Protocol(Violation::Command(_))));
    }
    for atyp in [0u8, 2, 5, 9, 0xff] {
        refused(&[5, 1, 0, atyp], 8, |e| matches!(e, Error::Protocol(Violation::AddressType(_))));
    }
    let bad_name = |e: &Error| matches!(e, Error::Target(target::Error::BadName(_)));
    refused(&connect_name(b"", 80), 4, bad_name);
    refused(&connect_name(b"nul\0.example", 80), 4, bad_name);
    refused(&connect_name(b"\xff\xfe\xfd.example", 80), 4, bad_name);
    refused(&connect_name(b"caf\xc3\xa9.example", 80), 4, bad_name);
    refused(&connect_name(&[b'a'; 255], 80), 4, bad_name);
    refused(&connect_name(b"a b", 80), 4, bad_name);
    let port_zero = |e: &Error| matches!(e, Error::Target(target::Error::PortZero));
    refused(&connect_name(b"a.example", 0), 4, port_zero);
    refused(&connect_v4([127, 0, 0, 1], 0), 4, port_zero);
}

#[test]
fn a_request_cut_short_or_in_another_version_gets_no_reply() {
    let full = connect_name(b"api.example.com", 443);
    for cut in 0..full.len() {
        let input = cat(&[&greeting(&[0]), &full[..cut]]);
        assert_refused(&input, None, &[5, 0], |e| matches!(e, Error::CutShort));
    }
    let mut v4 = connect_v4([127, 0, 0, 1], 80);
    v4[0] = 4;
    assert_refused(&cat(&[&greeting(&[0]), &v4]), None, &[5, 0], |e| {
        matches!(e, Error::Protocol(Violation::RequestVersion(4)))
    });
}

#[test]
fn the_password_is_checked_whole() {
    let expected = creds();
    assert!(crate::proxy::credentials::matches(&expected, b"kh", b"s3cret"));
    for (user, pass) in
        [(&b"kh"[..], &b"s3cre"[..]), (b"kh", b"s3cret\0"), (b"k", b"s3cret"), (b"kh", b"S3cret")]
    {
        assert!(!crate::proxy::credentials::matches(&expected, user, pass), "{user:?} {pass:?}");
    }
}

#[test]
fn replies_carry_the_bound_address_and_the_failure_code() {
    let mut client = Client::new(&[], &[1]);
    block_on(reply_success(&mut client, "192.0.2.1:4242".parse().unwrap())).unwrap();
    assert_eq!(client.written, [5, 0, 0, 1, 192, 0, 2, 1, 0x10, 0x92]);
    let mut client = Client::new(&[], &[1]);
    block_on(reply_success(&mut client, "[::1]:80".parse().unwrap())).unwrap();
    assert_eq!(client.written.len(), 22);
    assert_eq!(&client.written[..4], [5, 0, 0, 4]);
    assert_eq!(&client.written[19..], [1, 0, 80]);
    for (failure, code) in [
        (Unreachable::General, 1),
        (Unreachable::NotAllowed, 2),
        (Unreachable::Network, 3),
        (Unreachable::Host, 4),
        (Unreachable::Refused, 5),
        (Unreachable::TimedOut, 6),
    ] {
        let mut client = Client::new(&[], &[1]);
        block_on(reply_failure(&mut client, failure)).unwrap();
        assert_eq!(client.written, [5, code, 0, 1, 0, 0, 0, 0, 0, 0], "{failure:?}");
    }
}

// === properties ===

/// What a handshake did, comparable across chunkings: the outcome, what the client was told and,
/// on success, how much it took as the handshake's (after a refusal, a chunk may have brought more
/// of the bad message).
fn summary(
    input: &[u8],
    chunks: &[usize],
    auth: Option<&Credentials>,
) -> (Result<(Target, usize), String>, Vec<u8>) {
    let (outcome, client) = run(input, chunks, auth);
    assert!(client.read <= input.len());
    (outcome.map(|target| (target, client.consumed())).map_err(|e| e.to_string()), client.written)
}

fn valid_name() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-zA-Z0-9_-]{1,20}(\\.[a-zA-Z0-9_-]{1,20}){0,4}\\.?").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any bytes, in any chunking: never a panic, always a target or an error, the same outcome
    /// whatever the chunking, and never a read past the end of the input it was given.
    #[test]
    fn arbitrary_bytes_never_panic_and_chunking_changes_nothing(
        input in proptest::collection::vec(any::<u8>(), 0..600),
        chunks in proptest::collection::vec(1usize..64, 1..8),
        with_auth in any::<bool>(),
    ) {
        let auth = with_auth.then(creds);
        let whole = summary(&input, &[4096], auth.as_ref());
        prop_assert_eq!(summary(&input, &chunks, auth.as_ref()), whole.clone());
        prop_assert_eq!(summary(&input, &[1], auth.as_ref()), whole);
    }

    /// A valid handshake followed by anything: the target, and every byte after the request
    /// handed to the relay in order, whatever the chunking.
    #[test]
    fn a_valid_handshake_hands_every_byte_past_the_request_to_the_relay(
        host in valid_name(),
        port in 1u16..,
        extra_methods in proptest::collection::vec(any::<u8>(), 0..20),
        with_auth in any::<bool>(),
        trailing in proptest::collection::vec(any::<u8>(), 0..200),
        chunks in proptest::collection::vec(1usize..64, 1..8),
    ) {
        let auth = with_auth.then(creds);
        let mut methods = extra_methods;
        methods.push(if with_auth { 2 } else { 0 });
        let mut input = greeting(&methods);
        if with_auth {
            input.extend_from_slice(&auth_message(b"kh", b"s3cret"));
        }
        input.extend_from_slice(&connect_name(host.as_bytes(), port));
        input.extend_from_slice(&trailing);
        let (outcome, client) = run(&input, &chunks, auth.as_ref());
        let expected = host.strip_suffix('.').unwrap_or(&host).to_ascii_lowercase();
        prop_assert_eq!(outcome.map_err(|e| e.to_string()), Ok(name(&expected, port)));
        prop_assert_eq!(client.for_relay(), trailing);
    }
}
