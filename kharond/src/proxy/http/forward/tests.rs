use std::net::SocketAddr;
use std::time::Duration;

use kharon_relay::Counters;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::proxy::http::request::{Parsed, parse};
use crate::routing::dial;
use kharon_routing::table::Route;

/// What `decide` makes of a complete head.
fn decided(head: &str) -> Result<Forward, Refused> {
    match parse(head.as_bytes(), |request, _| head::decide(request, None)) {
        Parsed::Complete(verdict) => verdict,
        other => panic!("not a complete head: {:?}", std::mem::discriminant(&other)),
    }
}

fn upstream_head(forward: &Forward) -> String {
    let head = &forward.head;
    let mut text = format!("{} {} {:?}\n", head.method(), head.uri(), head.version());
    for (name, value) in head.headers() {
        text.push_str(&format!("{name}: {}\n", value.to_str().unwrap_or("?")));
    }
    text
}

#[test]
fn the_target_gets_origin_form_its_own_host_and_no_hop_by_hop_field() {
    let forward = decided(
        "GET http://API.C1.Example:8080/a/b?c=d HTTP/1.1\r\nHost: elsewhere.example\r\n\
         Connection: keep-alive, X-Secret-Hop\r\nProxy-Connection: keep-alive\r\nKeep-Alive: 5\r\n\
         TE: trailers\r\nUpgrade: websocket\r\nX-Secret-Hop: 1\r\nProxy-Authorization: Basic eDp5\r\n\
         Accept: */*\r\nVia: 1.0 corp-proxy\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n",
    )
    .expect("forwarded");
    assert_eq!(forward.target, Target::Name("api.c1.example".into(), 8080));
    assert_eq!(
        upstream_head(&forward),
        "GET /a/b?c=d HTTP/1.1\naccept: */*\ncookie: a=1\ncookie: b=2\nhost: API.C1.Example:8080\n\
         via: 1.0 corp-proxy, 1.1 kharon\n"
    );
    assert!(forward.keep_alive && !forward.http10 && !forward.expect_continue);
    assert_eq!(forward.framing, Framing::Empty);
}

#[test]
fn urls_name_their_port_or_80_and_options_of_the_bare_host_is_star() {
    let target = |url: &str| {
        decided(&format!("GET {url} HTTP/1.1\r\n\r\n")).map(|f| (f.target, f.head.uri().to_string()))
    };
    assert_eq!(target("http://a.example").unwrap(), (Target::Name("a.example".into(), 80), "/".into()));
    assert_eq!(target("http://[::1]:81/x").unwrap(), (Target::Ip("[::1]:81".parse().unwrap()), "/x".into()));
    assert_eq!(target("http://10.0.0.1/").unwrap().0, Target::Ip("10.0.0.1:80".parse().unwrap()));
    let options = decided("OPTIONS http://a.example HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(options.head.uri().to_string(), "*");
    for bad in ["http://a.example:99999/", "http://a.example:0/", "http://a..b/", "http://a.example:x/"] {
        assert!(target(bad).is_err(), "{bad}");
    }
    assert!(matches!(target("http://user:pw@a.example/"), Err(Refused::Userinfo(_))));
}

#[test]
fn framing_that_two_parsers_could_read_two_ways_is_refused() {
    let with = |fields: &str| decided(&format!("POST http://a.example/ HTTP/1.1\r\n{fields}\r\n"));
    assert_eq!(with("Content-Length: 5\r\n").unwrap().framing, Framing::Length(5));
    assert_eq!(with("Transfer-Encoding: chunked\r\n").unwrap().framing, Framing::Chunked);
    assert_eq!(with("Transfer-Encoding: CHUNKED\r\n").unwrap().framing, Framing::Chunked);
    assert_eq!(with("Content-Length: 0\r\n").unwrap().framing, Framing::Empty);
    for (fields, status) in [
        ("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "400 Bad Request"),
        ("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "400 Bad Request"),
        ("Content-Length: 5\r\nContent-Length: 5\r\n", "400 Bad Request"),
        ("Content-Length: 5, 5\r\n", "400 Bad Request"),
        ("Content-Length: +5\r\n", "400 Bad Request"),
        ("Content-Length: 0x5\r\n", "400 Bad Request"),
        ("Content-Length: 99999999999999999999\r\n", "400 Bad Request"),
        ("Transfer-Encoding: chunked, chunked\r\n", "501 Not Implemented"),
        ("Transfer-Encoding: gzip, chunked\r\n", "501 Not Implemented"),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n", "501 Not Implemented"),
        ("Transfer-Encoding: xchunked\r\n", "501 Not Implemented"),
        ("Expect: 200-ok\r\n", "417 Expectation Failed"),
        ("Host: a\r\nHost: b\r\n", "400 Bad Request"),
    ] {
        let refused = with(fields).err().unwrap_or_else(|| panic!("{fields:?} forwarded"));
        assert_eq!(refused.status(), status, "{fields:?}: {refused}");
    }
    let http10 = decided("POST http://a.example/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert!(matches!(http10, Err(Refused::ChunkedHttp10)));
    // Whitespace before the colon, the classic disguise, never reaches a framing decision.
    let disguised =
        parse(b"POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n", |_, _| ());
    assert_eq!(disguised, Parsed::Malformed);
    let folded = parse(b"POST http://a.example/ HTTP/1.1\r\nContent-Length: 1\r\n 2\r\n\r\n", |_, _| ());
    assert_eq!(folded, Parsed::Malformed);
}

#[test]
fn trace_is_not_forwarded_and_options_counts_down_max_forwards() {
    assert!(matches!(decided("TRACE http://a.example/ HTTP/1.1\r\n\r\n"), Err(Refused::Trace)));
    let options = decided("OPTIONS http://a.example/ HTTP/1.1\r\nMax-Forwards: 3\r\n\r\n").unwrap();
    assert_eq!(options.head.headers()["max-forwards"], "2");
    assert!(matches!(
        decided("OPTIONS http://a.example/ HTTP/1.1\r\nMax-Forwards: 0\r\n\r\n"),
        Err(Refused::LastHop)
    ));
}

#[test]
fn http10_and_connection_close_end_the_connection_after_the_answer() {
    assert!(!decided("GET http://a.example/ HTTP/1.0\r\n\r\n").unwrap().keep_alive);
    assert!(!decided("GET http://a.example/ HTTP/1.1\r\nConnection: Close\r\n\r\n").unwrap().keep_alive);
    let expect =
        decided("PUT http://a.example/ HTTP/1.1\r\nContent-Length: 1\r\nExpect: 100-Continue\r\n\r\n");
    let expect = expect.unwrap();
    assert!(expect.expect_continue && !expect.head.headers().contains_key("expect"));
}

/// Runs the body pump over `sent` (everything the client sends) and collects what hyper would get.
async fn pumped(framing: Framing, sent: &[u8]) -> (Result<u64, body::Error>, Vec<u8>, Vec<u8>) {
    let (mut client, mut server) = tokio::io::duplex(64 * 1024);
    client.write_all(sent).await.unwrap();
    drop(client);
    let (feed, mut outgoing) = body::channel(framing);
    let mut input = Vec::new();
    let pump = body::pump(&mut server, &mut input, framing, feed);
    let collect = async {
        let mut data = Vec::new();
        while let Some(frame) = http_body_util::BodyExt::frame(&mut outgoing).await {
            match frame {
                Ok(frame) => data.extend_from_slice(&frame.into_data().unwrap_or_default()),
                Err(_) => {
                    data.extend_from_slice(b"<broken>");
                    break;
                }
            }
        }
        data
    };
    let (result, data) = tokio::join!(pump, collect);
    (result, data, input)
}

#[tokio::test]
async fn bodies_are_read_exactly_as_framed_and_what_follows_stays() {
    let (result, data, rest) = pumped(Framing::Length(5), b"helloGET next").await;
    assert_eq!((result.unwrap(), &data[..], &rest[..]), (5, &b"hello"[..], &b"GET next"[..]));
    let chunked = b"5;ext=1\r\nhello\r\n1\r\n \r\n0\r\nX-Trailer: t\r\n\r\nGET next";
    let (result, data, rest) = pumped(Framing::Chunked, chunked).await;
    assert_eq!((result.unwrap(), &data[..], &rest[..]), (6, &b"hello "[..], &b"GET next"[..]));
}

#[tokio::test]
async fn a_broken_body_never_reaches_the_target_as_a_shorter_one() {
    for (framing, sent) in [
        (Framing::Chunked, &b"5\r\nhello\r\n"[..]),
        (Framing::Chunked, b"\r\n\r\n"),
        (Framing::Chunked, b"5\r\nhelloXX0\r\n\r\n"),
        (Framing::Chunked, b"-5\r\nhello\r\n0\r\n\r\n"),
        (Framing::Chunked, b"fffffffffffffffff\r\n"),
        (Framing::Length(10), b"short"),
    ] {
        let (result, data, _) = pumped(framing, sent).await;
        assert!(result.is_err(), "{sent:?}");
        assert!(data.ends_with(b"<broken>"), "{sent:?}: the body ended cleanly: {data:?}");
    }
}

/// A target that records each request's raw bytes and answers every one with `answer`.
async fn target(answer: &'static [u8]) -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match tokio::time::timeout(Duration::from_millis(300), stream.read(&mut buf)).await {
                        Ok(Ok(n)) if n > 0 => request.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                    if complete(&request) {
                        let _ = tx.send(std::mem::take(&mut request));
                        if stream.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, rx)
}

/// Whether `request` holds a whole request as hyper frames one (a length, or chunks).
fn complete(request: &[u8]) -> bool {
    let text = String::from_utf8_lossy(request).to_ascii_lowercase();
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return false };
    if head.contains("transfer-encoding: chunked") {
        return body.ends_with("0\r\n\r\n");
    }
    let length =
        head.lines().find_map(|l| l.strip_prefix("content-length: ")).and_then(|n| n.trim().parse().ok());
    body.len() >= length.unwrap_or(0)
}

/// Legs that dial every target at one address, and count the legs.
struct TestLegs {
    at: SocketAddr,
    opened: usize,
    counters: Counters,
}

impl Legs for TestLegs {
    fn open(&mut self, _target: &Target) -> impl Future<Output = Result<Upstream, Box<Failed>>> + Send {
        self.opened += 1;
        let at = self.at;
        async move {
            TcpStream::connect(at).await.map(Upstream::Tcp).map_err(|source| {
                Box::new(Failed { route: Route::Direct, error: dial::Error::Connect { addr: at, source } })
            })
        }
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn answering(&self) {}

    fn failed(&self, _why: &dyn fmt::Display, _notice: Notice) {}
}

/// Serves `requests` (the first judged as the handshake would) through a session, returning what
/// the client read and how many legs were opened.
async fn session(at: SocketAddr, requests: &'static [u8]) -> (String, usize) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
    let (mut client, (mut server, _)) = (client.unwrap(), accepted.unwrap());
    client.write_all(requests).await.unwrap();
    let mut head = Vec::new();
    let (judged, early) = crate::proxy::http::read_head(&mut server, &mut head, None).await.unwrap();
    let crate::proxy::http::Head::Forward(Ok(first)) = judged else { panic!("not a forward request") };
    let session = Session { client: server, input: Zeroizing::new(early), first };
    let mut legs = TestLegs { at, opened: 0, counters: Counters::default() };
    let limits = Limits {
        auth: None,
        caller: crate::proxy::credentials::Caller::TEST,
        head: Duration::from_secs(5),
        idle: Duration::from_millis(500),
    };
    let serving = serve(session, &mut legs, limits);
    let reading = async {
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut answer)).await;
        String::from_utf8_lossy(&answer).into_owned()
    };
    let ((), answer) = tokio::join!(serving, reading);
    (answer, legs.opened)
}

#[tokio::test]
async fn requests_on_one_connection_share_a_link_per_target_and_are_reframed() {
    let (at, mut seen) =
        target(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok").await;
    let (answer, opened) = session(
        at,
        b"POST http://a.example/one HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
          GET http://a.example/two HTTP/1.1\r\nHost: a.example\r\n\r\n\
          GET http://b.example/three HTTP/1.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(answer.matches("HTTP/1.1 200 OK\r\n").count(), 3, "{answer}");
    assert!(answer.contains("via: 1.1 kharon\r\ncontent-length: 2\r\n\r\nok"), "{answer}");
    assert!(answer.ends_with("connection: close\r\n\r\nok"), "{answer}");
    assert_eq!(opened, 2, "a.example twice on one link, then b.example on its own");
    let mut requests = Vec::new();
    while let Ok(request) = seen.try_recv() {
        requests.push(String::from_utf8(request).unwrap());
    }
    let all = requests.concat();
    // The chunked body went up as hyper frames it, never as the client framed it, and every
    // request line is origin-form.
    assert!(all.starts_with("POST /one HTTP/1.1\r\n"), "{all}");
    assert!(all.contains("GET /two HTTP/1.1\r\n") && all.contains("GET /three HTTP/1.1\r\n"), "{all}");
    assert!(!all.contains("http://"), "{all}");
    assert!(all.contains("\r\nHost: b.example\r\n"), "{all}");
}

#[tokio::test]
async fn a_conflicting_request_is_answered_400_and_reaches_no_target() {
    let (at, mut seen) = target(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
    let (answer, _) = session(
        at,
        b"GET http://a.example/ HTTP/1.1\r\n\r\n\
          POST http://a.example/ HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n\
          0\r\n\r\nGET http://a.example/smuggled HTTP/1.1\r\n\r\n",
    )
    .await;
    assert!(answer.contains("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
    assert!(answer.contains("both Content-Length and Transfer-Encoding"), "{answer}");
    let mut all = String::new();
    while let Ok(request) = seen.try_recv() {
        all.push_str(&String::from_utf8_lossy(&request));
    }
    assert_eq!(all.matches("HTTP/1.1\r\n").count(), 1, "{all}");
    assert!(!all.contains("smuggled") && !all.contains("POST"), "{all}");
}

#[tokio::test]
async fn an_answer_without_a_length_is_chunked_for_the_client() {
    let (at, _seen) =
        target(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n").await;
    let (answer, _) = session(at, b"GET http://a.example/ HTTP/1.1\r\nConnection: close\r\n\r\n").await;
    assert!(answer.contains("transfer-encoding: chunked\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\n2\r\nok\r\n0\r\n\r\n"), "{answer}");
}

#[tokio::test]
async fn a_malformed_chunked_body_is_answered_400_and_the_target_never_gets_a_whole_request() {
    let (at, mut seen) = target(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
    let (answer, _) = session(
        at,
        b"POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
    assert!(answer.contains("malformed chunked request body"), "{answer}");
    assert!(seen.try_recv().is_err(), "the target got a whole request");
}
