//! The daemon as a library: started in this test's own process through the same three steps
//! `kharond` takes (`start.rs`: load, bind, serve), with no binary spawned, then one SOCKS5
//! connection served through it to an echo server on loopback, and a clean stop.

use std::time::Duration;

use kharon_config::{Config, Overrides};
use kharond::start::{Listeners, Loaded, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bounds the whole test: it never waits on anything but loopback.
const LIMIT: Duration = Duration::from_secs(20);

/// Echoes what one client sends until it closes its side.
async fn echo_once(listener: TcpListener) {
    let Ok((mut stream, _)) = listener.accept().await else { return };
    let mut buf = [0u8; 1024];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 || stream.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_socks_connection_is_served_by_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let overrides = Overrides {
        config: Some(file("config.toml", "")),
        listen: Some("127.0.0.1:0".into()),
        inventory: Some(file(
            "inventory.json",
            r#"[{"id": "c-a", "facts": {"jumphost": "jump-a", "jumphostDomains": "a.example"}}]"#,
        )),
        ssh_config: Some(file("ssh_config", "Host jump-a\n  HostName 127.0.0.1\n")),
        control_socket: Some(dir.path().join("run/kharond.sock")),
        ..Overrides::default()
    };
    let config = Config::load(&overrides).unwrap();
    let loaded = Loaded::load(&config).unwrap();
    let listeners = Listeners::bind(&config).await.unwrap();
    let socks = listeners.socks_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(async move {
        serve(&config, loaded, listeners, async {
            let _ = stopped.await;
        })
        .await
    });

    let target = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target_addr = target.local_addr().unwrap();
    let echo = tokio::spawn(echo_once(target));

    let exchanged = tokio::time::timeout(LIMIT, async {
        let mut client = TcpStream::connect(socks).await.unwrap();
        // RFC 1928: no authentication, then CONNECT to an IPv4 address.
        client.write_all(&[5, 1, 0]).await.unwrap();
        let mut choice = [0u8; 2];
        client.read_exact(&mut choice).await.unwrap();
        assert_eq!(choice, [5, 0], "no authentication chosen");
        let std::net::IpAddr::V4(ip) = target_addr.ip() else { unreachable!("bound to 127.0.0.1") };
        let mut request = vec![5, 1, 0, 1];
        request.extend_from_slice(&ip.octets());
        request.extend_from_slice(&target_addr.port().to_be_bytes());
        client.write_all(&request).await.unwrap();
        let mut reply = [0u8; 10];
        client.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply[..4], &[5, 0, 0, 1], "succeeded, with an IPv4 bound address");
        client.write_all(b"through the library").await.unwrap();
        let mut echoed = [0u8; 19];
        client.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"through the library");
        client.shutdown().await.unwrap();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "the target's end arrives as EOF, nothing more");
    })
    .await;
    assert!(exchanged.is_ok(), "the exchange finished within {LIMIT:?}");
    echo.await.unwrap();

    stop.send(()).unwrap();
    let result = tokio::time::timeout(LIMIT, daemon).await.expect("the daemon stops").unwrap();
    assert!(result.is_ok(), "a clean stop: {:?}", result.err());
    assert!(!dir.path().join("run/kharond.sock").exists(), "the control socket is removed at the end");
}
