//! The vendored russh's patch (vendor/README.md), each change against a russh server on loopback
//! that sends each direct-tcpip channel as many KiB as the channel's requested port says, and
//! records every window the client grants it (`server::Handler::window_adjusted`: what it may
//! send after each CHANNEL_WINDOW_ADJUST). Each assertion below fails on the published russh.
//!
//! 1. When a window is re-opened is a setting (`client::Config::window_reopen`).
//! 2. A client channel is re-opened to the window its handler's `adjust_window` answered last,
//!    and a new channel opens with it (russh issue #770). kharond's windows that follow the path
//!    (meter.rs, "How a window changes") rest on it: the last hop's
//!    [`Handler`](super::Handler) answers the path's window.
//! 3. A key re-exchange the client starts while many channels with large live windows are busy
//!    does not end the session for what the server sent before it saw the client's KEXINIT.
//!
//! Here among kharon-ssh's unit tests, not as an integration test of its own: that would be one
//! more test binary to link in CI, for tests that need only russh.

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

/// A russh server on loopback whose channels send what their port says (see [`Sender`]), and a
/// client session to it with `config`, authenticated; `wanted` is its handler's window.
async fn session(config: client::Config, wanted: &Arc<AtomicU32>) -> (client::Handle<Receiver>, Grants) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let address = listener.local_addr().expect("its address");
    let grants: Grants = Arc::default();
    let key = PrivateKey::random(&mut russh::keys::key::safe_rng(), Algorithm::Ed25519).expect("a host key");
    let server_config = Arc::new(server::Config { keys: vec![key], ..Default::default() });
    let sender = Sender { grants: grants.clone() };
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.expect("the client connects");
        if let Ok(running) = server::run_stream(server_config, tcp, sender).await {
            let _ = running.await;
        }
    });
    let tcp = TcpStream::connect(address).await.expect("connect to the server");
    let mut session = client::connect_stream(Arc::new(config), tcp, Receiver { wanted: wanted.clone() })
        .await
        .expect("the handshake completes");
    let auth = session.authenticate_none("kharon").await.expect("the server answers");
    assert!(auth.success(), "the server lets anyone in");
    (session, grants)
}

#[tokio::test]
async fn a_client_channel_is_re_opened_to_the_window_its_handler_asks_for() {
    let wanted = Arc::new(AtomicU32::new(0));
    let config = client::Config { window_size: CONFIGURED, ..Default::default() };
    let (session, grants) = session(config, &wanted).await;

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

#[tokio::test]
async fn an_early_re_open_tops_the_window_up_every_eighth_where_russh_waits_for_half() {
    let wanted = Arc::new(AtomicU32::new(0));
    let config = client::Config { window_size: CONFIGURED, ..Default::default() };
    let (half, half_grants) = session(config, &wanted).await;
    // 4 MiB through a 2 MiB window: an adjust per MiB with half-window re-opening.
    let by_half = carry(&half, &half_grants, 4096).await;
    assert!(by_half.len() <= 5, "{} adjusts: {by_half:?}", by_half.len());

    let early = russh::WindowReopen::Early { at_least: 96 * KIB, divisor: 8 };
    let config = client::Config { window_size: CONFIGURED, window_reopen: early, ..Default::default() };
    let (eighths, eighth_grants) = session(config, &wanted).await;
    // An adjust per 256 KiB, an eighth of the window: what is in flight stays near all of it.
    let by_eighth = carry(&eighths, &eighth_grants, 4096).await;
    assert!(by_eighth.len() >= 12, "{} adjusts: {by_eighth:?}", by_eighth.len());
}

/// Ten channels, each re-opened to a live window 16 times the configured one, download at once
/// while the client re-keys after every MiB it reads. The server keeps sending until it sees the
/// client's KEXINIT, up to what the channels' windows allow: far more than twice the configured
/// window, the bound of the published russh, which ended the session with `Error::Pending`.
#[tokio::test]
async fn a_client_re_key_while_many_wide_channels_are_busy_keeps_the_session() {
    const CHANNELS: usize = 10;
    const EACH: u32 = 4096;
    let small = 256 * KIB;
    let wanted = Arc::new(AtomicU32::new(16 * small));
    let config = client::Config {
        window_size: small,
        limits: russh::Limits::new(1 << 30, 1 << 20, Duration::from_secs(3600)),
        ..Default::default()
    };
    let (session, _) = session(config, &wanted).await;
    // Each channel is read as soon as it is open: russh's session loop waits while a channel's
    // queue is full, and would not take the next channel's confirmation meanwhile.
    let mut reads = Vec::new();
    for _ in 0..CHANNELS {
        let mut channel =
            tokio::time::timeout(LIMIT, session.channel_open_direct_tcpip("sender", EACH, "127.0.0.1", 1))
                .await
                .expect("the channel opens in time")
                .expect("the server takes the channel");
        reads.push(tokio::spawn(async move {
            let mut received = 0usize;
            while let Ok(Some(msg)) = tokio::time::timeout(LIMIT, channel.wait()).await {
                if let ChannelMsg::Data { data } = msg {
                    received += data.len();
                }
                if received >= (EACH * KIB) as usize {
                    break;
                }
            }
            received
        }));
    }
    let received: Vec<usize> =
        futures::future::join_all(reads).await.into_iter().map(|r| r.expect("a reader panicked")).collect();
    assert!(
        received.iter().all(|&r| r == (EACH * KIB) as usize),
        "the session ended during a re-key: {received:?} bytes of {} per channel",
        EACH * KIB
    );
    assert!(!session.is_closed(), "the session ended");
}
