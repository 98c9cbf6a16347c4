//! Key re-exchanges under load (docs/ssh-engine.md, "Key re-exchange"): one session through two
//! real sshds carries twelve channels at once, six downloads and six uploads, each checked byte
//! for byte, across re-exchanges started by kharond (its ssh_config's `RekeyLimit`, by size and
//! by time) and by the last hop's sshd (its own `RekeyLimit`). `ssh -D` on the same path, with the
//! same ssh_config, is the oracle: the same load passes through it.
//!
//! Who started each re-exchange is read from the last hop's sshd log (LogLevel DEBUG1, kex.c):
//! `SSH2_MSG_KEXINIT sent` before `SSH2_MSG_KEXINIT received` is the sshd's own, the other order
//! the client's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kharon_e2e::servers::pattern;
use kharon_e2e::{free_port, kharonctl, socks, wait_until};

use super::jumphost::{Lab, LabOptions, TARGET};

/// Channels each way: twelve in all through one session.
const EACH_WAY: usize = 6;

/// Re-exchanges in the part of an sshd log after `from`: (started by the sshd, by the client).
fn rekeys(log: &str, from: usize) -> (usize, usize) {
    let mut order = log[from.min(log.len())..]
        .lines()
        .filter(|line| !line.contains("[preauth]"))
        .filter_map(|line| {
            if line.contains("SSH2_MSG_KEXINIT sent") {
                Some(true)
            } else if line.contains("SSH2_MSG_KEXINIT received") {
                Some(false)
            } else {
                None
            }
        })
        .peekable();
    let (mut by_server, mut by_client) = (0, 0);
    while let Some(first) = order.next() {
        // A pair: whichever came first started it.
        if order.next().is_some() {
            if first {
                by_server += 1;
            } else {
                by_client += 1;
            }
        }
    }
    (by_server, by_client)
}

/// What one channel does: download or upload `len` bytes of the pattern; `paced` spreads it out
/// (the server's 64 KiB chunks 30 ms apart, the upload's writes too).
#[derive(Clone, Copy)]
struct Load {
    len: u64,
    paced: bool,
}

/// A SOCKS CONNECT to the target by name through `proxy`, with a bound on every read.
fn connect(proxy: SocketAddr, port: u16) -> TcpStream {
    let (code, s) = socks::connect_by_name(proxy, TARGET, port);
    assert_eq!(code, 0, "SOCKS reply through {proxy}");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

/// Reads a response head; returns its status line.
fn head(reader: &mut BufReader<TcpStream>) -> String {
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            return status;
        }
    }
}

fn download(proxy: SocketAddr, port: u16, load: Load) -> Result<(), String> {
    let mut s = connect(proxy, port);
    let path = if load.paced { format!("/paced/{}/30", load.len) } else { format!("/bytes/{}", load.len) };
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reader = BufReader::new(s);
    head(&mut reader);
    let period = pattern((1 << 20) + 251);
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    while got < load.len {
        let n = reader
            .read(&mut buf[..((load.len - got).min(1 << 20)) as usize])
            .map_err(|e| format!("download: {e} after {got} of {} bytes", load.len))?;
        if n == 0 {
            return Err(format!("download ended after {got} of {} bytes", load.len));
        }
        let off = (got % 251) as usize;
        if buf[..n] != period[off..off + n] {
            return Err(format!("download differs near byte {got}"));
        }
        got += n as u64;
    }
    Ok(())
}

fn upload(proxy: SocketAddr, port: u16, load: Load) -> Result<(), String> {
    let mut s = connect(proxy, port);
    let request = format!(
        "POST /sink/{0} HTTP/1.1\r\nHost: x\r\nContent-Length: {0}\r\nConnection: close\r\n\r\n",
        load.len
    );
    s.write_all(request.as_bytes()).unwrap();
    let chunk = 64 * 1024;
    let period = pattern(chunk + 251);
    let mut sent = 0u64;
    while sent < load.len {
        let len = (load.len - sent).min(chunk as u64) as usize;
        let off = (sent % 251) as usize;
        s.write_all(&period[off..off + len]).map_err(|e| format!("upload: {e} after {sent} bytes"))?;
        sent += len as u64;
        if load.paced {
            std::thread::sleep(Duration::from_millis(30));
        }
    }
    let mut reader = BufReader::new(s);
    let status = head(&mut reader);
    let mut body = String::new();
    let _ = reader.take(200).read_to_string(&mut body);
    if status.contains(" 200 ") && body == format!("received {}", load.len) {
        Ok(())
    } else {
        Err(format!("upload answered {status:?}: {body:?}"))
    }
}

/// Six downloads and six uploads of `load` through `proxy` at once; every failure, named.
fn twelve_at_once(proxy: SocketAddr, port: u16, load: Load) -> Vec<String> {
    let threads: Vec<_> = (0..EACH_WAY)
        .flat_map(|_| {
            [
                std::thread::spawn(move || download(proxy, port, load)),
                std::thread::spawn(move || upload(proxy, port, load)),
            ]
        })
        .collect();
    threads
        .into_iter()
        .enumerate()
        .filter_map(|(i, t)| match t.join() {
            Ok(Ok(())) => None,
            Ok(Err(why)) => Some(format!("channel {i}: {why}")),
            Err(_) => Some(format!("channel {i}: its thread panicked")),
        })
        .collect()
}

/// `ssh -N -D` with the lab's ssh_config and agent, to the last hop; killed on drop.
struct SshD {
    child: Child,
    addr: SocketAddr,
}

impl SshD {
    fn start(lab: &Lab) -> SshD {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Command::new("ssh")
            .arg("-F")
            .arg(&lab.ssh_config)
            .args(["-N", "-o", "ExitOnForwardFailure=yes", "-D", &addr.to_string(), &lab.jumphost()])
            .env("SSH_AUTH_SOCK", lab.agent.socket())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run ssh -D");
        assert!(
            wait_until(Duration::from_secs(10), || TcpStream::connect(addr).is_ok()),
            "ssh -D never listened"
        );
        SshD { child, addr }
    }
}

impl Drop for SshD {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Rewrites the lab's ssh_config with `RekeyLimit` lines in every Host block, and reloads kharond:
/// the chain changed, so the next connection gets a session dialled with them.
fn rekey_limit(lab: &Lab, line: Option<&str>) {
    let opts = LabOptions {
        hops: lab.hops.len(),
        host_options: line.map(str::to_owned).into_iter().collect(),
        ..Default::default()
    };
    lab.write_ssh_config(&opts);
    let out = kharonctl::run(&lab.env, &["reload"]);
    assert!(out.success(), "reload: {}", out.stderr);
}

#[test]
fn twelve_busy_channels_keep_their_session_through_re_keys_started_by_either_side() {
    // The last hop's sshd re-keys after 16 MiB; kharond, in the first part, after 4 MiB.
    let sshd = ["LogLevel DEBUG1".to_owned(), "RekeyLimit 16M".to_owned()];
    let mut lab = Lab::new(LabOptions {
        hops: 2,
        sshd_options: sshd.to_vec(),
        host_options: vec!["RekeyLimit 4M".into()],
        ..Default::default()
    });
    lab.start_daemon();
    let proxy = lab.daemon().socks_addr();
    let port = lab.target.port();
    let last = lab.hops.len() - 1;
    let bulk = Load { len: 6 << 20, paced: false };

    // Started by kharond, by size: 36 MiB each way re-keys about nine times.
    let from = lab.hops[last].log().len();
    let failed = twelve_at_once(proxy, port, bulk);
    assert!(failed.is_empty(), "{failed:#?}\n---- kharond log ----\n{}", lab.daemon().log());
    let (by_server, by_client) = rekeys(&lab.hops[last].log(), from);
    assert!(by_client >= 3, "kharond started {by_client} re-exchanges (the sshd {by_server})");

    // The oracle: `ssh -D` with the same ssh_config carries the same load.
    let ssh_d = SshD::start(&lab);
    let failed = twelve_at_once(ssh_d.addr, port, bulk);
    assert!(failed.is_empty(), "ssh -D: {failed:#?}");
    drop(ssh_d);

    // Started by kharond, by time: a re-exchange every second while paced transfers run ~3.5 s.
    rekey_limit(&lab, Some("RekeyLimit default 1"));
    let from = lab.hops[last].log().len();
    let failed = twelve_at_once(proxy, port, Load { len: 7 << 20, paced: true });
    assert!(failed.is_empty(), "{failed:#?}\n---- kharond log ----\n{}", lab.daemon().log());
    let (_, by_client) = rekeys(&lab.hops[last].log(), from);
    assert!(by_client >= 3, "kharond started {by_client} re-exchanges by time");

    // Started by the sshd: kharond's own limit back at its default (1 GiB), 48 MiB each way.
    rekey_limit(&lab, None);
    let from = lab.hops[last].log().len();
    let failed = twelve_at_once(proxy, port, Load { len: 8 << 20, paced: false });
    assert!(failed.is_empty(), "{failed:#?}\n---- kharond log ----\n{}", lab.daemon().log());
    let (by_server, by_client) = rekeys(&lab.hops[last].log(), from);
    assert!(by_server >= 3, "the sshd started {by_server} re-exchanges (kharond {by_client})");

    // No session was lost on the way: the chain never failed, and nothing is left open.
    let chain = lab.chain_status();
    assert_eq!(chain["last_error"], "", "{chain}");
    assert!(
        wait_until(Duration::from_secs(10), || lab.chain_status()["open_channels"] == 0),
        "{}",
        lab.chain_status()
    );
}

#[test]
fn who_started_a_re_exchange_is_read_from_the_order_of_the_sshd_s_kexinit_lines() {
    let log = "debug1: SSH2_MSG_KEXINIT sent [preauth]\ndebug1: SSH2_MSG_KEXINIT received [preauth]\n\
               debug1: SSH2_MSG_KEXINIT received\ndebug1: SSH2_MSG_KEXINIT sent\n\
               debug1: SSH2_MSG_KEXINIT sent\ndebug1: SSH2_MSG_KEXINIT received\n\
               debug1: SSH2_MSG_KEXINIT received\ndebug1: SSH2_MSG_KEXINIT sent\n";
    assert_eq!(rekeys(log, 0), (1, 2), "the handshake's own exchange does not count");
    let later = log.find("debug1: SSH2_MSG_KEXINIT sent\ndebug1: SSH2_MSG_KEXINIT received\ndebug1: SSH2_MSG_KEXINIT received").unwrap();
    assert_eq!(rekeys(log, later), (1, 1), "only what follows the offset");
}
