use std::process::Command;
use std::time::Duration;

use russh::keys::{Algorithm, PrivateKey};

use super::*;
use kharon_ssh_config::{AddressFamily, IdentityAgent, Transport};

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
        asking: Default::default(),
        required_rsa_size: 1024,
        identity_agent: IdentityAgent::None,
        certificate_files: Vec::new(),
        transport: Transport::Tcp,
        address_family: AddressFamily::Any,
        bind: None,
        server_alive_interval: Duration::from_secs(15),
        server_alive_count_max: 3,
        connect_timeout: None,
        rekey_limit: Default::default(),
        strict_host_key_checking: StrictHostKeyChecking::Yes,
        user_known_hosts_files: vec![known_hosts.to_owned()],
        global_known_hosts_files: Vec::new(),
        host_key_alias: None,
        algorithms: Default::default(),
        origin: None,
        suggestion: None,
        named: true,
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
    // The same key recorded without a port vouches for port 2222 too, when nothing is recorded
    // for `[jump.example]:2222` (ssh: "checking without port identifier"; measured on 9.2).
    let f2 = Fixture::new(&format!("jump.example {}\n", b64(&k)));
    let h2 = hop("j", "jump.example", 2222, &f2.file);
    assert_eq!(
        check(&h2, &plain(&k), &f2.ctx()).unwrap(),
        Accepted::Known(Line { file: f2.file.clone(), line: 1 })
    );
    // But another key there is no change of `[jump.example]:2222`'s key: the host is unknown.
    assert!(matches!(check(&h2, &plain(&key()), &f2.ctx()), Err(Error::Unknown { .. })));
    // Nor does the bare name count once HostKeyAlias names the host.
    let mut aliased = h2.clone();
    aliased.host_key_alias = Some("stable".into());
    assert!(matches!(check(&aliased, &plain(&k), &f2.ctx()), Err(Error::Unknown { .. })));
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

/// A host name in a printed command must never be read as an option by `ssh`, nor as
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
    kharon_common::wildcard::matches(&ascii(text), &ascii(pattern))
}

#[test]
fn glob_matches_like_openssh() {
    assert!(glob(b"*", b""));
    assert!(glob(b"a*c", b"abbbc"));
    assert!(!glob(b"a?c", b"ac"));
    assert!(glob(b"*.b.*", b"x.b.y"));
    assert!(!glob(b"*.b", b"x.bc"));
}

// ---- host certificates -----------------------------------------------------------

/// A host CA and a host key signed by it with `ssh-keygen -s` (`options`: principals, validity,
/// type), in a temporary directory.
struct Certified {
    dir: tempfile::TempDir,
}

impl Certified {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for key in ["ca", "host", "other_ca"] {
            run(
                "ssh-keygen",
                &["-q", "-t", "ed25519", "-N", "", "-f", &dir.path().join(key).to_string_lossy()],
            );
        }
        Certified { dir }
    }

    fn public(&self, key: &str) -> String {
        let text = std::fs::read_to_string(self.dir.path().join(format!("{key}.pub"))).unwrap();
        text.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
    }

    /// The host key signed by `ca` with `options`.
    fn cert(&self, ca: &str, options: &[&str]) -> PublicKeyOrCertificate {
        let host = self.dir.path().join("host.pub");
        let mut args = vec!["-q", "-s"];
        let ca = self.dir.path().join(ca).to_string_lossy().into_owned();
        args.push(&ca);
        args.extend(["-I", "test-host"]);
        args.extend(options);
        let host = host.to_string_lossy().into_owned();
        args.push(&host);
        run("ssh-keygen", &args);
        let text = std::fs::read_to_string(self.dir.path().join("host-cert.pub")).unwrap();
        PublicKeyOrCertificate::Certificate(russh::keys::Certificate::from_openssh(text.trim()).unwrap())
    }
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_host_certificate_signed_by_a_known_ca_is_accepted_by_port_and_by_bare_name() {
    let c = Certified::new();
    let cert = c.cert("ca", &["-h", "-n", "jump.example"]);
    for host_field in ["[jump.example]:2222", "jump.example", "*.example"] {
        let f = Fixture::new(&format!("# CAs\n@cert-authority {host_field} {}\n", c.public("ca")));
        let h = hop("j", "jump.example", 2222, &f.file);
        assert_eq!(
            check(&h, &cert, &f.ctx()).unwrap(),
            Accepted::Known(Line { file: f.file.clone(), line: 2 }),
            "{host_field}"
        );
        // What the key exchange is told: offer certificates.
        assert!(KnownHosts::load(&h).hints().certificate_authority, "{host_field}");
    }
    // No principals at all: good for any host, as in ssh.
    let any = c.cert("ca", &["-h"]);
    let f = Fixture::new(&format!("@cert-authority * {}\n", c.public("ca")));
    assert!(check(&hop("j", "10.0.0.9", 22, &f.file), &any, &f.ctx()).is_ok());
}

#[test]
fn a_certificate_that_does_not_fit_the_host_is_refused_naming_the_ca_line_and_what_differs() {
    let c = Certified::new();
    let ca_line =
        |f: &Fixture| format!("the @cert-authority line at {}:1 holds its CA, but ", f.file.display());
    let f = Fixture::new(&format!("@cert-authority * {}\n", c.public("ca")));
    let h = hop("j", "jump.example", 2222, &f.file);
    let refused = |cert: &PublicKeyOrCertificate, h: &Hop| match check(h, cert, &f.ctx()) {
        Err(Error::Certificate { why, .. }) => why,
        other => panic!("{other:?}"),
    };

    let other_name = c.cert("ca", &["-h", "-n", "other.example,bastion"]);
    assert_eq!(
        refused(&other_name, &h),
        format!(
            "{}its principals (\"other.example\", \"bastion\") do not include \"jump.example\", the HostName ssh \
             checks them against",
            ca_line(&f)
        )
    );
    // HostKeyAlias is the name checked instead (lowercased, as ssh does).
    let mut aliased = h.clone();
    aliased.host_key_alias = Some("Bastion".into());
    assert!(check(&aliased, &other_name, &f.ctx()).is_ok());

    let expired = c.cert("ca", &["-h", "-n", "jump.example", "-V", "20200101:20200102"]);
    assert_eq!(refused(&expired, &h), format!("{}it expired at 2020-01-02T00:00:00Z", ca_line(&f)));
    let future = c.cert("ca", &["-h", "-n", "jump.example", "-V", "20990101:20990102"]);
    assert_eq!(refused(&future, &h), format!("{}it is not valid before 2099-01-01T00:00:00Z", ca_line(&f)));
    let user = c.cert("ca", &["-n", "jump.example"]);
    assert_eq!(
        refused(&user, &h),
        format!("{}it is a user certificate, not a host certificate", ca_line(&f))
    );

    let mut strict_ca = h.clone();
    strict_ca.algorithms = kharon_ssh_config::Algorithms::with_ca_signatures(&["rsa-sha2-512"]);
    let good = c.cert("ca", &["-h", "-n", "jump.example"]);
    assert_eq!(
        refused(&good, &strict_ca),
        format!(
            "{}its CA signed it with ssh-ed25519, which CASignatureAlgorithms (rsa-sha2-512) does not allow",
            ca_line(&f)
        )
    );
    // The whole message says which host and which key, and that the key alone is not known either.
    let msg = check(&h, &expired, &f.ctx()).unwrap_err().to_string();
    assert!(msg.starts_with("host certificate of tester@jump.example:2222 (SHA256:"), "{msg}");
    assert!(
        msg.ends_with("and its key is not known by itself, so StrictHostKeyChecking refuses it"),
        "{msg}"
    );
}

#[test]
fn a_certificate_whose_signature_does_not_verify_is_refused() {
    let c = Certified::new();
    let PublicKeyOrCertificate::Certificate(cert) = c.cert("ca", &["-h"]) else { unreachable!() };
    let mut blob = cert.to_bytes().unwrap();
    // The signature is last: change one of its bytes.
    let last = blob.len() - 1;
    blob[last] ^= 1;
    let forged = russh::keys::Certificate::from_bytes(&blob).unwrap();
    let f = Fixture::new(&format!("@cert-authority * {}\n", c.public("ca")));
    let err = check(&hop("j", "jump.example", 22, &f.file), &forged.into(), &f.ctx()).unwrap_err();
    assert!(err.to_string().contains("its signature does not verify with the CA's key"), "{err}");
}

#[test]
fn another_ca_falls_back_to_the_plain_key_as_ssh_does() {
    let c = Certified::new();
    let cert = c.cert("other_ca", &["-h", "-n", "jump.example"]);
    let f = Fixture::new(&format!("@cert-authority *.example {}\n", c.public("ca")));
    let h = hop("j", "jump.example", 22, &f.file);
    let Err(Error::Certificate { why, .. }) = check(&h, &cert, &f.ctx()) else { panic!() };
    assert!(why.starts_with("it is signed by CA SHA256:"), "{why}");
    assert!(
        why.ends_with(&format!(
            "and the @cert-authority line for jump.example at {}:1 names other CAs",
            f.file.display()
        )),
        "{why}"
    );
    // The certified key recorded as a plain key is enough.
    let f = Fixture::new(&format!(
        "@cert-authority *.example {}\njump.example {}\n",
        c.public("ca"),
        c.public("host")
    ));
    let h = hop("j", "jump.example", 22, &f.file);
    assert_eq!(check(&h, &cert, &f.ctx()).unwrap(), Accepted::Known(Line { file: f.file.clone(), line: 2 }));
}

#[test]
fn revoked_cas_and_certified_keys_are_refused() {
    let c = Certified::new();
    let cert = c.cert("ca", &["-h", "-n", "jump.example"]);
    let f = Fixture::new(&format!("@cert-authority * {0}\n@revoked * {0}\n", c.public("ca")));
    let err = check(&hop("j", "jump.example", 22, &f.file), &cert, &f.ctx()).unwrap_err();
    assert!(
        matches!(&err, Error::Revoked { recorded, what, .. } if recorded.line == 2 && what.starts_with("the CA (SHA256:")),
        "{err}"
    );
    let f = Fixture::new(&format!("@cert-authority * {}\n@revoked * {}\n", c.public("ca"), c.public("host")));
    let err = check(&hop("j", "jump.example", 22, &f.file), &cert, &f.ctx()).unwrap_err();
    assert!(err.to_string().starts_with("the key of the host certificate (SHA256:"), "{err}");
}

#[test]
fn hints_name_the_known_key_types_of_the_port_bracketed_name_only() {
    let rsa = PrivateKey::random(&mut russh::keys::key::safe_rng(), Algorithm::Rsa { hash: None });
    let rsa = rsa.unwrap().public_key().clone();
    let f = Fixture::new(&format!("[jump.example]:2222 {}\njump.example {}\n", b64(&rsa), b64(&key())));
    let hints = KnownHosts::load(&hop("j", "jump.example", 2222, &f.file)).hints();
    assert_eq!(hints.plain, vec![Algorithm::Rsa { hash: None }]);
    assert!(!hints.certificate_authority);
}
