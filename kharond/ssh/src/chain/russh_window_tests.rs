//! The vendored russh's second change (vendor/README.md): a client channel is re-opened to the
//! window its handler's `adjust_window` answered last, and a new channel opens with it. kharond's
//! windows that follow the path (meter.rs, "How a window changes") rest on it: the last hop's
//! [`Handler`](super::Handler) answers the path's window.
//!
//! A russh server on loopback sends each direct-tcpip channel as many KiB as the channel's
//! requested port says, and records every window the client grants it
//! (`server::Handler::window_adjusted`: what it may send after each CHANNEL_WINDOW_ADJUST).
//! russh 0.65.1 as published re-opens every channel to `client::Config::window_size` whatever the
//! handler answers (russh issue #770): each of the assertions below fails there.
//!
//! Here among kharon-ssh's unit tests, not as an integration test of its own: that would be one
//! more test binary to link in CI, for one test that needs only russh.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::keys::{Algorithm, PrivateKey, PublicKeyOrCertificate};
use russh::server::{self, Auth, Msg, Session};
use russh::{Channel, ChannelId, ChannelMsg, client};
use tokio::net::{TcpListener, TcpStream};

/// The client's configured window, OpenSSH's.
const CONFIGURED: u32 = 2 * 1024 * 1024;
const KIB: u32 = 1024;
/// Bounds every wait of this test.
const LIMIT: Duration = Duration::from_secs(20);

/// The windows granted to the server, per channel, in order.
type Grants = Arc<Mutex<Vec<(ChannelId, u32)>>>;

#[derive(Clone)]
struct Sender {
    grants: Grants,
}

impl server::Handler for Sender {
    type Error = russh::Error;

    async fn auth_none(&mut self, _user: &str) -> Result<Auth, Self::Error> {
        Ok(Auth::Accept)
    }

    async fn channel_open_direct_tcpip(
        &mut self,
        channel: Channel<Msg>,
        _host: &str,
        kib: u32,
        _originator_address: &str,
        _originator_port: u32,
        reply: server::ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        tokio::spawn(async move {
            reply.accept().await;
            let bytes = vec![0u8; (kib * KIB) as usize];
            // Waits for the client's window as it goes.
            let _ = channel.data(&bytes[..]).await;
            let _ = channel.eof().await;
        });
        Ok(())
    }

    async fn window_adjusted(
        &mut self,
        channel: ChannelId,
        new_size: u32,
        _: &mut Session,
    ) -> Result<(), Self::Error> {
        if let Ok(mut grants) = self.grants.lock() {
            grants.push((channel, new_size));
        }
        Ok(())
    }
}

/// A client whose handler answers `wanted` (0: the window it is given, russh's default).
struct Receiver {
    wanted: Arc<AtomicU32>,
}

impl client::Handler for Receiver {
    type Error = russh::Error;

    async fn check_server_key(&mut self, _key: &PublicKeyOrCertificate) -> Result<bool, Self::Error> {
        Ok(true)
    }

    fn adjust_window(&mut self, _channel: ChannelId, window: u32) -> u32 {
        match self.wanted.load(Ordering::Relaxed) {
            0 => window,
            wanted => wanted,
        }
    }
}

/// Opens a channel whose server sends `kib` KiB, reads all of it, and returns the windows the
/// server was granted on it.
async fn carry(session: &client::Handle<Receiver>, grants: &Grants, kib: u32) -> Vec<u32> {
    let mut channel =
        tokio::time::timeout(LIMIT, session.channel_open_direct_tcpip("sender", kib, "127.0.0.1", 1))
            .await
            .expect("the channel opens in time")
            .expect("the server takes the channel");
    let id = channel.id();
    let mut received = 0usize;
    while received < (kib * KIB) as usize {
        match tokio::time::timeout(LIMIT, channel.wait()).await.expect("data arrives in time") {
            Some(ChannelMsg::Data { data }) => received += data.len(),
            Some(_) => {}
            None => break,
        }
    }
    assert_eq!(received, (kib * KIB) as usize, "the whole transfer arrived");
    // The last adjust may still be on its way to the server.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let grants = grants.lock().expect("no test thread panicked holding it");
    grants.iter().filter(|(channel, _)| *channel == id).map(|&(_, window)| window).collect()
}

#[tokio::test]
async fn a_client_channel_is_re_opened_to_the_window_its_handler_asks_for() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let address = listener.local_addr().expect("its address");
    let grants: Grants = Arc::default();
    let key = PrivateKey::random(&mut russh::keys::key::safe_rng(), Algorithm::Ed25519).expect("a host key");
    let config = Arc::new(server::Config { keys: vec![key], ..Default::default() });
    let sender = Sender { grants: grants.clone() };
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.expect("the client connects");
        if let Ok(running) = server::run_stream(config, tcp, sender).await {
            let _ = running.await;
        }
    });

    let wanted = Arc::new(AtomicU32::new(0));
    let config = Arc::new(client::Config { window_size: CONFIGURED, ..Default::default() });
    let tcp = TcpStream::connect(address).await.expect("connect to the server");
    let mut session = client::connect_stream(config, tcp, Receiver { wanted: wanted.clone() })
        .await
        .expect("the handshake completes");
    let auth = session.authenticate_none("kharon").await.expect("the server answers");
    assert!(auth.success(), "the server lets anyone in");

    // The handler keeps the configured window: every grant is at most that, and some near it.
    let unchanged = carry(&session, &grants, 4096).await;
    assert!(!unchanged.is_empty(), "4 MiB crossed a 2 MiB window without an adjust");
    assert!(unchanged.iter().all(|&w| w <= CONFIGURED), "{unchanged:?}");
    assert!(unchanged.iter().any(|&w| w > CONFIGURED / 2), "{unchanged:?}");

    // It asks for a smaller one: the adjust that asks it still tops up to the old window, every
    // one after it to the new one.
    wanted.store(256 * KIB, Ordering::Relaxed);
    let smaller = carry(&session, &grants, 4096).await;
    assert!(smaller.len() > 2, "{smaller:?}");
    assert!(
        smaller[2..].iter().all(|&w| w <= 256 * KIB),
        "the channel kept its configured window: {smaller:?}"
    );

    // A channel opened now opens with 256 KiB: 200 KiB of it make the client re-open it. With
    // the configured 2 MiB, 1.8 MiB would be left, and no adjust would come.
    let opened = carry(&session, &grants, 200).await;
    assert!(
        !opened.is_empty() && opened.iter().all(|&w| w <= 256 * KIB),
        "a channel opened after the handler asked for 256 KiB did not open with it: {opened:?}"
    );

    // And a larger one than configured: the channel grows past it.
    wanted.store(4 * CONFIGURED, Ordering::Relaxed);
    let larger = carry(&session, &grants, 16384).await;
    assert!(
        larger.iter().any(|&w| w > CONFIGURED),
        "the channel never grew past its configured window: {larger:?}"
    );
}
