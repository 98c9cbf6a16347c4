//! OpenSSH as the oracle for *connecting*: every row of [`ROWS`] is one ssh_config
//! case, run through `ssh -F CONFIG -W TARGET:PORT jump` and through kharond on the same config,
//! the same known_hosts files and the same agent, against real sshd jump hosts. Both must
//! connect (and carry bytes through the tunnel), or both refuse: ssh for the reason the row names,
//! kharond with a message naming the cause. Where a row lets a client write known_hosts
//! (`accept-new`), kharond must leave the file exactly as ssh does.
//!
//! A new case is one row: a name, what both should do, and a function that writes the case
//! (which sshd, lines for the `Host jump` block, known_hosts, agent and keys). The sshd
//! instances, one per [`Server`] flavour, and the keys are made once and shared by every row that
//! names them; each row gets its own HOME, config, known_hosts and kharond.
//!
//! Besides OpenSSH's sshd, rows run against Debian's Dropbear and an OpenSSH-7-like server of our
//! own (`fixtures/legacy_sshd.py`: SHA-1 key exchange, `ssh-rsa` host keys, hmac-sha1), which
//! packaged servers no longer offer. A row can put its `Host` block or a crypto policy
//! into a system-wide config: then ssh runs without `-F` in a mount namespace whose `/etc/ssh`
//! and home directory are the row's, and kharond without `--ssh-config`, with its system file
//! pointed at the row's (`KHARON_SYSTEM_SSH_CONFIG`). A row can also check that no ProxyCommand
//! process outlives a reload and kharond's SIGTERM.
//!
//! `cargo test -p kharon-e2e --test e2e ssh_oracle_matrix -- --nocapture` prints the table.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use kharon_e2e::agent::Agent;
use kharon_e2e::dropbear::{self, Dropbear};
use kharon_e2e::echo::EchoServer;
use kharon_e2e::gpg_agent::GpgAgent;
use kharon_e2e::kharond::Kharond;
use kharon_e2e::legacy::{self, LegacySshd};
use kharon_e2e::sshd::{self, Sshd};
use kharon_e2e::{Env, inventory, kharonctl, socks};

/// The name only the jump hosts resolve (each sshd has its own /etc/hosts), as in `jumphost`.
const TARGET: &str = "api.c1.example";
/// What each client sends through the tunnel and must get back from the echo target.
const PAYLOAD: &[u8] = b"kharon oracle matrix: ping\n";
/// Rows run at once.
const WORKERS: usize = 4;
/// How long one client (ssh or a SOCKS connection) may take before it counts as failed.
const CLIENT_LIMIT: Duration = Duration::from_secs(30);

/// What a row expects of both clients.
#[derive(Clone, Copy, Debug)]
enum Expect {
    Connect,
    /// Both refuse: ssh's stderr contains `ssh`, kharond's answer (start-up error, or the chain's
    /// `status`: last error, refused channel) contains `kharond`.
    Refuse {
        ssh: &'static str,
        kharond: &'static str,
    },
}
use Expect::{Connect, Refuse};

struct Row {
    name: &'static str,
    expect: Expect,
    case: fn(&mut Case),
}

/// The sshd flavours rows share. Every one resolves [`TARGET`], authorizes the plain keys of
/// [`Key`] (not the certified or the "other" ones) and trusts the user CA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Server {
    /// Nothing special; `MaxSessions 2`, which limits sessions, not forwarded channels.
    Plain,
    Rsa512Only,
    Rsa256Only,
    MaxAuthTries3,
    NoForwarding,
    PermitOpenOther,
    PermitOpenTarget,
    /// `AllowUsers USER@127.0.0.2`: only a client bound to 127.0.0.2 gets in.
    Only127002,
    /// A host certificate for 127.0.0.1 from the host CA.
    HostCert,
    /// A host certificate for `other.example` only.
    HostCertOtherName,
    /// A host certificate for 127.0.0.1 that expired in 2020.
    HostCertExpired,
    /// An RSA host key besides the ed25519 one.
    RsaHostKeyToo,
    /// `Ciphers aes128-ctr`, `MACs hmac-sha1`: an old appliance's only MAC.
    Sha1MacCtr,
    /// `KexAlgorithms ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521` (FIPS-tuned).
    EcdhOnly,
    /// `Ciphers 3des-cbc` only.
    TripleDes,
    /// `KexAlgorithms diffie-hellman-group14-sha1` only.
    Group14Sha1,
    /// Only an RSA host key, signing as `ssh-rsa` (SHA-1) only (`HostKeyAlgorithms ssh-rsa`).
    RsaSha1HostKey,
    /// Debian's Dropbear (ed25519 host key).
    Dropbear,
    /// The OpenSSH-7-like server: diffie-hellman-group14-sha1 and -group-exchange-sha1,
    /// `ssh-rsa` host key signatures, aes128-cbc, hmac-sha1, `server-sig-algs` ssh-rsa.
    Legacy,
    /// The same speaking only diffie-hellman-group-exchange-sha1 and 3des-cbc.
    LegacyGex,
    /// Modern key exchange and host key, but RSA user signatures only as `ssh-rsa` (SHA-1).
    LegacySigning,
    /// Negotiates `rsa-sha2-512` for its RSA host key, then signs the exchange as `ssh-rsa`
    /// (SHA-1) anyway.
    LyingSigner,
}

/// A running jump host of one of the kinds the rows use.
enum Jump {
    Sshd(Sshd),
    Dropbear(Dropbear),
    Legacy(LegacySshd, String),
}

impl Jump {
    fn port(&self) -> u16 {
        match self {
            Jump::Sshd(s) => s.port(),
            Jump::Dropbear(d) => d.port(),
            Jump::Legacy(l, _) => l.port(),
        }
    }

    /// `[127.0.0.1]:PORT KEY` of its host key.
    fn host_key_line(&self) -> String {
        match self {
            Jump::Sshd(s) => s.host_key_line(),
            Jump::Dropbear(d) => d.host_key_line(),
            Jump::Legacy(l, key) => format!("[127.0.0.1]:{} {key}", l.port()),
        }
    }

    /// `ssh-ed25519 AAAA…` (sshd's own host key).
    fn host_key(&self) -> String {
        match self {
            Jump::Sshd(s) => s.host_key(),
            Jump::Dropbear(_) | Jump::Legacy(..) => {
                self.host_key_line().split_once(' ').map(|(_, k)| k.to_owned()).unwrap_or_default()
            }
        }
    }
}

/// The client keys; all but `Other*` and the certified ones are authorized everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Ed25519,
    Ecdsa256,
    Ecdsa384,
    Ecdsa521,
    Rsa,
    /// An unauthorized key with a user certificate for the user (`-cert.pub` beside it).
    UserCert,
    /// The same with a certificate for the principal `nobody`.
    UserCertNobody,
    Other(u8),
}

const OTHERS: [Key; 5] = [Key::Other(1), Key::Other(2), Key::Other(3), Key::Other(4), Key::Other(5)];

/// Keys, CAs, agents, the echo target and the sshd instances, made once for all rows.
struct World {
    dir: tempfile::TempDir,
    user: String,
    echo: EchoServer,
    gpg: GpgAgent,
    authorized: Vec<String>,
    servers: HashMap<Server, OnceLock<Jump>>,
}

impl World {
    fn new() -> World {
        assert!(
            sshd::hosts_supported(),
            "the matrix needs `unshare -m` (root) for the jump hosts' /etc/hosts"
        );
        let dir = tempfile::Builder::new().prefix("khmx").tempdir_in("/tmp").expect("world dir");
        let key = |name: &str, kind: &str, bits: Option<u32>| {
            sshd::keygen_of(&dir.path().join(name), kind, bits, "")
        };
        let mut authorized = vec![
            key("ed25519", "ed25519", None),
            key("ecdsa256", "ecdsa", Some(256)),
            key("ecdsa384", "ecdsa", Some(384)),
            key("ecdsa521", "ecdsa", Some(521)),
            // 2048 bits: generated in well under a second, and what sshd accepts.
            key("rsa", "rsa", Some(2048)),
        ];
        for i in 1..=5 {
            key(&format!("other{i}"), "ed25519", None);
        }
        for ca in ["user_ca", "host_ca", "other_ca"] {
            key(ca, "ed25519", None);
        }
        key("host_rsa", "rsa", Some(2048));
        key("legacy_rsa", "rsa", Some(2048));
        let user = sshd::current_user();
        key("user_cert", "ed25519", None);
        sshd::sign(&dir.path().join("user_ca"), &dir.path().join("user_cert"), false, Some(&user), None);
        key("user_cert_nobody", "ed25519", None);
        sshd::sign(
            &dir.path().join("user_ca"),
            &dir.path().join("user_cert_nobody"),
            false,
            Some("nobody"),
            None,
        );
        let gpg = GpgAgent::start();
        authorized.push(gpg.public_key().to_owned());
        let servers = ALL_SERVERS.iter().map(|s| (*s, OnceLock::new())).collect();
        World { dir, user, echo: EchoServer::start(), gpg, authorized, servers }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn key(&self, key: Key) -> PathBuf {
        self.path(&match key {
            Key::Ed25519 => "ed25519".to_owned(),
            Key::Ecdsa256 => "ecdsa256".to_owned(),
            Key::Ecdsa384 => "ecdsa384".to_owned(),
            Key::Ecdsa521 => "ecdsa521".to_owned(),
            Key::Rsa => "rsa".to_owned(),
            Key::UserCert => "user_cert".to_owned(),
            Key::UserCertNobody => "user_cert_nobody".to_owned(),
            Key::Other(i) => format!("other{i}"),
        })
    }

    fn target_port(&self) -> u16 {
        self.echo.addr().port()
    }

    /// The jump host of `flavour`, started on first use.
    fn server(&self, flavour: Server) -> &Jump {
        self.servers[&flavour].get_or_init(|| self.start(flavour))
    }

    fn start(&self, flavour: Server) -> Jump {
        let hosts = [(TARGET, "127.0.0.1")];
        let legacy = |algorithms: &legacy::Algorithms| {
            let server = LegacySshd::start(&self.path("legacy_rsa"), &self.authorized, &hosts, algorithms);
            Jump::Legacy(server, self.public("legacy_rsa"))
        };
        let sha1_kex = "diffie-hellman-group14-sha1,diffie-hellman-group-exchange-sha1";
        match flavour {
            Server::Dropbear => return Jump::Dropbear(Dropbear::start(&self.authorized, &hosts)),
            Server::Legacy => {
                return legacy(&legacy::Algorithms {
                    kex: sha1_kex,
                    ciphers: "aes128-cbc",
                    macs: "hmac-sha1",
                    host_key: "ssh-rsa",
                    pubkeys: "ssh-rsa",
                    sign_host_key_as: None,
                });
            }
            Server::LegacyGex => {
                return legacy(&legacy::Algorithms {
                    kex: "diffie-hellman-group-exchange-sha1",
                    ciphers: "3des-cbc",
                    macs: "hmac-sha1",
                    host_key: "ssh-rsa",
                    pubkeys: "ssh-rsa",
                    sign_host_key_as: None,
                });
            }
            Server::LegacySigning => {
                return legacy(&legacy::Algorithms {
                    kex: "curve25519-sha256@libssh.org",
                    ciphers: "aes128-ctr",
                    macs: "hmac-sha2-256",
                    host_key: "rsa-sha2-512",
                    pubkeys: "ssh-ed25519,ssh-rsa",
                    sign_host_key_as: None,
                });
            }
            Server::LyingSigner => {
                return legacy(&legacy::Algorithms {
                    kex: "curve25519-sha256@libssh.org",
                    ciphers: "aes128-ctr",
                    macs: "hmac-sha2-256",
                    host_key: "rsa-sha2-512",
                    pubkeys: "ssh-ed25519,rsa-sha2-512,rsa-sha2-256",
                    sign_host_key_as: Some("ssh-rsa"),
                });
            }
            _ => {}
        }
        let mut b = Sshd::builder()
            .hosts(&[(TARGET, "127.0.0.1")])
            .option(&format!("TrustedUserCAKeys {}", sshd::pub_path(&self.path("user_ca")).display()));
        for line in &self.authorized {
            b = b.authorize(line);
        }
        let host_ca = self.path("host_ca");
        let b = match flavour {
            Server::Plain => b.option("MaxSessions 2"),
            Server::Rsa512Only => b.option("PubkeyAcceptedAlgorithms rsa-sha2-512"),
            Server::Rsa256Only => b.option("PubkeyAcceptedAlgorithms rsa-sha2-256"),
            Server::MaxAuthTries3 => b.option("MaxAuthTries 3"),
            Server::NoForwarding => b.option("AllowTcpForwarding no"),
            Server::PermitOpenOther => b.option("PermitOpen other.example:1"),
            Server::PermitOpenTarget => b.option(&format!("PermitOpen {TARGET}:{}", self.target_port())),
            Server::Only127002 => b.option(&format!("AllowUsers {}@127.0.0.2", self.user)),
            Server::HostCert => b.host_certificate(&host_ca, Some("127.0.0.1"), None),
            Server::HostCertOtherName => b.host_certificate(&host_ca, Some("other.example"), None),
            Server::HostCertExpired => {
                b.host_certificate(&host_ca, Some("127.0.0.1"), Some("20200101:20200102"))
            }
            Server::RsaHostKeyToo => b.option(&format!("HostKey {}", self.path("host_rsa").display())),
            Server::Sha1MacCtr => b.option("Ciphers aes128-ctr").option("MACs hmac-sha1"),
            Server::EcdhOnly => {
                b.option("KexAlgorithms ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521")
            }
            Server::TripleDes => b.option("Ciphers 3des-cbc"),
            Server::Group14Sha1 => b.option("KexAlgorithms diffie-hellman-group14-sha1"),
            Server::RsaSha1HostKey => b
                .option(&format!("HostKey {}", self.path("host_rsa").display()))
                .option("HostKeyAlgorithms ssh-rsa"),
            Server::Dropbear
            | Server::Legacy
            | Server::LegacyGex
            | Server::LegacySigning
            | Server::LyingSigner => {
                unreachable!("started above")
            }
        };
        Jump::Sshd(b.start())
    }

    /// `ssh-ed25519 AAAA…` of a CA or key, without its comment.
    fn public(&self, name: &str) -> String {
        let text = std::fs::read_to_string(sshd::pub_path(&self.path(name))).expect("public key");
        text.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
    }
}

const ALL_SERVERS: [Server; 22] = [
    Server::Plain,
    Server::Rsa512Only,
    Server::Rsa256Only,
    Server::MaxAuthTries3,
    Server::NoForwarding,
    Server::PermitOpenOther,
    Server::PermitOpenTarget,
    Server::Only127002,
    Server::HostCert,
    Server::HostCertOtherName,
    Server::HostCertExpired,
    Server::RsaHostKeyToo,
    Server::Sha1MacCtr,
    Server::EcdhOnly,
    Server::TripleDes,
    Server::Group14Sha1,
    Server::RsaSha1HostKey,
    Server::Dropbear,
    Server::Legacy,
    Server::LegacyGex,
    Server::LegacySigning,
    Server::LyingSigner,
];

/// Which agent a row's clients use (`SSH_AUTH_SOCK` of ssh and of kharond).
enum AgentUse {
    None,
    /// A fresh ssh-agent holding these keys (certificates beside them are added too).
    Ssh(Vec<Key>),
    Gpg,
}

/// One row's client side, written to its own HOME.
struct Case<'w> {
    world: &'w World,
    env: Env,
    server: Server,
    /// Lines of `Host jump`, ahead of the defaults (first value wins).
    lines: Vec<String>,
    /// Config text before `Host jump` and after it.
    before: String,
    after: String,
    /// The `Host jump` block goes into a file of its own that the config `Include`s.
    include: bool,
    /// known_hosts; `None`: the host keys of the servers in `known`.
    known_hosts: Option<String>,
    known: Vec<Server>,
    hash_known_hosts: bool,
    agent: AgentUse,
    /// Clients at once, through the same jump host.
    parallel: usize,
    /// A system-wide config (`/etc/ssh/ssh_config`) with these lines; `None`: ssh gets `-F`.
    system: Option<String>,
    /// The `Host jump` block goes into `/etc/ssh/ssh_config.d/jump.conf` instead of the user's.
    block_in_system: bool,
    /// Files for the system's `ssh_config.d`, by name.
    system_d: Vec<(&'static str, String)>,
    /// After kharond connected: reload, connect again, stop it; no ProxyCommand ssh may be left.
    leak_check: bool,
}

impl<'w> Case<'w> {
    fn new(world: &'w World) -> Self {
        Case {
            world,
            env: Env::new(),
            server: Server::Plain,
            lines: Vec::new(),
            before: String::new(),
            after: String::new(),
            include: false,
            known_hosts: None,
            known: Vec::new(),
            hash_known_hosts: false,
            agent: AgentUse::Ssh(vec![Key::Ed25519]),
            parallel: 1,
            system: None,
            block_in_system: false,
            system_d: Vec::new(),
            leak_check: false,
        }
    }

    fn ssh_dir(&self) -> PathBuf {
        self.env.home().join(".ssh")
    }

    /// An absolute path in the row's ~/.ssh (ssh expands `~` from the password database, not
    /// from HOME, so configs name absolute paths only).
    fn path(&self, name: &str) -> String {
        self.ssh_dir().join(name).display().to_string()
    }

    fn server(&mut self, server: Server) {
        self.server = server;
    }

    fn line(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }

    fn identity(&mut self, key: Key) {
        let path = self.world.key(key).display().to_string();
        self.line(format!("IdentityFile {path}"));
    }

    /// Key files only, no agent.
    fn files_only(&mut self, key: Key) {
        self.agent = AgentUse::None;
        self.identity(key);
    }

    /// `[127.0.0.1]:PORT KEY` of `server` (its plain host key).
    fn host_key_line(&self, server: Server) -> String {
        self.world.server(server).host_key_line()
    }

    /// `ssh -p PORT`'s bare-name form: `127.0.0.1 KEY`.
    fn bare_host_key_line(&self, server: Server) -> String {
        format!("127.0.0.1 {}", self.world.server(server).host_key())
    }

    /// The `Host jump` block, and any block `after` adds, point at their servers.
    fn host_block(&self, alias: &str, server: Server, lines: &[String]) -> String {
        let mut block = format!("Host {alias}\n");
        for line in lines {
            block.push_str(&format!("  {line}\n"));
        }
        block.push_str(&format!(
            "  HostName 127.0.0.1\n  Port {}\n  User {}\n  UserKnownHostsFile {}\n  IdentityFile {}\n  \
             StrictHostKeyChecking yes\n\n",
            self.world.server(server).port(),
            self.world.user,
            self.path("known_hosts"),
            // Absent: neither client falls back to the default key files of its own HOME.
            self.path("id_absent"),
        ));
        block
    }

    /// The row's `/etc/ssh` (see `system`).
    fn system_dir(&self) -> PathBuf {
        self.env.path().join("etc-ssh")
    }

    /// Writes config and known_hosts; returns the config's path.
    fn write(&self) -> PathBuf {
        let dir = self.ssh_dir();
        let block = self.host_block("jump", self.server, &self.lines);
        let mut config = self.before.clone();
        if let Some(system) = &self.system {
            let etc = self.system_dir();
            std::fs::create_dir_all(etc.join("ssh_config.d")).expect("system dir");
            // Relative, as Debian's and Fedora's are: under /etc/ssh for ssh, beside the file for kharond.
            std::fs::write(etc.join("ssh_config"), format!("Include ssh_config.d/*.conf\n{system}"))
                .expect("system config");
            for (name, text) in &self.system_d {
                std::fs::write(etc.join("ssh_config.d").join(name), text).expect("system config file");
            }
            if self.block_in_system {
                std::fs::write(etc.join("ssh_config.d/jump.conf"), &block).expect("system block");
            }
        }
        if self.block_in_system {
        } else if self.include {
            let included = dir.join("jump.conf");
            std::fs::write(&included, block).expect("included file");
            config.push_str(&format!("Include {}\n\n", included.display()));
        } else {
            config.push_str(&block);
        }
        config.push_str(&self.after);
        // Neither client may ever prompt (kharond cannot; ssh must not wait for a terminal).
        config.push_str("Host *\n  BatchMode yes\n");
        let path = dir.join("config");
        std::fs::write(&path, config).expect("config");
        let known = match &self.known_hosts {
            Some(text) => text.clone(),
            None => {
                let mut servers = vec![self.server];
                servers.extend(&self.known);
                servers.iter().map(|s| self.host_key_line(*s) + "\n").collect()
            }
        };
        let known_hosts = dir.join("known_hosts");
        std::fs::write(&known_hosts, known).expect("known_hosts");
        if self.hash_known_hosts {
            let out = Command::new("ssh-keygen")
                .arg("-H")
                .arg("-f")
                .arg(&known_hosts)
                .output()
                .expect("ssh-keygen -H");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let _ = std::fs::remove_file(dir.join("known_hosts.old"));
        }
        path
    }
}

/// How one client fared.
#[derive(Debug, Clone)]
struct Outcome {
    connected: bool,
    /// Why not (ssh's stderr; kharond's start-up error or the chain's status).
    said: String,
}

impl Outcome {
    /// "connects", or "refuses: " and the part that says why: the line (ssh) or the part of
    /// kharond's answer naming `cause`, without the hop's name in front of it.
    fn summary(&self, cause: Option<&str>) -> String {
        if self.connected {
            return "connects".to_owned();
        }
        let parts = || self.said.lines().flat_map(|l| l.split("; ")).map(str::trim).filter(|p| !p.is_empty());
        let part = cause
            .and_then(|cause| parts().find(|p| p.contains(cause)))
            .or_else(|| parts().last())
            .unwrap_or_default();
        // "…hop 1/1 jump (user@host:port, file:line): cause": the cause is after the first "): "
        // whose remainder still names it.
        let part = cause
            .and_then(|cause| {
                part.match_indices("): ").map(|(i, _)| &part[i + 3..]).find(|r| r.contains(cause))
            })
            .unwrap_or(part);
        format!("refuses: {part}")
    }
}

fn run_ssh(case: &Case, config: &Path, agent: Option<&Path>) -> Outcome {
    let spawn = || {
        let forward = format!("{TARGET}:{}", case.world.target_port());
        let mut cmd = match &case.system {
            // ssh reads ~/.ssh/config (~ from the password database) and /etc/ssh/ssh_config:
            // both are the row's in a mount namespace of its own.
            Some(_) => {
                let mut cmd = Command::new("unshare");
                cmd.args(["-m", "sh", "-c"]).arg(format!(
                    "mount --bind {etc} /etc/ssh && mount --bind {home} {pw_home} && exec ssh -W {forward} jump",
                    etc = case.system_dir().display(),
                    home = case.env.home().display(),
                    pw_home = dropbear::password_home(),
                ));
                cmd
            }
            None => {
                let mut cmd = Command::new("ssh");
                cmd.arg("-F").arg(config).arg("-W").arg(&forward).arg("jump");
                cmd
            }
        };
        cmd.env_clear().envs(case.env.vars());
        if let Some(agent) = agent {
            cmd.env("SSH_AUTH_SOCK", agent);
        }
        // A group of its own, so that a client that outlives CLIENT_LIMIT goes with its
        // ProxyCommand: an orphaned `ssh … nc` of the oracle would be counted as kharond's leak.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ssh");
        // All of it, then EOF: the echo target answers and closes, and ssh exits.
        let mut stdin = child.stdin.take().expect("ssh stdin");
        let _ = stdin.write_all(PAYLOAD);
        drop(stdin);
        child
    };
    let children: Vec<_> = (0..case.parallel).map(|_| spawn()).collect();
    let mut said = String::new();
    let mut connected = true;
    for child in children {
        match ssh_exit(child) {
            Some((status, stdout, _)) if status.success() && stdout == PAYLOAD => {}
            Some((status, _, stderr)) => {
                connected = false;
                said = format!("{}(exit {:?})", String::from_utf8_lossy(&stderr), status.code());
            }
            None => {
                connected = false;
                said = format!("still running after {CLIENT_LIMIT:?}");
            }
        }
    }
    Outcome { connected, said }
}

/// Waits up to [`CLIENT_LIMIT`] for the oracle's `ssh` itself to exit (`None` if it did not), then
/// kills its process group: its exit is the verdict, not the end of its stderr, which a
/// ProxyCommand it started shares and may hold open a moment longer (seen under the full suite's
/// load: the row "still running" although nothing was left to do). Its output, read meanwhile.
fn ssh_exit(mut child: std::process::Child) -> Option<(std::process::ExitStatus, Vec<u8>, Vec<u8>)> {
    use std::io::Read as _;
    let group = child.id() as i32;
    let reader = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = reader(child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let stderr = reader(child.stderr.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let mut status = None;
    kharon_e2e::wait_until(CLIENT_LIMIT, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    // The process group this client leads (process_group(0) in run_ssh): what is left of it (a
    // ProxyCommand) goes, and with it the last holder of the pipes read above.
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(group), nix::sys::signal::SIGKILL);
    let status = match status {
        Some(status) => status,
        None => {
            let _ = child.wait();
            return None;
        }
    };
    Some((status, stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default()))
}

/// kharond on the row's files: how its clients fared, and what the row's extra checks found.
fn run_kharond(case: &Case, config: &Path, agent: Option<&Path>) -> (Outcome, Vec<String>) {
    let inv = case
        .env
        .write("inventory.json", &inventory::to_json(&[inventory::routed("c1", "jump", "c1.example")]));
    let mut args = vec!["--inventory", inv.to_str().unwrap()];
    // Naming the config is `ssh -F`: no system file. A row with one names none (the default,
    // ~/.ssh/config, is the same file) and points the system file at its own.
    if case.system.is_none() {
        args.extend(["--ssh-config", config.to_str().unwrap()]);
    }
    let agent = agent.map(|a| a.display().to_string());
    let system = case.system_dir().join("ssh_config").display().to_string();
    let mut extra: Vec<(&str, &str)> = agent.iter().map(|a| ("SSH_AUTH_SOCK", a.as_str())).collect();
    if case.system.is_some() {
        extra.push(("KHARON_SYSTEM_SSH_CONFIG", system.as_str()));
    }
    let mut daemon = match Kharond::try_start(&case.env, &args, &extra) {
        Ok(daemon) => daemon,
        Err(exited) => {
            let outcome = Outcome {
                connected: false,
                said: format!("kharond exited {:?}: {}", exited.code, exited.stderr),
            };
            return (outcome, Vec::new());
        }
    };
    let outcome = kharond_clients(case, &daemon);
    let problems = if case.leak_check { leaks(case, config, &mut daemon) } else { Vec::new() };
    (outcome, problems)
}

/// The ProxyCommand `ssh` processes of this row (their command line names its config).
fn proxy_commands(config: &Path) -> Vec<u32> {
    let config = config.display().to_string();
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| {
                    let Ok(line) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
                    let words: Vec<String> =
                        line.split(|b| *b == 0).map(|w| String::from_utf8_lossy(w).into_owned()).collect();
                    words.first().is_some_and(|w| w == "ssh" || w.ends_with("/ssh"))
                        && words.contains(&config)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Reload with a changed chain (so it is dialled anew and the old session ends), connect again,
/// then SIGTERM: one ProxyCommand once the old session is gone, none after the stop.
fn leaks(case: &Case, config: &Path, daemon: &mut Kharond) -> Vec<String> {
    let mut problems = Vec::new();
    let text = std::fs::read_to_string(config).expect("config");
    std::fs::write(config, text + "Host jump\n  ServerAliveCountMax 5\n").expect("config");
    let reload = kharonctl::run(&case.env, &["reload"]);
    if !reload.success() {
        problems.push(format!("kharonctl reload failed: {}", reload.stderr));
    }
    let again = kharond_clients(case, daemon);
    if !again.connected {
        problems.push(format!("kharond did not connect after the reload: {}", again.said));
    }
    if !kharon_e2e::wait_until(Duration::from_secs(5), || proxy_commands(config).len() <= 1) {
        let left = proxy_commands(config);
        problems.push(format!("{} ProxyCommand processes after a reload: {left:?}", left.len()));
    }
    daemon.signal_and_wait(libc::SIGTERM);
    let gone = kharon_e2e::wait_until(Duration::from_secs(5), || proxy_commands(config).is_empty());
    if !gone {
        let left = proxy_commands(config);
        problems.push(format!("ProxyCommand processes left after kharond stopped: {left:?}"));
        for pid in left {
            // A process of this row that outlived its kharond.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
        }
    }
    problems
}

/// Each of the row's clients through kharond's SOCKS port; on failure, what `status` says.
fn kharond_clients(case: &Case, daemon: &Kharond) -> Outcome {
    let socks = daemon.socks_addr();
    let port = case.world.target_port();
    let codes: Vec<Result<(), u8>> = std::thread::scope(|s| {
        let clients: Vec<_> = (0..case.parallel)
            .map(|_| {
                s.spawn(move || {
                    let (code, mut stream) = socks::connect_by_name(socks, TARGET, port);
                    if code != 0 {
                        return Err(code);
                    }
                    let _ = stream.write_all(PAYLOAD);
                    let _ = stream.shutdown(std::net::Shutdown::Write);
                    if socks::read_all(&mut stream) == PAYLOAD { Ok(()) } else { Err(0) }
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().expect("client thread")).collect()
    });
    if codes.iter().all(Result::is_ok) {
        return Outcome { connected: true, said: String::new() };
    }
    let status = kharonctl::run(&case.env, &["status", "-o", "json"]).json();
    let chain = status["chains"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["jumphost"] == "jump").cloned())
        .unwrap_or_default();
    let mut said =
        vec![format!("SOCKS replies {:?}", codes.iter().filter_map(|c| c.err()).collect::<Vec<_>>())];
    let refusal = &chain["last_refusal"];
    if !refusal.is_null() {
        let field = |name: &str| refusal[name].as_str().unwrap_or_default().to_owned();
        said.push(format!(
            "the jump host refused a channel to {}: {} ({})",
            field("target"),
            field("reason"),
            field("description")
        ));
    }
    if let Some(error) = chain["last_error"].as_str().filter(|e| !e.is_empty()) {
        said.push(error.to_owned());
    }
    Outcome { connected: false, said: said.join("\n") }
}

/// What a row gave: each client's outcome, and how they failed the row's expectation.
#[derive(Clone)]
struct Ran {
    ssh: Outcome,
    kharond: Outcome,
    problems: Vec<String>,
}

/// Runs one row: ssh, then kharond on the same files (known_hosts as it was before ssh ran).
fn run_row(world: &World, row: &Row) -> Ran {
    let mut case = Case::new(world);
    (row.case)(&mut case);
    let config = case.write();
    let ssh_agent;
    let agent: Option<PathBuf> = match &case.agent {
        AgentUse::None => None,
        AgentUse::Gpg => Some(world.gpg.socket().to_owned()),
        AgentUse::Ssh(keys) => {
            ssh_agent = Agent::start();
            for key in keys {
                ssh_agent.add(&world.key(*key));
            }
            Some(ssh_agent.socket().to_owned())
        }
    };
    let known_hosts = case.ssh_dir().join("known_hosts");
    let before = std::fs::read(&known_hosts).unwrap_or_default();
    let ssh = run_ssh(&case, &config, agent.as_deref());
    let after_ssh = std::fs::read_to_string(&known_hosts).unwrap_or_default();
    std::fs::write(&known_hosts, &before).expect("restore known_hosts");
    let (kharond, mut problems) = run_kharond(&case, &config, agent.as_deref());
    let after_kharond = std::fs::read_to_string(&known_hosts).unwrap_or_default();

    match row.expect {
        Connect => {
            if !ssh.connected {
                problems.push(format!("ssh did not connect: {}", ssh.said));
            }
            if !kharond.connected {
                problems.push(format!("kharond did not connect: {}", kharond.said));
            }
        }
        Refuse { ssh: why_ssh, kharond: why_kharond } => {
            if ssh.connected || !ssh.said.contains(why_ssh) {
                problems.push(format!("ssh should refuse with {why_ssh:?}: {}", ssh.summary(None)));
            }
            if kharond.connected || !kharond.said.contains(why_kharond) {
                problems
                    .push(format!("kharond should refuse naming {why_kharond:?}: {}", kharond.summary(None)));
                if !kharond.connected {
                    problems.push(format!("  kharond said: {}", kharond.said));
                }
            }
        }
    }
    if after_ssh != after_kharond {
        problems.push(format!(
            "known_hosts differ:\n  after ssh:     {after_ssh:?}\n  after kharond: {after_kharond:?}"
        ));
    }
    Ran { ssh, kharond, problems }
}

#[test]
fn kharond_connects_wherever_ssh_connects_and_refuses_where_it_refuses() {
    let started = Instant::now();
    let world = World::new();
    let ready = started.elapsed();
    let mut table = vec!["| case | ssh | kharond | agree |".to_owned(), "|---|---|---|---|".to_owned()];
    let mut disagreements = Vec::new();
    // Rows are independent (each its own HOME, agent and kharond; the sshd they share serve any
    // number of clients), and mostly wait for processes: a few at a time.
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<Ran>>> = Mutex::new(vec![None; ROWS.len()]);
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(row) = ROWS.get(i) else { break };
                    let result = run_row(&world, row);
                    done.lock().expect("results")[i] = Some(result);
                }
            });
        }
    });
    let done = done.into_inner().expect("results");
    for (row, result) in ROWS.iter().zip(done) {
        let Ran { ssh, kharond, problems } = result.expect("every row ran");
        let (ssh_cause, kharond_cause) = match row.expect {
            Refuse { ssh, kharond } => (Some(ssh), Some(kharond)),
            Connect => (None, None),
        };
        let cell = |o: &Outcome, cause| o.summary(cause).replace('|', "\\|");
        table.push(format!(
            "| {} | {} | {} | {} |",
            row.name,
            cell(&ssh, ssh_cause),
            cell(&kharond, kharond_cause),
            if problems.is_empty() { "yes" } else { "NO" }
        ));
        if !problems.is_empty() {
            disagreements.push(format!("{}:\n  {}", row.name, problems.join("\n  ")));
        }
    }
    eprintln!(
        "{}\n{} rows in {:.1?} (keys and agents made in {ready:.1?})",
        table.join("\n"),
        ROWS.len(),
        started.elapsed()
    );
    assert!(ROWS.len() >= 25);
    assert!(disagreements.is_empty(), "kharond and ssh disagree:\n{}", disagreements.join("\n"));
}

// ---- the rows ----------------------------------------------------------------------------------

/// The config's `Host *` with a line every row of a kind writes.
fn host_star(c: &mut Case, line: &str) {
    c.before.push_str(&format!("Host *\n  {line}\n\n"));
}

const ROWS: &[Row] = &[
    // ---- agents and keys
    Row { name: "ssh-agent, ed25519 key", expect: Connect, case: |_| {} },
    Row {
        name: "gpg-agent (enable-ssh-support), ed25519 key",
        expect: Connect,
        case: |c| c.agent = AgentUse::Gpg,
    },
    Row { name: "key file, ecdsa-sha2-nistp256", expect: Connect, case: |c| c.files_only(Key::Ecdsa256) },
    Row { name: "key file, ecdsa-sha2-nistp384", expect: Connect, case: |c| c.files_only(Key::Ecdsa384) },
    Row { name: "key file, ecdsa-sha2-nistp521", expect: Connect, case: |c| c.files_only(Key::Ecdsa521) },
    Row {
        name: "rsa key in the agent, sshd accepts only rsa-sha2-512",
        expect: Connect,
        case: |c| {
            c.server(Server::Rsa512Only);
            c.agent = AgentUse::Ssh(vec![Key::Rsa]);
        },
    },
    Row {
        // Both sign with rsa-sha2-512, the best the server's server-sig-algs names, which its
        // PubkeyAcceptedAlgorithms then refuses.
        name: "rsa key file, sshd accepts only rsa-sha2-256",
        expect: Refuse { ssh: "Permission denied (publickey)", kharond: "no key was accepted" },
        case: |c| {
            c.server(Server::Rsa256Only);
            c.files_only(Key::Rsa);
        },
    },
    Row {
        name: "rsa key file, sshd and PubkeyAcceptedAlgorithms both only rsa-sha2-256",
        expect: Connect,
        case: |c| {
            c.server(Server::Rsa256Only);
            c.files_only(Key::Rsa);
            c.line("PubkeyAcceptedAlgorithms rsa-sha2-256");
        },
    },
    Row {
        name: "user certificate in the agent",
        expect: Connect,
        case: |c| c.agent = AgentUse::Ssh(vec![Key::UserCert]),
    },
    Row {
        name: "user certificate through CertificateFile",
        expect: Connect,
        case: |c| {
            // The key without its certificate beside it: only CertificateFile names it.
            let key = c.path("id_certified");
            std::fs::copy(c.world.key(Key::UserCert), &key).expect("copy key");
            c.agent = AgentUse::None;
            c.line(format!("IdentityFile {key}"));
            let cert = c.world.path("user_cert-cert.pub").display().to_string();
            c.line(format!("CertificateFile {cert}"));
        },
    },
    Row {
        name: "user certificate for a principal sshd refuses",
        expect: Refuse { ssh: "Permission denied (publickey)", kharond: "no key was accepted" },
        case: |c| c.agent = AgentUse::Ssh(vec![Key::UserCertNobody]),
    },
    Row {
        name: "IdentitiesOnly yes, five other keys in the agent, MaxAuthTries 3",
        expect: Connect,
        case: |c| {
            c.server(Server::MaxAuthTries3);
            c.agent = AgentUse::Ssh(OTHERS.to_vec());
            c.identity(Key::Ed25519);
            c.line("IdentitiesOnly yes");
        },
    },
    Row {
        name: "five other keys in the agent first, MaxAuthTries 3",
        expect: Refuse {
            ssh: "Too many authentication failures",
            kharond: "Too many authentication failures",
        },
        case: |c| {
            c.server(Server::MaxAuthTries3);
            c.agent = AgentUse::Ssh(OTHERS.to_vec());
            c.identity(Key::Ed25519);
        },
    },
    // ---- known_hosts
    Row { name: "known_hosts hashed by ssh-keygen -H", expect: Connect, case: |c| c.hash_known_hosts = true },
    Row {
        name: "UserKnownHostsFile with two files, the key in the second",
        expect: Connect,
        case: |c| {
            let second = c.path("known_hosts.d");
            std::fs::write(&second, c.host_key_line(Server::Plain) + "\n").expect("second file");
            c.known_hosts = Some(String::new());
            let first = c.path("known_hosts");
            c.line(format!("UserKnownHostsFile {first} {second}"));
        },
    },
    Row {
        name: "GlobalKnownHostsFile holds the key",
        expect: Connect,
        case: |c| {
            let global = c.path("ssh_known_hosts");
            std::fs::write(&global, c.host_key_line(Server::Plain) + "\n").expect("global file");
            c.known_hosts = Some(String::new());
            c.line(format!("GlobalKnownHostsFile {global}"));
        },
    },
    Row {
        name: "key recorded under the bare host name, sshd on another port than 22",
        expect: Connect,
        case: |c| c.known_hosts = Some(c.bare_host_key_line(Server::Plain) + "\n"),
    },
    Row {
        // ssh asks first for the types known_hosts has a key of (order_hostkeyalgs).
        name: "only the jump host's RSA key recorded, it also has an ed25519 key",
        expect: Connect,
        case: |c| {
            c.server(Server::RsaHostKeyToo);
            let port = c.world.server(Server::RsaHostKeyToo).port();
            c.known_hosts = Some(format!("[127.0.0.1]:{port} {}\n", c.world.public("host_rsa")));
        },
    },
    Row {
        name: "@revoked host key",
        expect: Refuse { ssh: "REVOKED HOST KEY DETECTED", kharond: "is marked @revoked at" },
        case: |c| {
            let key = c.world.server(Server::Plain).host_key();
            c.known_hosts = Some(format!("{}\n@revoked * {key}\n", c.host_key_line(Server::Plain)));
        },
    },
    Row {
        name: "changed host key",
        expect: Refuse { ssh: "REMOTE HOST IDENTIFICATION HAS CHANGED", kharond: "HAS CHANGED" },
        case: |c| {
            let port = c.world.server(Server::Plain).port();
            c.known_hosts = Some(format!("[127.0.0.1]:{port} {}\n", c.world.public("other1")));
        },
    },
    Row {
        name: "unknown host key, StrictHostKeyChecking yes",
        expect: Refuse { ssh: "Host key verification failed", kharond: "is not known" },
        case: |c| c.known_hosts = Some(String::new()),
    },
    Row {
        name: "StrictHostKeyChecking accept-new (records the line ssh records)",
        expect: Connect,
        case: |c| {
            c.known_hosts = Some(String::new());
            c.line("StrictHostKeyChecking accept-new");
        },
    },
    // ---- host certificates
    Row {
        name: "host certificate, @cert-authority [127.0.0.1]:PORT",
        expect: Connect,
        case: |c| {
            c.server(Server::HostCert);
            let port = c.world.server(Server::HostCert).port();
            c.known_hosts =
                Some(format!("@cert-authority [127.0.0.1]:{port} {}\n", c.world.public("host_ca")));
        },
    },
    Row {
        name: "host certificate, @cert-authority by bare name on another port than 22",
        expect: Connect,
        case: |c| {
            c.server(Server::HostCert);
            c.known_hosts = Some(format!("@cert-authority 127.0.0.1 {}\n", c.world.public("host_ca")));
        },
    },
    Row {
        name: "host certificate from another CA than known_hosts trusts",
        expect: Refuse { ssh: "Host key verification failed", kharond: "other CAs" },
        case: |c| {
            c.server(Server::HostCert);
            c.known_hosts = Some(format!("@cert-authority * {}\n", c.world.public("other_ca")));
        },
    },
    Row {
        name: "host certificate whose CA is @revoked",
        expect: Refuse { ssh: "REVOKED HOST KEY DETECTED", kharond: "that signed the host certificate" },
        case: |c| {
            c.server(Server::HostCert);
            let ca = c.world.public("host_ca");
            c.known_hosts = Some(format!("@cert-authority * {ca}\n@revoked * {ca}\n"));
        },
    },
    Row {
        name: "host certificate for another name, reached with that HostKeyAlias",
        expect: Connect,
        case: |c| {
            c.server(Server::HostCertOtherName);
            c.line("HostKeyAlias other.example");
            c.known_hosts = Some(format!("@cert-authority *.example {}\n", c.world.public("host_ca")));
        },
    },
    Row {
        name: "host certificate for another name",
        expect: Refuse { ssh: "name is not a listed principal", kharond: "do not include \"127.0.0.1\"" },
        case: |c| {
            c.server(Server::HostCertOtherName);
            c.known_hosts = Some(format!("@cert-authority * {}\n", c.world.public("host_ca")));
        },
    },
    Row {
        name: "expired host certificate",
        expect: Refuse { ssh: "Certificate invalid: expired", kharond: "it expired at 2020-01-02" },
        case: |c| {
            c.server(Server::HostCertExpired);
            c.known_hosts = Some(format!("@cert-authority * {}\n", c.world.public("host_ca")));
        },
    },
    Row {
        name: "CASignatureAlgorithms without the CA's algorithm",
        expect: Refuse {
            ssh: "Certificate signed with disallowed algorithm",
            kharond: "which CASignatureAlgorithms",
        },
        case: |c| {
            c.server(Server::HostCert);
            c.line("CASignatureAlgorithms rsa-sha2-512,rsa-sha2-256");
            c.known_hosts = Some(format!("@cert-authority * {}\n", c.world.public("host_ca")));
        },
    },
    Row {
        name: "CASignatureAlgorithms with the CA's algorithm",
        expect: Connect,
        case: |c| {
            c.server(Server::HostCert);
            c.line("CASignatureAlgorithms ssh-ed25519,rsa-sha2-512");
            c.known_hosts = Some(format!("@cert-authority * {}\n", c.world.public("host_ca")));
        },
    },
    // ---- source addresses
    Row {
        name: "AddressFamily inet in Host *",
        expect: Connect,
        case: |c| host_star(c, "AddressFamily inet"),
    },
    Row {
        name: "AddressFamily inet6 for an IPv4 jump host",
        expect: Refuse { ssh: "Address family for hostname not supported", kharond: "(AddressFamily inet6)" },
        case: |c| c.line("AddressFamily inet6"),
    },
    Row {
        name: "BindAddress 127.0.0.2 to an sshd that admits only 127.0.0.2",
        expect: Connect,
        case: |c| {
            c.server(Server::Only127002);
            c.line("BindAddress 127.0.0.2");
        },
    },
    Row {
        name: "no BindAddress to that sshd",
        expect: Refuse { ssh: "Permission denied (publickey)", kharond: "no key was accepted" },
        case: |c| c.server(Server::Only127002),
    },
    Row { name: "BindInterface lo", expect: Connect, case: |c| c.line("BindInterface lo") },
    Row {
        name: "BindInterface of an interface that does not exist",
        expect: Refuse { ssh: "nope0", kharond: "there is no interface nope0" },
        case: |c| c.line("BindInterface nope0"),
    },
    // ---- forwarding at the jump host
    Row {
        name: "AllowTcpForwarding no",
        expect: Refuse { ssh: "administratively prohibited", kharond: "administratively prohibited" },
        case: |c| c.server(Server::NoForwarding),
    },
    Row {
        name: "PermitOpen without the target",
        expect: Refuse { ssh: "administratively prohibited", kharond: "administratively prohibited" },
        case: |c| c.server(Server::PermitOpenOther),
    },
    Row { name: "PermitOpen with the target", expect: Connect, case: |c| c.server(Server::PermitOpenTarget) },
    // ---- how configs are written
    Row { name: "Include of the Host block", expect: Connect, case: |c| c.include = true },
    Row {
        name: "ControlMaster auto, ControlPath, ControlPersist",
        expect: Connect,
        case: |c| {
            c.line("ControlMaster auto");
            let path = c.path("cm-%C");
            c.line(format!("ControlPath {path}"));
            c.line("ControlPersist no");
        },
    },
    Row {
        name: "ProxyJump chain of two jump hosts",
        expect: Connect,
        case: |c| {
            c.line("ProxyJump jump0");
            c.known.push(Server::MaxAuthTries3);
            let key = c.world.key(Key::Ed25519).display().to_string();
            c.after = c.host_block("jump0", Server::MaxAuthTries3, &[format!("IdentityFile {key}")]);
        },
    },
    Row {
        name: "ProxyJump through a jump host with AllowTcpForwarding no",
        expect: Refuse {
            ssh: "administratively prohibited",
            kharond: "the previous hop refuses to forward to it (administratively prohibited",
        },
        case: |c| {
            c.line("ProxyJump jump0");
            c.known.push(Server::NoForwarding);
            c.after = c.host_block("jump0", Server::NoForwarding, &[]);
        },
    },
    Row {
        name: "ProxyCommand ssh -F CONFIG -W %h:%p to the previous jump host",
        expect: Connect,
        case: |c| {
            let config = c.path("config");
            c.line(format!("ProxyCommand ssh -F {config} -W %h:%p jump0"));
            c.known.push(Server::MaxAuthTries3);
            c.after = c.host_block("jump0", Server::MaxAuthTries3, &[]);
        },
    },
    Row { name: "MaxSessions 2, five parallel clients", expect: Connect, case: |c| c.parallel = 5 },
    // ---- identities the agent keeps
    Row {
        name: "IdentityFile KEY.pub with IdentitiesOnly yes, the private key only in the agent",
        expect: Connect,
        case: |c| public_key_identity(c, Server::Plain),
    },
    Row {
        name: "IdentityFile KEY.pub with IdentitiesOnly yes, to Dropbear",
        expect: Connect,
        case: |c| public_key_identity(c, Server::Dropbear),
    },
    // ---- the system-wide config
    Row {
        name: "the Host block only in /etc/ssh/ssh_config.d/*.conf (Include ssh_config.d/*.conf)",
        expect: Connect,
        case: |c| {
            c.system = Some(String::new());
            c.block_in_system = true;
        },
    },
    Row {
        name: "crypto policy in /etc/ssh/ssh_config.d: KexAlgorithms +diffie-hellman-group14-sha1",
        expect: Connect,
        case: |c| {
            c.server(Server::Group14Sha1);
            c.system = Some(String::new());
            c.system_d.push((
                "50-policy.conf",
                "Host *\n  KexAlgorithms +diffie-hellman-group14-sha1\n".to_owned(),
            ));
        },
    },
    // ---- algorithms ssh offers by default or on a `+` line
    Row {
        name: "sshd with aes128-ctr and hmac-sha1 only, no algorithm line",
        expect: Connect,
        case: |c| c.server(Server::Sha1MacCtr),
    },
    Row {
        name: "FIPS-tuned sshd: ecdh-sha2-nistp256/384/521 key exchange only, no algorithm line",
        expect: Connect,
        case: |c| c.server(Server::EcdhOnly),
    },
    Row {
        name: "Ciphers +3des-cbc to an sshd with only 3des-cbc",
        expect: Connect,
        case: |c| {
            c.server(Server::TripleDes);
            c.line("Ciphers +3des-cbc");
        },
    },
    Row {
        name: "OpenSSH-7-like server (group14-sha1, ssh-rsa, aes128-cbc, hmac-sha1) with the lines users add",
        expect: Connect,
        case: |c| {
            c.server(Server::Legacy);
            c.agent = AgentUse::Ssh(vec![Key::Rsa]);
            c.line("KexAlgorithms +diffie-hellman-group14-sha1");
            c.line("HostKeyAlgorithms +ssh-rsa");
            c.line("PubkeyAcceptedAlgorithms +ssh-rsa");
            c.line("Ciphers +aes128-cbc");
        },
    },
    Row {
        name: "old server (group-exchange-sha1, 3des-cbc, hmac-sha1) with the lines users add",
        expect: Connect,
        case: |c| {
            c.server(Server::LegacyGex);
            c.agent = AgentUse::Ssh(vec![Key::Rsa]);
            c.line("KexAlgorithms +diffie-hellman-group-exchange-sha1");
            c.line("HostKeyAlgorithms +ssh-rsa");
            c.line("PubkeyAcceptedAlgorithms +ssh-rsa");
            c.line("Ciphers +3des-cbc");
        },
    },
    // ---- SHA-1 RSA only where the config allows it
    Row {
        name: "sshd signs its host key only as ssh-rsa (SHA-1), no algorithm line",
        expect: Refuse {
            ssh: "no matching host key type found. Their offer: ssh-rsa",
            kharond: "no matching host key type found. Their offer: ssh-rsa",
        },
        case: |c| {
            c.server(Server::RsaSha1HostKey);
            let port = c.world.server(Server::RsaSha1HostKey).port();
            c.known_hosts = Some(format!("[127.0.0.1]:{port} {}\n", c.world.public("host_rsa")));
        },
    },
    Row {
        name: "server takes RSA signatures only as ssh-rsa (SHA-1), RSA key in the agent",
        expect: Refuse {
            ssh: "Permission denied (publickey)",
            kharond: "PubkeyAcceptedAlgorithms does not allow",
        },
        case: |c| {
            c.server(Server::LegacySigning);
            c.agent = AgentUse::Ssh(vec![Key::Rsa]);
        },
    },
    // ---- the host key's signature must be of the algorithm negotiated (russh 0.65.2)
    Row {
        name: "server agrees rsa-sha2-512 for its host key, then signs as ssh-rsa (SHA-1)",
        expect: Refuse {
            ssh: "incorrect signature",
            kharond: "does not match its host key and the algorithm agreed",
        },
        case: |c| c.server(Server::LyingSigner),
    },
    // ---- the same address twice is not a cycle
    Row {
        name: "ProxyJump USER@127.0.0.1:P1,USER@127.0.0.1:P2 (one bastion behind two ports)",
        expect: Connect,
        case: |c| {
            let (p1, p2) =
                (c.world.server(Server::MaxAuthTries3).port(), c.world.server(Server::Dropbear).port());
            let user = c.world.user.clone();
            c.line(format!("ProxyJump {user}@127.0.0.1:{p1},{user}@127.0.0.1:{p2}"));
            loopback_hops(c);
        },
    },
    Row {
        name: "ProxyJump os1,os1:P2 (the same alias on another port)",
        expect: Connect,
        case: |c| {
            let p2 = c.world.server(Server::Dropbear).port();
            c.line(format!("ProxyJump os1,os1:{p2}"));
            loopback_hops(c);
            let key = c.world.key(Key::Ed25519).display().to_string();
            c.after += &c.host_block("os1", Server::MaxAuthTries3, &[format!("IdentityFile {key}")]);
        },
    },
    Row {
        name: "ProxyJump to the jump host itself (same host, port and user)",
        expect: Refuse { ssh: "jumphost loop via 127.0.0.1", kharond: "jumphost loop via" },
        case: |c| {
            let port = c.world.server(Server::Plain).port();
            let user = c.world.user.clone();
            c.line(format!("ProxyJump {user}@127.0.0.1:{port}"));
        },
    },
    // ---- no ProxyCommand outlives its session
    Row {
        name: "ProxyCommand ssh -F CONFIG jump0 nc %h %p, through a reload and a stop",
        expect: Connect,
        case: |c| {
            let config = c.path("config");
            c.line(format!("ProxyCommand ssh -F {config} jump0 nc %h %p"));
            c.known.push(Server::MaxAuthTries3);
            let key = c.world.key(Key::Ed25519).display().to_string();
            c.after = c.host_block("jump0", Server::MaxAuthTries3, &[format!("IdentityFile {key}")]);
            c.leak_check = true;
        },
    },
];

/// `IdentityFile` names only the public half (a copy in the row's ~/.ssh, no private key beside
/// it), `IdentitiesOnly yes`, and the agent holds the key and four others: 1Password's and
/// Secretive's documented setup.
fn public_key_identity(c: &mut Case, server: Server) {
    c.server(server);
    let public = c.path("agent_key.pub");
    std::fs::copy(sshd::pub_path(&c.world.key(Key::Ed25519)), &public).expect("copy public key");
    c.agent = AgentUse::Ssh(vec![Key::Other(1), Key::Other(2), Key::Ed25519]);
    c.line(format!("IdentityFile {public}"));
    c.line("IdentitiesOnly yes");
}

/// Jump hosts named by address: `Host 127.0.0.1` gives them the row's known_hosts and key, and
/// known_hosts holds the keys of the servers the rows chain through.
fn loopback_hops(c: &mut Case) {
    c.known.extend([Server::MaxAuthTries3, Server::Dropbear]);
    let key = c.world.key(Key::Ed25519).display().to_string();
    let known = c.path("known_hosts");
    let absent = c.path("id_absent");
    c.after += &format!(
        "Host 127.0.0.1\n  IdentityFile {key}\n  IdentityFile {absent}\n  UserKnownHostsFile {known}\n  \
         StrictHostKeyChecking yes\n\n"
    );
}
