//! `kharonctl clusters NAME emergency-credentials` end to end: the fake Passbolt
//! (`harness::passbolt`: GPGAuth, CSRF and session cookies, TOTP MFA, v5 metadata, real OpenPGP),
//! a real S3 that verifies SigV4 (moto) whose host name `objects.c1.example` resolves only at the
//! jump host (a real sshd), so only kharond's routing reaches it, and real `kubectl` through
//! kharond to a TLS API server that echoes the bearer token it got.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use kharon_e2e::kharonctl::{self, Output};
use kharon_e2e::kharond::Kharond;
use kharon_e2e::moto::{Keys, Moto};
use kharon_e2e::passbolt::{self, FakePassbolt, Options};
use kharon_e2e::{Env, inventory};
use pgp::composed::SignedSecretKey;
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::jumphost::{Lab, LabOptions, TARGET};
use crate::kubeconfig::TlsApi;

/// The object storage's name: resolvable only at the jump host, like the cluster's API.
const S3_HOST: &str = "objects.c1.example";
const PASSPHRASE: &str = "correct horse battery staple";
const TOTP_SECRET: &[u8] = b"kharon-test-totp-secret!";

fn object_key(cluster: &str) -> String {
    format!("em-{:x}", Sha256::digest(cluster.as_bytes()))
}

/// A ServiceAccount-token-shaped JWT (unsigned: the test API server only compares it).
fn jwt(exp: u64) -> String {
    let enc = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let claims =
        json!({"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:x:emergency", "exp": exp});
    format!("{}.{}.c2lnbmF0dXJl", enc(br#"{"alg":"RS256","kid":"k"}"#), enc(claims.to_string().as_bytes()))
}

/// One entry of the bucket list; HTTPS, as real object storage is.
fn bucket_yaml(endpoint: &str, bucket: &str, access: &str, secret: &str) -> String {
    format!(
        "  - endpoint: {endpoint}\n    bucket: {bucket}\n    accessKeyId: {access}\n    \
         secretAccessKey: {secret}\n    region: us-east-1\n"
    )
}

/// A certificate for `host` signed by the CA `TlsApi` made in `dir` (`ca.crt`, `ca.key`).
fn issue_cert(dir: &Path, host: &str) -> (PathBuf, PathBuf) {
    let (key, csr, cert, ext) =
        (dir.join("s3.key"), dir.join("s3.csr"), dir.join("s3.crt"), dir.join("s3.ext"));
    std::fs::write(
        &ext,
        format!("subjectAltName=DNS:{host}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"),
    )
    .unwrap();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").current_dir(dir).args(args).output().expect("run openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let p = |p: &Path| p.to_str().unwrap().to_owned();
    let subj = format!("/CN={host}");
    openssl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-subj",
        &subj,
        "-keyout",
        &p(&key),
        "-out",
        &p(&csr),
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        &p(&csr),
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        &p(&ext),
        "-out",
        &p(&cert),
    ]);
    (cert, key)
}

/// Everything one scenario needs, running.
struct World {
    lab: Lab,
    api: TlsApi,
    moto: Moto,
    keys: Keys,
    passbolt: FakePassbolt,
    daemon: Kharond,
    inventory: PathBuf,
    user: SignedSecretKey,
    colleague: SignedSecretKey,
    token: String,
}

impl World {
    fn start() -> World {
        Self::start_with(&[])
    }

    /// The same world with `extra` arguments for kharond.
    fn start_with(extra: &[&str]) -> World {
        let lab = Lab::new(LabOptions {
            last_hop_hosts: vec![(S3_HOST.to_owned(), "127.0.0.1".to_owned())],
            ..Default::default()
        });
        let api = TlsApi::start(lab.env.path(), TARGET);
        let (user, colleague) = (passbolt::new_key(PASSPHRASE), passbolt::new_key("colleague's"));
        let (user_pub, colleague_pub) = (passbolt::public_of(&user), passbolt::public_of(&colleague));
        let exp = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 30 * 86_400;
        let token = jwt(exp);
        // As the controller writes them: one entry per on-call engineer, ours not first.
        let c1 = json!({"secrets": [
            {"data": passbolt::encrypt(&[&colleague_pub], b"colleague's token")},
            {"data": passbolt::encrypt(&[&user_pub], token.as_bytes())},
        ]});
        let c2 = json!({"secrets": [{"data": passbolt::encrypt(&[&colleague_pub], b"not for you")}]});
        // The storage speaks HTTPS with a certificate from the test CA, which kharond trusts
        // through SSL_CERT_FILE (its roots are the platform's).
        let (cert, key) = issue_cert(lab.env.path(), S3_HOST);
        let moto = Moto::start_tls(&cert, &key);
        let keys = moto.setup(&json!({
            "emergency": {object_key("c1"): c1.to_string(), object_key("c2"): c2.to_string()},
        }));
        let passbolt = FakePassbolt::start(Options {
            totp_secret: Some(TOTP_SECRET.to_vec()),
            ..Options::new(user_pub)
        });
        passbolt.set_buckets(&format!(
            "buckets:\n{}",
            bucket_yaml(&s3_endpoint(&moto), "emergency", &keys.access_key_id, &keys.secret_access_key)
        ));

        let cluster = |id: &str, base: &str, port: u16| {
            json!({
                "id": id, "tenant": "t-test",
                // The lab's jump host anchors nothing: VSHN lists the base domain.
                "facts": {"distribution": "openshift4", "jumphost": lab.jumphost(), "jumphostDomains": base},
                "dynamicFacts": {
                    "openshiftBaseDomain": base,
                    "openshiftApiURL": format!("https://api.{base}:{port}"),
                    "talosAPICertificateAuthorityData": api.ca_base64,
                }
            })
        };
        let inventory = lab.env.write(
            "inventory.json",
            &inventory::to_json(&[
                cluster("c1", "c1.example", api.port),
                cluster("c2", "c2.example", 6443),
                cluster("c3", "c3.example", 6443),
            ]),
        );
        let agent = lab.agent.socket().display().to_string();
        let ca = lab.env.path().join("ca.crt").display().to_string();
        let mut args = vec![
            "--inventory",
            inventory.to_str().unwrap(),
            "--ssh-config",
            lab.ssh_config.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let daemon = Kharond::start_with(
            &lab.env,
            &args,
            &[("SSH_AUTH_SOCK", agent.as_str()), ("SSL_CERT_FILE", ca.as_str())],
        );
        World { lab, api, moto, keys, passbolt, daemon, inventory, user, colleague, token }
    }

    fn env(&self) -> &Env {
        &self.lab.env
    }

    /// `kharonctl clusters --inventory INV CLUSTER emergency-credentials ARGS` with `extra`
    /// variables and `stdin`; bounded to 120 s.
    fn run(&self, cluster: &str, args: &[&str], extra: &[(&str, String)], stdin: &str) -> Output {
        let inventory = self.inventory.to_str().unwrap();
        let mut cmd = kharonctl::command(
            self.env(),
            &["clusters", "--inventory", inventory, cluster, "emergency-credentials"],
        );
        cmd.env("KHARON_PASSBOLT_URL", self.passbolt.url())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("run kharonctl");
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).unwrap();
        drop(input);
        let Some(out) = kharon_e2e::output_within(child, Duration::from_secs(120)) else {
            panic!("kharonctl emergency-credentials did not finish within 120 s\n{}", self.daemon.log());
        };
        Output {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The same command on a terminal (`script` gives it a pty): waits for each prompt in turn and
    /// types its answer (a closure, so a TOTP code is fresh). Returns the exit code and what the
    /// terminal showed.
    fn run_in_terminal(
        &self,
        cluster: &str,
        args: &[&str],
        extra: &[(&str, String)],
        answers: &[(&str, &dyn Fn() -> String)],
    ) -> (Option<i32>, String) {
        use std::sync::{Arc, Mutex};
        let quote = |a: &str| format!("'{}'", a.replace('\'', "'\\''"));
        let mut line = vec![quote(kharon_e2e::bin("kharonctl").to_str().unwrap())];
        let fixed =
            ["clusters", "--inventory", self.inventory.to_str().unwrap(), cluster, "emergency-credentials"];
        line.extend(fixed.iter().chain(args).map(|a| quote(a)));
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &line.join(" "), "/dev/null"])
            .env_clear()
            .envs(self.env().vars())
            .env("KHARON_CONTROL_SOCKET", self.env().control_socket())
            .env("KHARON_PASSBOLT_URL", self.passbolt.url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("run script (util-linux)");
        let shown = Arc::new(Mutex::new(String::new()));
        // Ends at EOF, when script exits.
        let reader = kharon_e2e::collect_output(child.stdout.take().unwrap(), Arc::clone(&shown));
        let mut input = child.stdin.take().unwrap();
        let mut seen = 0;
        for (prompt, answer) in answers {
            let appeared = kharon_e2e::wait_until(Duration::from_secs(60), || {
                let text = shown.lock().unwrap();
                match text[seen..].find(prompt) {
                    Some(at) => {
                        seen += at + prompt.len();
                        true
                    }
                    None => false,
                }
            });
            assert!(
                appeared,
                "no prompt {prompt:?} within 60 s; the terminal showed:\n{}",
                shown.lock().unwrap()
            );
            input.write_all(format!("{}\n", answer()).as_bytes()).unwrap();
            input.flush().unwrap();
        }
        let mut code = None;
        let done = kharon_e2e::wait_until(Duration::from_secs(120), || match child.try_wait() {
            Ok(Some(status)) => {
                code = status.code();
                true
            }
            _ => false,
        });
        if !done {
            let _ = child.kill();
            let _ = child.wait();
        }
        drop(input);
        let _ = reader.join();
        let text = shown.lock().unwrap().clone();
        assert!(done, "kharonctl on a terminal did not finish within 120 s:\n{text}");
        (code, text)
    }

    /// Passphrase and a current TOTP code from the environment.
    fn secrets(&self) -> Vec<(&'static str, String)> {
        vec![
            ("KHARON_PASSBOLT_PASSPHRASE", PASSPHRASE.to_owned()),
            ("KHARON_PASSBOLT_TOTP", self.passbolt.totp_now()),
        ]
    }

    fn key_env(&self, key: &SignedSecretKey) -> (&'static str, String) {
        ("KHARON_PASSBOLT_KEY", passbolt::armored_secret(key))
    }

    fn stored_key(&self) -> PathBuf {
        self.env().path().join("config/kharon/passbolt_key")
    }
}

fn s3_endpoint(moto: &Moto) -> String {
    format!("{S3_HOST}:{}", moto.port())
}

fn yaml(path: &Path) -> serde_norway::Value {
    serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn item<'a>(doc: &'a serde_norway::Value, list: &str, name: &str) -> &'a serde_norway::Value {
    doc[list]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no {list} entry {name}"))
}

fn kubectl(w: &World, kubeconfig: &Path, extra: &[&str]) -> std::process::Output {
    let mut cmd = Command::new("kubectl");
    cmd.env_clear().envs(w.env().vars()).args(["--kubeconfig", kubeconfig.to_str().unwrap()]).args(extra);
    cmd.args(["get", "--raw", "/version", "--request-timeout=30s"]).output().expect("run kubectl")
}

/// The issue's "must show": pasted key, passphrase and TOTP from the environment, Passbolt v5
/// metadata behind a shared key, one bucket through the jump host (moto checks the signature), one
/// bucket down and one with a wrong secret reported and skipped; the kubeconfig lets real kubectl
/// reach the TLS API through kharond with the token, and the key is kept 0600 for the next run,
/// which asks for passphrase and TOTP on a terminal and merges into the user's kubeconfig.
#[test]
fn emergency_credentials_through_a_jump_host_reach_the_api_with_kubectl() {
    let w = World::start();
    // The storage's name exists only behind the jump host: a direct download cannot work.
    assert!(std::net::ToSocketAddrs::to_socket_addrs(&(S3_HOST, 80)).is_err(), "{S3_HOST} resolves here");
    let closed = kharon_e2e::free_port();
    w.passbolt.set_buckets(&format!(
        "buckets:\n{}{}{}",
        bucket_yaml(
            &format!("127.0.0.1:{closed}"),
            "emergency-backup",
            &w.keys.access_key_id,
            &w.keys.secret_access_key
        ),
        bucket_yaml(&s3_endpoint(&w.moto), "emergency", &w.keys.access_key_id, "not-the-secret-key"),
        bucket_yaml(&s3_endpoint(&w.moto), "emergency", &w.keys.access_key_id, &w.keys.secret_access_key),
    ));
    let file = w.env().path().join("out/em.kubeconfig");
    let out = w.run("c1", &["-o", file.to_str().unwrap()], &w.secrets(), &passbolt::armored_secret(&w.user));
    assert!(out.success(), "{}\n{}\n---- kharond ----\n{}", out.stdout, out.stderr, w.daemon.log());

    // Each failing bucket is one clear line; none stopped the run.
    assert!(
        out.stderr.contains(&format!("bucket emergency-backup at 127.0.0.1:{closed}: connecting to 127.0.0.1:{closed}: Connection refused")),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "bucket emergency at {}: {} refused the credentials",
            s3_endpoint(&w.moto),
            s3_endpoint(&w.moto)
        )) && out.stderr.contains("SignatureDoesNotMatch"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("emergency-credentials/0/c1: token from bucket emergency at objects.c1.example"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("expires ") && out.stderr.contains("(in 29d 23h)"), "{}", out.stderr);
    assert!(!out.stderr.contains(&w.token) && !out.stdout.contains(&w.token), "the token was printed");
    assert!(!w.daemon.log().contains(&w.keys.secret_access_key), "kharond logged the secret key");
    // The download took the jump host's route (the log is coloured: look at the line, not "via=").
    let log = w.daemon.log();
    assert!(log.lines().any(|l| l.contains("fetched object") && l.contains("hop1")), "{log}");

    // The protocol as passbolt_api answers it and go-passbolt drives it: two GPGAuth stages,
    // me.json redirected (302) to the MFA challenge, the TOTP, me.json again, the list, the shared
    // metadata keys (v5), the secret. The challenge cleared passbolt_mfa; it was not sent back.
    let log = w.passbolt.log();
    let expected = [
        "POST /auth/login.json",
        "POST /auth/login.json",
        "GET /users/me.json",
        "GET /mfa/verify/error.json",
        "POST /mfa/verify/totp.json",
        "GET /users/me.json",
        "GET /resources.json",
        "GET /metadata/keys.json",
        "GET /secrets/resource/8e3874ae-4b40-590b-968a-418f704b9d9a.json",
    ];
    assert_eq!(log, expected);
    assert_eq!(w.passbolt.stale(), Vec::<String>::new(), "a cleared passbolt_mfa went back to Passbolt");

    // The kubeconfig: 0600, our context, the cached inventory's API URL and CA, kharond's listener.
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let doc = yaml(&file);
    let name = "emergency-credentials/0/c1";
    assert_eq!(doc["current-context"], name);
    let cluster = &item(&doc, "clusters", name)["cluster"];
    assert_eq!(cluster["server"], format!("https://{TARGET}:{}", w.api.port).as_str());
    assert_eq!(cluster["proxy-url"], format!("socks5://{}", w.daemon.socks_addr()).as_str());
    assert_eq!(cluster["certificate-authority-data"], w.api.ca_base64.as_str());
    // Go kharon's user name, so a merge replaces what Go kharon wrote.
    let user = "emergency-credentials/0/c1/kharon-login";
    assert_eq!(item(&doc, "contexts", name)["context"]["user"], user);
    assert_eq!(item(&doc, "users", user)["user"]["token"], w.token.as_str());

    let got = kubectl(&w, &file, &[]);
    assert!(got.status.success(), "{}\n{}", String::from_utf8_lossy(&got.stderr), w.daemon.log());
    let version: serde_json::Value = serde_json::from_slice(&got.stdout).unwrap();
    assert_eq!(version["authorization"], format!("Bearer {}", w.token));

    // The pasted key is kept, 0600, and the next run needs no paste; --merge keeps other entries.
    let stored = w.stored_key();
    assert_eq!(std::fs::metadata(&stored).unwrap().permissions().mode() & 0o777, 0o600);
    let mine = w.env().path().join("kube/config");
    std::fs::create_dir_all(mine.parent().unwrap()).unwrap();
    std::fs::write(&mine, "apiVersion: v1\nkind: Config\ncurrent-context: mine\nclusters:\n- name: mine\n  cluster: {server: 'https://mine:6443'}\ncontexts:\n- name: mine\n  context: {cluster: mine, user: me}\nusers:\n- name: me\n  user: {token: t}\n").unwrap();
    // This time on a terminal: passphrase and TOTP code are asked for, not taken from the
    // environment.
    let passphrase = || PASSPHRASE.to_owned();
    let code = || w.passbolt.totp_now();
    let (exit, shown) = w.run_in_terminal(
        "c1",
        &["--merge"],
        &[("KUBECONFIG", mine.display().to_string())],
        &[("Passphrase of your Passbolt key: ", &passphrase), ("Passbolt TOTP code: ", &code)],
    );
    assert_eq!(exit, Some(0), "{shown}");
    assert!(shown.contains(&format!("Merged 1 context into {}", mine.display())), "{shown}");
    let merged = yaml(&mine);
    assert_eq!(merged["current-context"], "mine");
    assert_eq!(item(&merged, "users", "me")["user"]["token"], "t");
    assert_eq!(item(&merged, "users", user)["user"]["token"], w.token.as_str());
    let got = kubectl(&w, &mine, &["--context", name]);
    assert!(got.status.success(), "{}", String::from_utf8_lossy(&got.stderr));
}

/// Wrong passphrase, wrong TOTP, a key Passbolt does not know, a server answering with another
/// key, an object only for a colleague, a missing object: each one clear message, exit 1, and the
/// user's kubeconfig untouched; kharond keeps serving.
#[test]
fn emergency_credential_failures_are_clear_and_write_nothing() {
    let w = World::start();
    let mine = w.env().path().join("kube/config");
    std::fs::create_dir_all(mine.parent().unwrap()).unwrap();
    let before =
        "apiVersion: v1\nkind: Config\ncurrent-context: mine\nclusters: []\ncontexts: []\nusers: []\n";
    std::fs::write(&mine, before).unwrap();
    let out_file = w.env().path().join("never.kubeconfig");
    let base = |w: &World| vec![w.key_env(&w.user), ("KUBECONFIG", mine.display().to_string())];
    let untouched = |what: &str| {
        assert_eq!(std::fs::read_to_string(&mine).unwrap(), before, "{what}: kubeconfig changed");
        assert!(!out_file.exists(), "{what}: a kubeconfig was written");
    };
    let o = out_file.to_str().unwrap();

    let mut extra = base(&w);
    extra.push(("KHARON_PASSBOLT_PASSPHRASE", "wrong passphrase".to_owned()));
    let out = w.run("c1", &["-o", o], &extra, "");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("the passphrase (from env KHARON_PASSBOLT_PASSPHRASE) does not unlock the Passbolt key from env KHARON_PASSBOLT_KEY"),
        "{}",
        out.stderr
    );
    assert!(
        w.passbolt.log().is_empty(),
        "the key was not unlocked, yet Passbolt was asked: {:?}",
        w.passbolt.log()
    );
    untouched("wrong passphrase");

    let mut extra = base(&w);
    extra.push(("KHARON_PASSBOLT_PASSPHRASE", PASSPHRASE.to_owned()));
    // Another code than the current one (and than the neighbouring windows').
    let now = w.passbolt.totp_now();
    let wrong: String = now.chars().map(|c| char::from(b'0' + (c as u8 - b'0' + 5) % 10)).collect();
    extra.push(("KHARON_PASSBOLT_TOTP", wrong));
    let out = w.run("c1", &["--merge"], &extra, "");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    // passbolt_api's words (MfaForm::execute, TotpVerifyForm's isValidOtp rule).
    assert!(
        out.stderr.contains(
            "Passbolt refused the TOTP code: Something went wrong when validating the one-time password. \
             This OTP is not valid. Give the current code"
        ),
        "{}",
        out.stderr
    );
    untouched("wrong TOTP");

    let mut extra = vec![w.key_env(&w.colleague), ("KUBECONFIG", mine.display().to_string())];
    extra.push(("KHARON_PASSBOLT_PASSPHRASE", "colleague's".to_owned()));
    let out = w.run("c1", &["--merge"], &extra, "");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("knows no user with key") && out.stderr.contains("/app/settings/keys"),
        "{}",
        out.stderr
    );
    untouched("unknown key");

    let mitm = FakePassbolt::start(Options {
        me_key: Some(passbolt::public_of(&w.colleague)),
        ..Options::new(passbolt::public_of(&w.user))
    });
    let mut extra = w.secrets();
    extra.extend(base(&w));
    extra.push(("KHARON_PASSBOLT_URL", mitm.url()));
    let out = w.run("c1", &["--merge"], &extra, "");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("answered /users/me.json with a different key"), "{}", out.stderr);
    assert!(!mitm.log().contains(&"GET /resources.json".to_owned()), "{:?}", mitm.log());
    untouched("key mismatch");

    // A Passbolt whose App.fullBaseUrl names another host: its MFA redirect is not followed (the
    // session cookie would go along), as go-passbolt's CheckRedirect refuses it.
    let misconfigured = FakePassbolt::start(Options {
        totp_secret: Some(TOTP_SECRET.to_vec()),
        full_base_url: Some(format!("http://localhost:{}{}", kharon_e2e::free_port(), passbolt::PREFIX)),
        ..Options::new(passbolt::public_of(&w.user))
    });
    let mut extra = w.secrets();
    extra.extend(base(&w));
    extra.push(("KHARON_PASSBOLT_URL", misconfigured.url()));
    let out = w.run("c1", &["--merge"], &extra, "");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("{}/users/me.json redirected to http://localhost:", misconfigured.url()))
            && out
                .stderr
                .contains(&format!("which is not the Passbolt server you gave ({})", misconfigured.url())),
        "{}",
        out.stderr
    );
    assert_eq!(misconfigured.log().last().map(String::as_str), Some("GET /users/me.json"));
    untouched("off-site redirect");

    // A URL that is not Passbolt's (the web server's HTML 404): the message names the URL asked,
    // with one slash between base and path even when the base ends with one.
    let mut extra = w.secrets();
    extra.extend(base(&w));
    let wrong = format!("{}/", w.passbolt.url().replace(passbolt::PREFIX, "/wrong"));
    extra.push(("KHARON_PASSBOLT_URL", wrong.clone()));
    let out = w.run("c1", &["--merge"], &extra, "");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{wrong}auth/login.json answered HTTP 404 with something that is not a Passbolt API reply"
        )),
        "{}",
        out.stderr
    );
    untouched("not Passbolt");

    let mut extra = w.secrets();
    extra.extend(base(&w));
    let out = w.run("c2", &["-o", o], &extra, "");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("none of its 1 entries is encrypted to your key"), "{}", out.stderr);
    assert!(out.stderr.contains("no bucket gave an emergency token for c2"), "{}", out.stderr);
    untouched("foreign key");

    let mut extra = w.secrets();
    extra.extend(base(&w));
    let out = w.run("c3", &["--merge"], &extra, "");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let missing = format!(
        "no object \"{}\" in bucket \"emergency\" at {} (NoSuchKey)",
        object_key("c3"),
        s3_endpoint(&w.moto)
    );
    assert!(out.stderr.contains(&missing), "{}", out.stderr);
    untouched("missing object");

    // A bucket list entry that is not host[:port]: refused by kharond with a clear line.
    w.passbolt.set_buckets(&format!(
        "buckets:\n{}",
        bucket_yaml(
            "https://objects.c1.example/",
            "emergency",
            &w.keys.access_key_id,
            &w.keys.secret_access_key
        )
    ));
    let mut extra = w.secrets();
    extra.extend(base(&w));
    let out = w.run("c1", &["-o", o], &extra, "");
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("endpoint \"https://objects.c1.example/\" is not host[:port]"),
        "{}",
        out.stderr
    );
    untouched("bad endpoint");

    // Nothing secret reached the daemon's log, and it still serves.
    assert!(!w.daemon.log().contains(&w.keys.secret_access_key));
    let status = kharon_e2e::kharonctl::run(w.env(), &["status", "-o", "json"]);
    assert!(status.success(), "{}", status.stderr);
}

/// kharond on all addresses (allowed with a SOCKS password), and kharonctl reading the config file
/// kharond reads: every kubeconfig kharonctl writes (the emergency one, every cluster's, one
/// cluster's, and the per-cluster file of `clusters NAME kubectl`) has a proxy-url on loopback,
/// never 0.0.0.0, with the username and password in its userinfo, percent-encoded; real kubectl
/// reaches the API behind the jump host with each. The files are 0600; the password is in no
/// output and no log. A kubeconfig printed on stdout leaves the password out and says so, and
/// kubectl is refused with such a proxy-url (what every kubeconfig held before).
#[test]
fn a_listener_on_all_addresses_is_reached_on_loopback() {
    // Characters a URL's userinfo cannot hold as they are.
    const PASSWORD: &str = "s3cret/Pw@19:29%";
    const ENCODED: &str = "s3cret%2FPw%4019%3A29%25";
    let port = kharon_e2e::free_port();
    let env = Env::new();
    let config = env.write("socks.toml", &format!("[socks]\nusername = \"kh\"\npassword = \"{PASSWORD}\"\n"));
    kharon_e2e::set_mode(&config, 0o600);
    let listen = format!("0.0.0.0:{port}");
    let w = World::start_with(&["--listen", &listen, "--config", config.to_str().unwrap()]);
    let status = kharon_e2e::kharonctl::run(w.env(), &["status", "-o", "json"]);
    assert_eq!(status.json()["listen_address"], listen.as_str(), "{}", status.stderr);
    let bare = format!("socks5://127.0.0.1:{port}");
    let with_password = format!("socks5://kh:{ENCODED}@127.0.0.1:{port}");
    let config_env = ("KHARON_CONFIG", config.to_str().unwrap());
    let secret_free = |out: &Output, what: &str| {
        for text in [&out.stdout, &out.stderr] {
            assert!(
                !text.contains(PASSWORD) && !text.contains(ENCODED),
                "{what} printed the password:\n{text}"
            );
        }
    };
    let private = |path: &Path| {
        assert_eq!(std::fs::metadata(path).unwrap().permissions().mode() & 0o777, 0o600, "{}", path.display())
    };
    let reaches_api = |file: &Path, what: &str| {
        let got = kubectl(&w, file, &[]);
        assert!(
            got.status.success(),
            "kubectl with {what}: {}\n{}",
            String::from_utf8_lossy(&got.stderr),
            w.daemon.log()
        );
        assert!(String::from_utf8_lossy(&got.stdout).contains("v1.30.0-kharon-test"), "{what}");
    };

    // The emergency kubeconfig.
    let file = w.env().path().join("em.kubeconfig");
    let mut extra = w.secrets();
    extra.push(w.key_env(&w.user));
    extra.push((config_env.0, config_env.1.to_owned()));
    let out = w.run("c1", &["-o", file.to_str().unwrap()], &extra, "");
    assert!(out.success(), "{}\n{}", out.stderr, w.daemon.log());
    secret_free(&out, "emergency-credentials");
    let doc = yaml(&file);
    assert_eq!(
        item(&doc, "clusters", "emergency-credentials/0/c1")["cluster"]["proxy-url"],
        with_password.as_str()
    );
    private(&file);
    reaches_api(&file, "the emergency kubeconfig");
    // The same file without the credentials is refused by kharond: what kharonctl wrote before.
    let without = w.env().path().join("em-without.kubeconfig");
    std::fs::write(&without, std::fs::read_to_string(&file).unwrap().replace(&with_password, &bare)).unwrap();
    assert!(!kubectl(&w, &without, &[]).status.success(), "kharond let kubectl in without its password");

    // Every cluster's kubeconfig, and one cluster's; their exec entry finds an OpenShift token.
    let tokens = w.env().cache_dir().join("openshift-tokens");
    std::fs::create_dir_all(&tokens).unwrap();
    std::fs::write(tokens.join("c1.json"), r#"{"token":"sha256~socks-pw"}"#).unwrap();
    let inventory = w.inventory.to_str().unwrap();
    let run = |args: &[&str]| kharon_e2e::kharonctl::run_with(w.env(), args, &[config_env]);
    let all = w.env().path().join("all.kubeconfig");
    let out = run(&["kubeconfig", "--inventory", inventory, "-o", all.to_str().unwrap()]);
    assert!(out.success(), "{}", out.stderr);
    secret_free(&out, "kubeconfig -o");
    assert_eq!(item(&yaml(&all), "clusters", "c1")["cluster"]["proxy-url"], with_password.as_str());
    private(&all);
    reaches_api(&all, "every cluster's kubeconfig");
    let one = w.env().path().join("one.kubeconfig");
    let out = run(&["clusters", "--inventory", inventory, "c1", "kubeconfig", "-o", one.to_str().unwrap()]);
    assert!(out.success(), "{}", out.stderr);
    secret_free(&out, "clusters c1 kubeconfig -o");
    private(&one);
    reaches_api(&one, "one cluster's kubeconfig");
    let merged = w.env().path().join("merged.kubeconfig");
    let out = run(&["kubeconfig", "--inventory", inventory, "c1", "--merge", "-o", merged.to_str().unwrap()]);
    assert!(out.success(), "{}", out.stderr);
    private(&merged);
    reaches_api(&merged, "a merged kubeconfig");
    // `clusters c1 kubectl` writes the cluster's own file and runs kubectl with it.
    let out = run(&["clusters", "--inventory", inventory, "c1", "kubectl", "get", "--raw", "/version"]);
    assert!(out.success(), "{}\n{}", out.stderr, w.daemon.log());
    assert!(out.stdout.contains("Bearer sha256~socks-pw"), "{}", out.stdout);
    secret_free(&out, "clusters c1 kubectl");

    // On stdout: no password, and stderr says why and what to do instead.
    let out = run(&["kubeconfig", "--inventory", inventory, "c1"]);
    assert!(out.success(), "{}", out.stderr);
    secret_free(&out, "kubeconfig on stdout");
    let doc: serde_norway::Value = serde_norway::from_str(&out.stdout).unwrap();
    assert_eq!(item(&doc, "clusters", "c1")["cluster"]["proxy-url"], bare.as_str());
    assert!(out.stderr.contains("leaves out of its proxy-url") && out.stderr.contains("-o FILE or --merge"));
    // kharonctl without kharond's config: loopback still, no credentials, and a warning.
    let out = kharon_e2e::kharonctl::run(w.env(), &["kubeconfig", "--inventory", inventory, "c1"]);
    assert!(out.success(), "{}", out.stderr);
    let doc: serde_norway::Value = serde_norway::from_str(&out.stdout).unwrap();
    assert_eq!(item(&doc, "clusters", "c1")["cluster"]["proxy-url"], bare.as_str());
    assert!(out.stderr.contains("kharond requires a SOCKS username and password"), "{}", out.stderr);
    assert!(out.stderr.contains("--config FILE or KHARON_CONFIG"), "{}", out.stderr);

    let log = w.daemon.log();
    assert!(!log.contains(PASSWORD) && !log.contains(ENCODED), "{log}");
}
