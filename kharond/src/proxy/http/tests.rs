use std::cell::Cell;

use tokio::io::DuplexStream;

use super::*;

const PAC: Reply = Reply { status: "200 OK", body: Body::Pac, head_only: false, whole_request_read: true };

/// The answer to the request bytes received so far, or `None` while the request is incomplete.
fn judge(request: &[u8]) -> Option<Reply> {
    match request::judge(request, |_| ()) {
        Judged::Partial => None,
        Judged::Answer { reply, .. } => Some(reply),
        Judged::Proxy { .. } => panic!("a proxy request is the proxy's, not the PAC path's"),
    }
}

/// The answer `read_head` would decide for a head it read whole, or cut short.
fn reply_to(request: &[u8]) -> Reply {
    judge(request).unwrap_or_else(Reply::bad_request)
}

fn status(request: &str) -> &'static str {
    judge(request.as_bytes()).map_or("incomplete", |r| r.status)
}

#[test]
fn only_local_host_headers_are_served() {
    for ok in ["localhost", "localhost:12000", "127.0.0.1:12000", "[::1]:12000", "LOCALHOST"] {
        assert!(is_local_host(ok), "{ok}");
    }
    for bad in ["", "evil.example", "evil.example:12000", "10.0.0.1:12000", "localhost.evil.example"] {
        assert!(!is_local_host(bad), "{bad}");
    }
}

#[test]
fn a_pac_fetch_gets_the_pac_with_crlf_or_bare_lf_lines() {
    assert_eq!(judge(b"GET /proxy.pac HTTP/1.1\r\nHost: localhost:12000\r\n\r\n"), Some(PAC));
    // RFC 9112 §2.2: a recipient may take a bare LF as a line end (`printf '…\n'` does that).
    assert_eq!(judge(b"GET /proxy.pac HTTP/1.0\nHost: localhost\n\n"), Some(PAC));
    assert_eq!(judge(b"GET /proxy.pac HTTP/1.1\r\nHost: localhost\n\r\n"), Some(PAC));
    assert_eq!(judge(b"GET /proxy.pac?v=2 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n"), Some(PAC));
    let head = judge(b"HEAD /proxy.pac HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(head, Some(Reply { head_only: true, ..PAC }));
}

#[test]
fn an_unfinished_request_waits_for_more() {
    for partial in
        ["", "GET", "GET /proxy.pac HTTP/1.1\r\n", "GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\n"]
    {
        assert_eq!(status(partial), "incomplete", "{partial:?}");
    }
}

#[test]
fn host_must_be_one_header_naming_this_machine() {
    let get = |headers: &str| status(&format!("GET /proxy.pac HTTP/1.1\r\n{headers}\r\n"));
    assert_eq!(get("Host: localhost\r\n"), "200 OK");
    // A rebinding page could add its own name next to ours, or ours next to its own.
    assert_eq!(get("Host: localhost\r\nHost: evil.example\r\n"), "400 Bad Request");
    assert_eq!(get("Host: evil.example\r\nhost: localhost\r\n"), "400 Bad Request");
    assert_eq!(get("Host: localhost\r\nHost: localhost\r\n"), "400 Bad Request");
    assert_eq!(get(""), "400 Bad Request");
    assert_eq!(get("Host: evil.example:12000\r\n"), "403 Forbidden");
}

#[test]
fn requests_from_web_pages_are_refused() {
    let get =
        |headers: &str| status(&format!("GET /proxy.pac HTTP/1.1\r\nHost: localhost:1\r\n{headers}\r\n"));
    // What Chromium 148 sends: nothing for --proxy-pac-url, `none`/`document` for a typed URL.
    for allowed in [
        "",
        "Sec-Fetch-Site: none\r\nSec-Fetch-Mode: navigate\r\nSec-Fetch-Dest: document\r\n",
        "Sec-Fetch-Dest: empty\r\n",
        "Sec-Fetch-Mode: no-cors\r\n",
    ] {
        assert_eq!(get(allowed), "200 OK", "{allowed:?}");
    }
    for refused in [
        // A page's <script src=…> on another site, and from another localhost port.
        "Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\nSec-Fetch-Dest: script\r\n",
        "Sec-Fetch-Site: same-site\r\nSec-Fetch-Dest: script\r\n",
        "Sec-Fetch-Site: same-origin\r\n",
        "Sec-Fetch-Site: Cross-Site\r\n",
        "Sec-Fetch-Site: cross-site\r\nSec-Fetch-Dest: empty\r\n",
        "Sec-Fetch-Dest: script\r\n",
        "Sec-Fetch-Site: none\r\nSec-Fetch-Dest: script\r\n",
        "Sec-Fetch-Dest: worker\r\n",
        "Sec-Fetch-Dest: iframe\r\n",
        // A second header must not hide the first.
        "Sec-Fetch-Site: none\r\nSec-Fetch-Site: cross-site\r\n",
    ] {
        assert_eq!(get(refused), "403 Forbidden", "{refused:?}");
    }
}

#[test]
fn other_paths_and_methods_are_refused() {
    assert_eq!(status("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"), "404 Not Found");
    let head = judge(b"HEAD /x HTTP/1.1\r\nHost: localhost\r\n\r\n").expect("complete");
    assert_eq!((head.status, head.head_only), ("404 Not Found", true));
    let post = judge(b"POST /proxy.pac HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n");
    let post = post.expect("complete");
    assert_eq!(post.status, "405 Method Not Allowed");
    assert!(reply_head(&post, 0).contains("\r\nAllow: GET, HEAD, CONNECT\r\n"), "{}", reply_head(&post, 0));
}

#[test]
fn proxy_requests_are_the_proxys_and_other_schemes_are_told_what_to_use() {
    // An http:// URL came through HTTP_PROXY: the proxy forwards it (forward/), whatever its case.
    for request in [
        "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
        "POST HTTP://localhost:1/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n",
        "CONNECT example.com:443 HTTP/1.1\r\n\r\n",
    ] {
        let judged = request::judge(request.as_bytes(), |_| ());
        assert!(matches!(judged, Judged::Proxy { .. }), "{request:?}");
    }
    let reply = judge(b"HEAD https://example.com:8443/x HTTP/1.1\r\nHost: example.com:8443\r\n\r\n");
    let reply = reply.expect("complete");
    assert_eq!(reply.status, "501 Not Implemented");
    let Body::Text(text) = reply.body else { panic!("{reply:?}") };
    assert!(text.contains("HTTPS_PROXY=http://") && text.contains("socks5h://"), "{text}");
    // A URL in the query of an origin-form path is not a proxy request.
    assert_eq!(status("GET /proxy.pac?from=http://x HTTP/1.1\r\nHost: localhost\r\n\r\n"), "200 OK");
}

#[test]
fn a_method_that_is_connect_in_another_case_is_told_methods_are_case_sensitive() {
    for request in
        ["connect example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", "Connect a:1 HTTP/1.0\r\n\r\n"]
    {
        let reply = judge(request.as_bytes()).expect("complete");
        assert_eq!(reply.status, "501 Not Implemented", "{request:?}");
        let Body::Text(text) = reply.body else { panic!("{reply:?}") };
        assert!(text.contains("case-sensitive") && text.contains("CONNECT"), "{text}");
    }
}

#[test]
fn oversized_and_malformed_requests_get_an_answer() {
    let mut long = b"GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\nX-Pad: ".to_vec();
    long.resize(MAX_REQUEST - 1, b'a');
    assert_eq!(judge(&long), None, "still under the limit");
    long.push(b'a');
    let reply = judge(&long).expect("at the limit");
    assert_eq!(reply.status, "431 Request Header Fields Too Large");
    assert!(!reply.whole_request_read);

    let many: String = (0..MAX_HEADERS + 1).map(|i| format!("X-{i}: 1\r\n")).collect();
    assert_eq!(
        status(&format!("GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\n{many}\r\n")),
        "431 Request Header Fields Too Large"
    );
    for bad in ["GET /proxy.pac HTTP/1.1\r\nHost localhost\r\n\r\n", "GET\x01 / HTTP/1.1\r\n\r\n", "G\0"] {
        assert_eq!(status(bad), "400 Bad Request", "{bad:?}");
    }
}

#[test]
fn every_answer_forbids_sniffing_and_other_origins() {
    let replies = [
        PAC,
        Reply::bad_request(),
        judge(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").expect("404"),
        judge(b"GET /proxy.pac HTTP/1.1\r\nHost: evil.example\r\n\r\n").expect("403"),
    ];
    for reply in replies {
        let head = reply_head(&reply, 7);
        assert!(head.contains("\r\nX-Content-Type-Options: nosniff\r\n"), "{head}");
        assert!(head.contains("\r\nCross-Origin-Resource-Policy: same-origin\r\n"), "{head}");
        assert!(head.contains("\r\nContent-Length: 7\r\n"), "{head}");
        assert!(head.ends_with("\r\nConnection: close\r\n\r\n"), "{head}");
        let pac_type = format!("\r\nContent-Type: {}\r\n", pac::CONTENT_TYPE);
        assert_eq!(head.contains(&pac_type), reply.body == Body::Pac, "{head}");
    }
}

#[test]
fn every_request_shares_one_rendered_pac() {
    let cell = OnceLock::new();
    let table = RoutingTable::empty();
    let listen: SocketAddr = "127.0.0.1:12000".parse().expect("addr");
    let first = shared_pac(&cell, &table, listen);
    let second = shared_pac(&cell, &table, listen);
    assert!(std::str::from_utf8(&first).is_ok_and(|s| s.contains("FindProxyForURL")));
    assert_eq!(first.as_ptr(), second.as_ptr(), "a second request must not copy the PAC");
}

/// Runs [`answer`] to `request` on one end of an in-memory pipe holding `capacity` bytes; the test
/// reads the other end as the client.
fn serve_pipe(
    request: &'static [u8],
    capacity: usize,
    write_deadline: Duration,
    body: Bytes,
) -> (DuplexStream, tokio::task::JoinHandle<io::Result<()>>) {
    let (client, mut server) = tokio::io::duplex(capacity);
    let task =
        tokio::spawn(
            async move { answer(&mut server, reply_to(request), write_deadline, move || body).await },
        );
    (client, task)
}

async fn exchange(request: &'static [u8]) -> String {
    let (mut client, task) =
        serve_pipe(request, 64 * 1024, Duration::from_secs(5), Bytes::from_static(b"PAC!"));
    let mut reply = Vec::new();
    client.read_to_end(&mut reply).await.expect("read reply");
    task.await.expect("join").expect("answer");
    String::from_utf8(reply).expect("utf-8")
}

#[tokio::test]
async fn answers_are_written_whole_and_head_has_no_body() {
    let get = exchange(b"GET /proxy.pac HTTP/1.0\nHost: localhost\n\n").await;
    assert!(get.starts_with("HTTP/1.1 200 OK\r\n"), "{get}");
    assert!(get.contains("\r\nContent-Length: 4\r\n") && get.ends_with("\r\n\r\nPAC!"), "{get}");
    let head = exchange(b"HEAD /proxy.pac HTTP/1.1\r\nHost: localhost\r\n\r\n").await;
    assert!(head.contains("\r\nContent-Length: 4\r\n") && head.ends_with("\r\n\r\n"), "{head}");
    let refused = exchange(b"GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\nHost: evil\r\n\r\n").await;
    assert!(refused.starts_with("HTTP/1.1 400 Bad Request\r\n") && !refused.contains("PAC!"), "{refused}");
}

#[tokio::test]
async fn the_pac_is_taken_only_for_a_pac_answer() {
    let taken = Cell::new(false);
    let (_client, mut server) = tokio::io::duplex(64 * 1024);
    let pac = || {
        taken.set(true);
        Bytes::new()
    };
    let request = b"GET /proxy.pac HTTP/1.1\r\nHost: evil.example\r\n\r\n";
    answer(&mut server, reply_to(request), Duration::from_secs(5), pac).await.expect("answer");
    assert!(!taken.get(), "a refused request rendered or copied the PAC");
}

/// A connected pair on loopback: the client's end and the server's end.
async fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (client.expect("connect"), server.expect("accept").0)
}

/// Reads a head on the server's end, as the listener does, and answers it.
fn serve_tcp(mut server: TcpStream) -> tokio::task::JoinHandle<io::Result<Vec<u8>>> {
    tokio::spawn(async move {
        let mut head = Vec::new();
        let (Head::Answer(reply), _) = read_head(&mut server, &mut head, None).await? else {
            panic!("a CONNECT request")
        };
        answer(&mut server, reply, Duration::from_secs(5), Bytes::new).await?;
        Ok(head)
    })
}

#[tokio::test]
async fn the_head_reader_takes_the_head_and_not_a_byte_more() {
    let head = b"CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n";
    let payload = b"\x16\x03\x01\x02\x00 a ClientHello sent with the head";
    // In one write, and with the head's end split over two writes.
    for split in [head.len() + payload.len(), head.len() - 2, 1] {
        let (mut client, mut server) = tcp_pair().await;
        let sent = [&head[..], &payload[..]].concat();
        let (first, rest) = sent.split_at(split);
        let rest = rest.to_vec();
        client.write_all(first).await.expect("write");
        let writer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            client.write_all(&rest).await.expect("write rest");
            client
        });
        let mut got = Vec::new();
        let (_, past) = tokio::time::timeout(Duration::from_secs(10), read_head(&mut server, &mut got, None))
            .await
            .expect("head read in time")
            .expect("head");
        assert_eq!(got, head, "split at {split}");
        assert!(past.is_empty(), "split at {split}: read past the head");
        let _client = writer.await.expect("join");
        let mut left = vec![0u8; payload.len()];
        server.read_exact(&mut left).await.expect("payload still in the socket");
        assert_eq!(left, payload, "split at {split}");
    }
}

/// The first read of a connection (which tells SOCKS from HTTP) may have taken more than the
/// head: what it took past the head comes back, and nothing more is read from the socket.
#[tokio::test]
async fn bytes_read_before_the_head_reader_are_judged_first_and_the_rest_comes_back() {
    let head = b"CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n";
    let payload = b"\x16\x03\x01 hello";
    let half = head.len() / 2;
    // (already read, still in the socket, expected back past the head)
    let cases: [(Vec<u8>, Vec<u8>, &[u8]); 2] = [
        ([&head[..], &payload[..5]].concat(), payload[5..].to_vec(), &payload[..5]),
        (head[..half].to_vec(), [&head[half..], &payload[..]].concat(), b""),
    ];
    for (read, in_socket, expected_past) in cases {
        let (mut client, mut server) = tcp_pair().await;
        client.write_all(&in_socket).await.expect("write");
        let mut got = read.clone();
        let (judged, past) =
            tokio::time::timeout(Duration::from_secs(10), read_head(&mut server, &mut got, None))
                .await
                .expect("head read in time")
                .expect("head");
        assert!(matches!(judged, Head::Connect(Ok(_))), "{read:?}");
        assert_eq!((&got[..], &past[..]), (&head[..], expected_past), "{read:?}");
        let mut left = vec![0u8; payload.len() - past.len()];
        server.read_exact(&mut left).await.expect("the rest still in the socket");
        assert_eq!(left, &payload[past.len()..], "{read:?}");
    }
}

#[tokio::test]
async fn a_request_cut_short_or_too_long_still_gets_an_answer() {
    let (mut client, server) = tcp_pair().await;
    let task = serve_tcp(server);
    client.write_all(b"GET /proxy.pac HTTP/1.1\r\nHost: loc").await.expect("write");
    client.shutdown().await.expect("shutdown");
    let mut reply = Vec::new();
    client.read_to_end(&mut reply).await.expect("read");
    assert!(reply.starts_with(b"HTTP/1.1 400 "), "{}", String::from_utf8_lossy(&reply));
    task.await.expect("join").expect("answer");

    // The client keeps sending past the limit, then reads: the answer must reach it.
    let (mut client, server) = tcp_pair().await;
    let task = serve_tcp(server);
    let mut long = b"GET /proxy.pac HTTP/1.1\r\nX-Pad: ".to_vec();
    long.resize(MAX_REQUEST + 4096, b'a');
    client.write_all(&long).await.expect("write");
    let mut reply = Vec::new();
    client.read_to_end(&mut reply).await.expect("read");
    assert!(reply.starts_with(b"HTTP/1.1 431 "), "{}", String::from_utf8_lossy(&reply));
    drop(client);
    let head = task.await.expect("join").expect("answer");
    assert!(head.len() <= MAX_REQUEST, "read {} bytes of head", head.len());
}

#[tokio::test]
async fn a_client_that_does_not_read_is_dropped_at_the_write_deadline() {
    // The pipe holds 4 KiB of a 1 MiB answer; the client asks and never reads.
    let request = b"GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let (mut client, task) =
        serve_pipe(request, 4096, Duration::from_millis(200), Bytes::from(vec![b'x'; 1 << 20]));
    let result =
        tokio::time::timeout(Duration::from_secs(10), task).await.expect("answer ended").expect("join");
    let err = result.expect_err("must time out");
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    let mut got = Vec::new();
    client.read_to_end(&mut got).await.expect("read");
    assert!(got.len() < 1 << 20, "the client got the whole answer ({} bytes)", got.len());
}
