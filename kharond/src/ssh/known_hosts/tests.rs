use std::process::Command;
use std::time::Duration;

use russh::keys::{Algorithm, PrivateKey};

use super::*;
use crate::ssh::config::{IdentityAgent, Transport};

/// A hop with every setting at its default, for unit tests of the engine.
pub(crate) fn hop(alias: &str, host: &str, port: u16, known_hosts: &Path) -> Hop {
    Hop {
        alias: alias.to_owned(),
        host_name: host.to_owned(),
        port,
        user: "tester".to_owned(),
        identity_files: Vec::new(),
        identities_only: false,
        use_keychain: false,
        identity_agent: IdentityAgent::None,
        certificate_files: Vec::new(),
        transport: Transport::Tcp,
        server_alive_interval: Duration::from_secs(15),
        server_alive_count_max: 3,
        connect_timeout: None,
        strict_host_key_checking: StrictHostKeyChecking::Yes,
        user_known_hosts_files: vec![known_hosts.to_owned()],
        global_known_hosts_files: Vec::new(),
        host_key_alias: None,
        algorithms: Default::default(),
        origin: None,
        suggestion: None,
    }
}

fn key() -> PublicKey {
    PrivateKey::random(&mut russh::keys::key::safe_rng(), Algorithm::Ed25519).unwrap().public_key().clone()
}

fn plain(k: &PublicKey) -> PublicKeyOrCertificate {
    PublicKeyOrCertificate::PublicKey { key: k.clone(), hash_alg: None }
}

fn b64(k: &PublicKey) -> String {
    let s = k.to_openssh().unwrap();
    s.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

struct Fixture {
    dir: tempfile::TempDir,
    file: PathBuf,
}

impl Fixture {
    fn new(content: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("known_hosts");
        std::fs::write(&file, content).unwrap();
        Self { dir, file }
    }
    fn ctx(&self) -> Context<'_> {
        Context { ssh_config: Path::new("/home/u/.ssh/config") }
    }
}

#[test]
fn tab_separated_and_port_bracketed_lines_match() {
    let k = key();
    let (t, d) = b64(&k).split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())).unwrap();
    let f = Fixture::new(&format!("# comment\n\n[jump.example]:2222\t{t}  \t{d} comment here\n"));
    let h = hop("j", "jump.example", 2222, &f.file);
    assert_eq!(
        check(&h, &plain(&k), &f.ctx()).unwrap(),
        Accepted::Known(Line { file: f.file.clone(), line: 3 })
    );
    // The same key recorded without a port does not vouch for port 2222.
    let f2 = Fixture::new(&format!("jump.example {}\n", b64(&k)));
    let h2 = hop("j", "jump.example", 2222, &f2.file);
    assert!(matches!(check(&h2, &plain(&k), &f2.ctx()), Err(Error::Unknown { .. })));
}

#[test]
fn wildcards_and_negation_follow_openssh() {
    let k = key();
    let f = Fixture::new(&format!("*.example,!bad.example {}\n", b64(&k)));
    let good = hop("a", "Good.Example", 22, &f.file);
    let bad = hop("b", "bad.example", 22, &f.file);
    assert!(check(&good, &plain(&k), &f.ctx()).is_ok());
    assert!(matches!(check(&bad, &plain(&k), &f.ctx()), Err(Error::Unknown { .. })));
    let f = Fixture::new(&format!("[127.0.0.?]:22?? {}\n", b64(&k)));
    assert!(check(&hop("l", "127.0.0.1", 2299, &f.file), &plain(&k), &f.ctx()).is_ok());
}

#[test]
fn hashed_names_written_by_ssh_keygen_match() {
    let k = key();
    let f = Fixture::new(&format!("[jump.example]:2022 {}\nother.example {}\n", b64(&k), b64(&key())));
    let out = Command::new("ssh-keygen").arg("-H").arg("-f").arg(&f.file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&f.file).unwrap();
    assert!(text.starts_with("|1|"), "{text}");
    assert!(check(&hop("j", "jump.example", 2022, &f.file), &plain(&k), &f.ctx()).is_ok());
    assert!(matches!(
        check(&hop("j", "jump.example", 22, &f.file), &plain(&k), &f.ctx()),
        Err(Error::Unknown { .. })
    ));
}

#[test]
fn changed_key_is_refused_naming_file_and_line_even_with_checking_off() {
    let old = key();
    let new = key();
    let f = Fixture::new(&format!("# header\njump.example {}\n", b64(&old)));
    let mut h = hop("j", "jump.example", 22, &f.file);
    h.strict_host_key_checking = StrictHostKeyChecking::No;
    let err = check(&h, &plain(&new), &f.ctx()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Changed { .. }));
    assert!(msg.contains(&format!("{}:2", f.file.display())), "{msg}");
    assert!(msg.contains(&new.fingerprint(HashAlg::Sha256).to_string()), "{msg}");
    assert!(msg.contains("HAS CHANGED"), "{msg}");
}

#[test]
fn revoked_key_is_refused_even_when_also_listed() {
    let k = key();
    let f = Fixture::new(&format!("jump.example {0}\n@revoked * {0}\n", b64(&k)));
    let err = check(&hop("j", "jump.example", 22, &f.file), &plain(&k), &f.ctx()).unwrap_err();
    assert!(matches!(&err, Error::Revoked { recorded, .. } if recorded.line == 2), "{err}");
}

#[test]
fn unknown_key_error_shows_fingerprint_and_a_command_that_records_it() {
    let k = key();
    let f = Fixture::new("");
    let mut h = hop("jump-b", "10.0.0.2", 2200, &f.file);
    h.user = "alice".into();
    let msg = check(&h, &plain(&k), &f.ctx()).unwrap_err().to_string();
    assert!(msg.contains(&k.fingerprint(HashAlg::Sha256).to_string()), "{msg}");
    assert!(
        msg.contains(
            "ssh -F /home/u/.ssh/config -o StrictHostKeyChecking=ask -p 2200 -l alice -- jump-b true"
        ),
        "{msg}"
    );
}

/// Issue 14: a host name in a printed command must never be read as an option by `ssh`, nor as
/// shell syntax by the shell the user pastes it into.
#[test]
fn suggested_commands_end_options_before_the_host_and_quote_it() {
    let k = key();
    let f = Fixture::new("");
    let h = hop("-oProxyCommand=touch x", "10.0.0.2", 22, &f.file);
    let msg = check(&h, &plain(&k), &f.ctx()).unwrap_err().to_string();
    assert!(msg.contains("-l tester -- '-oProxyCommand=touch x' true`"), "{msg}");

    let f = Fixture::new(&format!("[jump.example]:2022 {}\n", b64(&key())));
    let msg = check(&hop("j", "jump.example", 2022, &f.file), &plain(&k), &f.ctx()).unwrap_err().to_string();
    assert!(msg.contains("`ssh-keygen -R '[jump.example]:2022'`"), "{msg}");
}

#[test]
fn accept_new_records_into_a_new_private_file_and_is_then_known() {
    let k = key();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sub/.ssh/known_hosts");
    let mut h = hop("j", "jump.example", 2022, &file);
    h.strict_host_key_checking = StrictHostKeyChecking::AcceptNew;
    let ctx = Context { ssh_config: Path::new("cfg") };
    assert_eq!(check(&h, &plain(&k), &ctx).unwrap(), Accepted::Recorded(file.clone()));
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(file.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
    assert!(std::fs::read_to_string(&file).unwrap().starts_with("[jump.example]:2022 ssh-ed25519 "));
    h.strict_host_key_checking = StrictHostKeyChecking::Yes;
    assert!(matches!(check(&h, &plain(&k), &ctx).unwrap(), Accepted::Known(_)));
    // A different key for the recorded name is now a change, not a new host.
    h.strict_host_key_checking = StrictHostKeyChecking::AcceptNew;
    assert!(matches!(check(&h, &plain(&key()), &ctx), Err(Error::Changed { .. })));
}

#[test]
fn host_key_alias_is_looked_up_without_port_and_never_the_typed_alias() {
    let k = key();
    let f = Fixture::new(&format!("stable-name {}\nj {}\n", b64(&k), b64(&key())));
    let mut h = hop("j", "10.1.1.1", 2222, &f.file);
    h.host_key_alias = Some("stable-name".into());
    assert!(matches!(check(&h, &plain(&k), &f.ctx()).unwrap(), Accepted::Known(Line { line: 1, .. })));
}

#[test]
fn global_files_are_read_after_user_files() {
    let k = key();
    let f = Fixture::new("");
    let global = f.dir.path().join("ssh_known_hosts");
    std::fs::write(&global, format!("jump.example {}\n", b64(&k))).unwrap();
    let mut h = hop("j", "jump.example", 22, &f.file);
    h.global_known_hosts_files = vec![global.clone()];
    assert_eq!(check(&h, &plain(&k), &f.ctx()).unwrap(), Accepted::Known(Line { file: global, line: 1 }));
}

/// known_hosts patterns are matched by the ssh config's `match_pattern`; in the byte terms of
/// the known_hosts file.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let ascii = |b: &[u8]| String::from_utf8(b.to_vec()).expect("ASCII");
    pattern::wildcard(&ascii(text), &ascii(pattern))
}

#[test]
fn glob_matches_like_openssh() {
    assert!(glob(b"*", b""));
    assert!(glob(b"a*c", b"abbbc"));
    assert!(!glob(b"a?c", b"ac"));
    assert!(glob(b"*.b.*", b"x.b.y"));
    assert!(!glob(b"*.b", b"x.bc"));
}
