//! The PAC file on the SOCKS port, as browsers and hostile clients meet it: headless Chromium
//! routes by it, a foreign web page cannot read it, odd HTTP gets an answer, and clients that ask
//! for a large PAC and never read cost kharond neither memory nor descriptors for long.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::HttpServer;
use kharon_e2e::{Env, chromium, inventory, kharonctl, socks, wait_until};
use serde_json::{Value, json};

use crate::jumphost::{Lab, LabOptions, TARGET};

fn start(env: &Env, clusters: &[Value]) -> Kharond {
    let inv = env.write("inventory.json", &inventory::to_json(clusters));
    Kharond::start(env, &["--inventory", inv.to_str().unwrap()])
}

/// Sends `request` as it is and returns the whole answer.
fn exchange(daemon: &Kharond, request: &[u8]) -> String {
    let mut s = socks::connect(daemon.socks_addr());
    s.write_all(request).unwrap();
    String::from_utf8_lossy(&socks::read_all(&mut s)).into_owned()
}

/// Head and body of a complete `GET /proxy.pac`, checked against its Content-Length.
fn fetch_pac(daemon: &Kharond) -> (String, Vec<u8>) {
    let mut s = socks::connect(daemon.socks_addr());
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("read the PAC to its end");
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").expect("end of head") + 4;
    let head = String::from_utf8_lossy(&all[..split]).into_owned();
    let body = all.split_off(split);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains(&format!("\r\nContent-Length: {}\r\n", body.len())),
        "{} bytes, {head}",
        body.len()
    );
    (head, body)
}

#[test]
fn bare_lf_duplicate_host_oversized_and_page_requests_get_clear_answers() {
    let env = Env::new();
    let daemon = start(&env, &[inventory::routed("c-a", "jump-a", "a.example")]);
    let server = HttpServer::start("ok");

    // `printf 'GET /proxy.pac HTTP/1.0\nHost: localhost\n\n'`: bare LF line ends (RFC 9112 §2.2).
    let reply = exchange(&daemon, b"GET /proxy.pac HTTP/1.0\nHost: localhost\n\n");
    assert!(
        reply.starts_with("HTTP/1.1 200 OK\r\n") && reply.contains("function FindProxyForURL"),
        "{reply}"
    );
    assert!(reply.contains("\r\nContent-Type: application/x-ns-proxy-autoconfig\r\n"), "{reply}");
    assert!(reply.contains("\r\nX-Content-Type-Options: nosniff\r\n"), "{reply}");

    // A second Host could smuggle a rebinding page's name past the check.
    for hosts in ["Host: localhost\r\nHost: evil.example", "Host: evil.example\r\nHost: localhost"] {
        let reply = exchange(&daemon, format!("GET /proxy.pac HTTP/1.1\r\n{hosts}\r\n\r\n").as_bytes());
        assert!(reply.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{hosts:?}: {reply}");
        assert!(!reply.contains("FindProxyForURL") && reply.contains("exactly one Host header"), "{reply}");
    }

    // Over 16 KiB of head: 431, not silence, even though the client keeps sending.
    let mut long = b"GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\nX-Pad: ".to_vec();
    long.resize(40 * 1024, b'a');
    let reply = exchange(&daemon, &long);
    assert!(reply.starts_with("HTTP/1.1 431 "), "{reply}");

    // What Chromium sends for a page's <script src>, and for another localhost port's page.
    for page in [
        "Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\nSec-Fetch-Dest: script",
        "Sec-Fetch-Site: same-site\r\nSec-Fetch-Mode: no-cors\r\nSec-Fetch-Dest: script",
    ] {
        let reply = exchange(
            &daemon,
            format!("GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\n{page}\r\n\r\n").as_bytes(),
        );
        assert!(reply.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{page:?}: {reply}");
        assert!(!reply.contains("a.example") && reply.contains("not for web pages"), "{reply}");
    }

    // The daemon still serves both protocols.
    assert!(fetch_pac(&daemon).1.starts_with(b"// kharon"));
    let (code, mut s) = socks::connect_by_name(daemon.socks_addr(), "localhost", server.port());
    assert_eq!(code, 0, "{}", daemon.log());
    s.write_all(b"GET /hello HTTP/1.0\r\nConnection: close\r\n\r\n").unwrap();
    assert!(String::from_utf8_lossy(&socks::read_all(&mut s)).ends_with("hello from ok"));
}

/// Clusters with many long `jumphostDomains`: a PAC of several MB, like a large inventory's.
fn large_inventory(clusters: usize, domains_each: usize) -> Vec<Value> {
    let pad = "x".repeat(40);
    (0..clusters)
        .map(|c| {
            let base = format!("c{c:04}.example");
            let domains: Vec<String> = (0..domains_each).map(|d| format!("d{d:04}-{pad}.{base}")).collect();
            let mut cluster = inventory::routed(&format!("c-{c:04}"), "jump", &base);
            cluster["facts"]["jumphostDomains"] = json!(domains.join(","));
            cluster
        })
        .collect()
}

/// A receive buffer the kernel may not grow: Linux grows a client's buffer even while it does
/// not read, up to `net.ipv4.tcp_rmem`'s maximum (`tcp_clamp_window`, net/ipv4/tcp_input.c),
/// and with the 32 MB some machines allow, a client that never reads took the whole PAC in a
/// loaded run. A buffer set by the owner is left alone (SOCK_RCVBUF_LOCK).
fn fix_receive_buffer(s: &TcpStream) {
    socket2::SockRef::from(s).set_recv_buffer_size(64 * 1024).expect("SO_RCVBUF");
}

/// Bytes waiting in a socket's receive queue.
fn queued(s: &TcpStream) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, on a socket we own.
    let rc = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(s), libc::FIONREAD, &mut n) };
    if rc == 0 { n.max(0) as usize } else { 0 }
}

/// 100 clients ask for a 6 MB PAC and never read: they used to hold a copy each (+600 MB).
#[test]
fn clients_that_never_read_hold_no_copy_of_a_large_pac_and_are_dropped() {
    const CLIENTS: usize = 100;
    let env = Env::new();
    let daemon = start(&env, &large_inventory(300, 300));
    let (_, pac) = fetch_pac(&daemon);
    let pac_len = pac.len();
    assert!(pac_len > 4_000_000, "the PAC is only {pac_len} bytes; the test needs several MB");
    let fds_before = daemon.open_fds();
    let rss_before = daemon.rss_kib();

    let stuck: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| {
            let mut s = TcpStream::connect(daemon.socks_addr()).unwrap();
            fix_receive_buffer(&s);
            s.write_all(b"GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
            s
        })
        .collect();
    // kharond is writing to every one of them (so it took the PAC for each) ...
    assert!(
        wait_until(Duration::from_secs(30), || stuck.iter().all(|s| queued(s) > 0)),
        "kharond did not start answering all {CLIENTS} clients\n{}",
        daemon.log()
    );
    // ... and a good client still gets the whole PAC meanwhile.
    assert_eq!(fetch_pac(&daemon).1, pac);
    let grown_kib = daemon.rss_kib().saturating_sub(rss_before);
    eprintln!(
        "PAC {pac_len} bytes; RSS grew by {grown_kib} KiB with {CLIENTS} non-reading clients \
         ({:.2} x the PAC size)",
        (grown_kib * 1024) as f64 / pac_len as f64
    );
    assert!(
        (grown_kib as usize) * 1024 < 10 * pac_len,
        "RSS grew by {grown_kib} KiB for {CLIENTS} clients of a {pac_len}-byte PAC"
    );

    // After the write deadline (10 s) kharond has dropped them all ...
    let started = Instant::now();
    assert!(
        wait_until(Duration::from_secs(40), || daemon.open_fds() <= fds_before),
        "kharond still holds {} descriptors, {fds_before} before the clients",
        daemon.open_fds()
    );
    eprintln!("non-reading clients dropped after {:.1} s", started.elapsed().as_secs_f64());
    // ... so a client that reads now gets less than the answer, then EOF or a reset.
    for mut s in stuck {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = 0;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("after {got} bytes: {e} (the connection should have ended)"),
            }
        }
        assert!(got < pac_len, "a client that never read still got {got} of {pac_len} bytes");
    }
    assert_eq!(fetch_pac(&daemon).1, pac);
}

/// Headless Chromium with `--proxy-pac-url`: a cluster host (resolvable only at the jump host)
/// loads through kharond, and a name the PAC leaves alone loads directly.
#[test]
fn chromium_routes_by_the_pac() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    let direct = HttpServer::start("direct");
    let pac_url = format!("--proxy-pac-url=http://localhost:{}/proxy.pac", lab.daemon().socks_addr().port());
    // `direct.test` resolves to 127.0.0.1 in this browser only; a proxied request for it would
    // fail, since kharond cannot resolve it. A name, not 127.0.0.1: Chromium never proxies loopback.
    let flags = [pac_url.as_str(), "--host-resolver-rules=MAP direct.test 127.0.0.1"];

    let dom = chromium::dump_dom(&lab.env, &format!("http://{TARGET}:{}/hello", lab.target.port()), &flags);
    assert!(dom.contains("hello from target"), "{dom}\n---- kharond log ----\n{}", lab.daemon().log());
    assert!(lab.chain_status()["bytes_down"].as_u64().unwrap_or(0) > 0, "{}", lab.chain_status());

    let total = || {
        let c = kharonctl::run(&lab.env, &["status", "-o", "json"]).json()["connections"].clone();
        (c["total_direct"].as_u64(), c["total_jumphost"].as_u64())
    };
    let before = total();
    assert!(before.0.is_some() && before.1 >= Some(1), "status counts no routed connection: {before:?}");
    let dom = chromium::dump_dom(&lab.env, &format!("http://direct.test:{}/hello", direct.port()), &flags);
    assert!(dom.contains("hello from direct"), "{dom}");
    assert_eq!(total(), before, "the DIRECT page went through kharond");
}

/// A page from another origin includes the PAC as a script and looks for what it defines.
fn spy_page(kharond_port: u16) -> String {
    format!(
        r#"<!doctype html><html><body>
<script src="http://localhost:{kharond_port}/proxy.pac"></script>
<p id="seen"></p>
<script>
document.getElementById("seen").textContent =
  "FindProxyForURL=" + typeof FindProxyForURL + " RULES=" + typeof RULES;
</script>
</body></html>"#
    )
}

/// A foreign page's `<script src=…/proxy.pac>` read the routing table.
#[test]
fn a_foreign_page_cannot_read_the_pac() {
    let env = Env::new();
    let daemon = start(&env, &[inventory::routed("c-a", "jump-a", "secret.example")]);
    let html = spy_page(daemon.socks_addr().port());
    // Another site (127.0.0.2), and another port on localhost (same site, different origin).
    let other_site = HttpServer::with_page("spy", "127.0.0.2:0", &html);
    let other_port = HttpServer::with_page("spy", "127.0.0.1:0", &html);
    for url in [
        format!("http://127.0.0.2:{}/page", other_site.port()),
        format!("http://localhost:{}/page", other_port.port()),
    ] {
        let dom = chromium::dump_dom(&env, &url, &[]);
        // The page's own script ran, and found nothing of the PAC.
        assert!(dom.contains("FindProxyForURL=undefined RULES=undefined"), "{url}:\n{dom}");
    }
    assert!(fetch_pac(&daemon).1.windows(14).any(|w| w == b"secret.example"), "the PAC itself is intact");
}
