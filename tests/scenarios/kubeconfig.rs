//! Kubeconfigs from `kharonctl kubeconfig`, `switch` and `clusters NAME kubectl`, checked with the real
//! `kubectl`: merging leaves the user's other entries alone, files are 0600 and replaced atomically,
//! the kubelogin entry is the one kubelogin documents, and kubectl reaches a TLS API server through
//! kharond with the generated `proxy-url` and the exec credential.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use kharon_e2e::kharonctl::{Output, run, run_with};
use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory};
use serde_json::json;
use serde_norway::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/kube").join(name)
}

fn yaml(path: &Path) -> Value {
    serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn item<'a>(doc: &'a Value, list: &str, name: &str) -> &'a Value {
    doc[list]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no {list} entry {name}"))
}

fn kubectl(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new("kubectl");
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run kubectl")
}

fn ok(out: &Output) {
    assert!(out.success(), "kharonctl failed ({:?}):\n{}\n{}", out.code, out.stdout, out.stderr);
}

fn talos(id: &str) -> serde_json::Value {
    json!({
        "id": id, "tenant": "t-talos", "facts": {"distribution": "talos"},
        "dynamicFacts": {
            "talosApiURL": format!("https://api.{id}.example:6443"),
            "oidcIssuer": "https://id.example/realms/test", "oidcClientId": "kube-test"
        }
    })
}

fn three_clusters(env: &Env) -> PathBuf {
    env.write(
        "inventory.json",
        &inventory::to_json(&[
            inventory::routed("c-a", "jump-a", "a.example"),
            inventory::routed("c-b", "jump-b", "b.example"),
            talos("c-t"),
            // No API URL: nothing to connect to, so no context.
            inventory::direct("c-none", "none.example"),
        ]),
    )
}

#[test]
fn merge_keeps_unrelated_entries_byte_for_byte_and_leaves_0600() {
    let env = Env::new();
    let inv = three_clusters(&env);
    let file = env.path().join("home/.kube/config");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::copy(fixture("user-config.yaml"), &file).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = yaml(&file);
    let inode_before = std::fs::metadata(&file).unwrap().ino();

    ok(&run(&env, &["kubeconfig", "--inventory", inv.to_str().unwrap(), "--merge"]));

    let after = yaml(&file);
    for (list, name) in [("clusters", "mine"), ("contexts", "mine"), ("users", "me")] {
        assert_eq!(
            serde_norway::to_string(item(&after, list, name)).unwrap(),
            serde_norway::to_string(item(&before, list, name)).unwrap(),
            "{list}/{name} changed"
        );
    }
    for key in ["x-vendor-field", "preferences", "current-context"] {
        assert_eq!(after[key], before[key], "{key} changed");
    }
    // Our own stale entry is replaced in place, the new ones appended.
    assert_eq!(item(&after, "clusters", "c-a")["cluster"]["server"], "https://api.a.example:6443");
    let names: Vec<_> =
        after["clusters"].as_sequence().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mine", "c-a", "c-b", "c-t"]);

    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_ne!(meta.ino(), inode_before, "written in place, not replaced by rename");
    let leftovers: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "config")
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");

    let f = file.to_str().unwrap();
    let listed = kubectl(&["config", "get-contexts", "-o", "name", "--kubeconfig", f], &[]);
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let mut contexts: Vec<_> = String::from_utf8_lossy(&listed.stdout).lines().map(str::to_owned).collect();
    contexts.sort();
    assert_eq!(contexts, ["c-a", "c-b", "c-t", "mine"]);
    let view = kubectl(&["config", "view", "--kubeconfig", f], &[]);
    assert!(view.status.success(), "{}", String::from_utf8_lossy(&view.stderr));
}

/// `~/.kube/config` as a dotfile manager's symbolic link stays a link; the merge goes
/// into the file it points to, atomically, and kubectl reads the result through the link.
#[test]
fn merge_writes_through_a_symlinked_kubeconfig_and_keeps_the_link() {
    let env = Env::new();
    let inv = three_clusters(&env);
    let real = env.path().join("dotfiles/kube/config");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::copy(fixture("user-config.yaml"), &real).unwrap();
    let link = env.path().join("home/.kube/config");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("../../dotfiles/kube/config", &link).unwrap();

    ok(&run(&env, &["kubeconfig", "--inventory", inv.to_str().unwrap(), "--merge"]));

    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(meta.file_type().is_symlink(), "the link was replaced by a regular file");
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("../../dotfiles/kube/config"));
    let merged = yaml(&real);
    assert_eq!(item(&merged, "clusters", "c-a")["cluster"]["server"], "https://api.a.example:6443");
    assert_eq!(item(&merged, "users", "me"), item(&yaml(&fixture("user-config.yaml")), "users", "me"));
    assert_eq!(std::fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o600);
    let leftovers = |dir: &Path| std::fs::read_dir(dir).unwrap().count();
    assert_eq!(leftovers(link.parent().unwrap()), 1, "a temp file beside the link");
    assert_eq!(leftovers(real.parent().unwrap()), 1, "a temp file beside the target");
    let listed =
        kubectl(&["config", "get-contexts", "-o", "name", "--kubeconfig", link.to_str().unwrap()], &[]);
    assert!(String::from_utf8_lossy(&listed.stdout).lines().any(|c| c == "c-t"), "{listed:?}");
}

#[test]
fn written_file_is_0600_and_kubectl_lists_every_cluster() {
    let env = Env::new();
    let inv = three_clusters(&env);
    let file = env.path().join("out/kubeconfig");
    ok(&run(&env, &["kubeconfig", "--inventory", inv.to_str().unwrap(), "-o", file.to_str().unwrap()]));
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let listed =
        kubectl(&["config", "get-contexts", "-o", "name", "--kubeconfig", file.to_str().unwrap()], &[]);
    assert_eq!(String::from_utf8_lossy(&listed.stdout), "c-a\nc-b\nc-t\n");
    let current = kubectl(&["config", "current-context", "--kubeconfig", file.to_str().unwrap()], &[]);
    assert_eq!(String::from_utf8_lossy(&current.stdout), "c-a\n");

    let doc = yaml(&file);
    // Routed clusters get our listener as socks5:// (never socks5h://, which kubectl rejects).
    let a = &item(&doc, "clusters", "c-a")["cluster"];
    assert_eq!(a["proxy-url"], "socks5://127.0.0.1:12000");
    assert!(item(&doc, "clusters", "c-t")["cluster"].get("proxy-url").is_none());
    // OpenShift: the exec entry runs this very kharonctl.
    let exec = &item(&doc, "users", "c-a")["user"]["exec"];
    assert_eq!(exec["apiVersion"], "client.authentication.k8s.io/v1");
    assert!(Path::new(exec["command"].as_str().unwrap()).is_absolute());
    let args: Vec<_> = exec["args"].as_sequence().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(args, ["clusters", "--inventory", inv.to_str().unwrap(), "c-a", "token", "--exec-credential"]);
}

/// kharond listening elsewhere than this shell's settings say (here an ephemeral port; the
/// settings say 127.0.0.1:12000): the kubeconfig's proxy-url is where the daemon really listens.
/// With no daemon, the configured address, and stderr says why.
#[test]
fn proxy_url_is_where_the_running_daemon_listens() {
    let env = Env::new();
    let inv = three_clusters(&env);
    let i = inv.to_str().unwrap();
    let proxy_url = |doc: &Value| item(doc, "clusters", "c-a")["cluster"]["proxy-url"].clone();

    let daemon = Kharond::start(&env, &["--inventory", i]);
    let port = daemon.socks_addr().port();
    assert_ne!(port, 12000);
    let out = run(&env, &["kubeconfig", "--inventory", i]);
    ok(&out);
    let doc: Value = serde_norway::from_str(&out.stdout).unwrap();
    assert_eq!(proxy_url(&doc), format!("socks5://127.0.0.1:{port}").as_str(), "{}", out.stdout);
    assert!(!out.stderr.contains("configured listen address"), "{}", out.stderr);
    // The one-cluster form writes the same.
    let out = run(&env, &["clusters", "--inventory", i, "c-a", "kubeconfig"]);
    ok(&out);
    let doc: Value = serde_norway::from_str(&out.stdout).unwrap();
    assert_eq!(proxy_url(&doc), format!("socks5://127.0.0.1:{port}").as_str(), "{}", out.stdout);

    drop(daemon);
    let out = run(&env, &["kubeconfig", "--inventory", i]);
    ok(&out);
    let doc: Value = serde_norway::from_str(&out.stdout).unwrap();
    assert_eq!(proxy_url(&doc), "socks5://127.0.0.1:12000");
    assert!(out.stderr.contains("kharond is not running"), "{}", out.stderr);
    assert!(
        out.stderr.contains("using the configured listen address 127.0.0.1:12000 (default)"),
        "{}",
        out.stderr
    );
}

/// The user entry as int128/kubelogin's README shows it (docs/kubeconfig.md), with the extra scope and
/// explicit `interactiveMode` Go kharon and VSHN's Talos template write.
#[test]
fn kubelogin_entry_matches_what_kubelogin_documents() {
    let env = Env::new();
    let inv = three_clusters(&env);
    let out = run(&env, &["clusters", "--inventory", inv.to_str().unwrap(), "c-t", "kubeconfig"]);
    ok(&out);
    let doc: Value = serde_norway::from_str(&out.stdout).unwrap();
    let expected: Value = serde_norway::from_str(
        "exec:\n  apiVersion: client.authentication.k8s.io/v1beta1\n  command: kubectl\n  args:\n  \
         - oidc-login\n  - get-token\n  - --oidc-issuer-url=https://id.example/realms/test\n  \
         - --oidc-client-id=kube-test\n  - --oidc-extra-scope=email offline_access profile openid\n  \
         interactiveMode: IfAvailable\n  provideClusterInfo: false\n",
    )
    .unwrap();
    assert_eq!(item(&doc, "users", "c-t")["user"], expected);
    assert_eq!(doc["current-context"], "c-t");
}

#[test]
fn switch_makes_current_and_dash_goes_back() {
    let env = Env::new();
    let inv = three_clusters(&env);
    let file = env.path().join("kube/config");
    let kc = [("KUBECONFIG", file.to_str().unwrap())];
    let i = inv.to_str().unwrap();
    ok(&run_with(&env, &["switch", "--inventory", i, "c-a"], &kc));
    ok(&run_with(&env, &["switch", "--inventory", i, "c-t"], &kc));
    assert_eq!(yaml(&file)["current-context"], "c-t");
    ok(&run_with(&env, &["switch", "-"], &kc));
    assert_eq!(yaml(&file)["current-context"], "c-a");
    ok(&run_with(&env, &["switch", "-"], &kc));
    assert_eq!(yaml(&file)["current-context"], "c-t");
    let listing = run_with(&env, &["switch", "--inventory", i], &kc);
    ok(&listing);
    assert!(listing.stdout.contains("* c-t"), "{}", listing.stdout);
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
}

/// A TLS "API server" on loopback with a self-signed certificate for `host` (also used by
/// `http_connect` and `emergency`).
pub(crate) struct TlsApi {
    child: Child,
    pub(crate) port: u16,
    pub(crate) ca_base64: String,
}

impl TlsApi {
    /// A CA (`ca.crt`, whose base64 is `ca_base64`) and a server certificate it signed: rustls,
    /// unlike Go, refuses a self-signed CA certificate used as the server's own.
    pub(crate) fn start(dir: &Path, host: &str) -> Self {
        let (ca_key, ca, key, csr, cert) = (
            dir.join("ca.key"),
            dir.join("ca.crt"),
            dir.join("api.key"),
            dir.join("api.csr"),
            dir.join("api.crt"),
        );
        let ext = dir.join("api.ext");
        std::fs::write(
            &ext,
            format!(
                "subjectAltName=DNS:{host}\nbasicConstraints=CA:FALSE\n\
                 keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
            ),
        )
        .unwrap();
        let openssl = |args: &[&std::ffi::OsStr]| {
            let out = Command::new("openssl").args(args).output().expect("run openssl");
            assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        let o = |s: &'static str| std::ffi::OsStr::new(s);
        let p = |p: &PathBuf| p.as_os_str().to_owned();
        let subj = format!("/CN={host}");
        openssl(&[
            o("req"),
            o("-x509"),
            o("-newkey"),
            o("rsa:2048"),
            o("-nodes"),
            o("-days"),
            o("1"),
            o("-subj"),
            o("/CN=kharon test CA"),
            o("-keyout"),
            &p(&ca_key),
            o("-out"),
            &p(&ca),
        ]);
        openssl(&[
            o("req"),
            o("-newkey"),
            o("rsa:2048"),
            o("-nodes"),
            o("-subj"),
            subj.as_ref(),
            o("-keyout"),
            &p(&key),
            o("-out"),
            &p(&csr),
        ]);
        openssl(&[
            o("x509"),
            o("-req"),
            o("-in"),
            &p(&csr),
            o("-CA"),
            &p(&ca),
            o("-CAkey"),
            &p(&ca_key),
            o("-CAcreateserial"),
            o("-days"),
            o("1"),
            o("-extfile"),
            &p(&ext),
            o("-out"),
            &p(&cert),
        ]);
        let mut child = Command::new("python3")
            .arg(fixture("tls_api.py"))
            .args([&cert, &key])
            .stdout(Stdio::piped())
            .spawn()
            .expect("run python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("no port from tls_api.py: {line:?}"));
        Self { child, port, ca_base64: base64_encode(&std::fs::read(&ca).unwrap()) }
    }
}

impl Drop for TlsApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Real kubectl, the generated kubeconfig (`proxy-url: socks5://` kharond, CA from the fact, the
/// kharonctl exec credential) and kharond's direct path to a TLS API server.
#[test]
fn kubectl_get_version_through_kharond_with_exec_token() {
    let env = Env::new();
    let api = TlsApi::start(env.path(), "localhost");
    // Routed (it has a jump host), but its API host is in its own skip list: kharond connects
    // directly, which needs no SSH; kubectl still goes through kharond because of proxy-url.
    let cluster = json!({
        "id": "c-tls", "tenant": "t-test",
        "facts": {"distribution": "openshift4", "jumphost": "jump-tls", "jumphostSkipDomains": "localhost"},
        "dynamicFacts": {
            "openshiftApiURL": format!("https://localhost:{}", api.port),
            "talosAPICertificateAuthorityData": api.ca_base64,
        }
    });
    let inv = env.write("inventory.json", &inventory::to_json(&[cluster]));
    let i = inv.to_str().unwrap();
    let daemon = Kharond::start(&env, &["--inventory", i]);
    let listen = daemon.socks_addr().to_string();
    let with_listen = [("KHARON_LISTEN", listen.as_str())];

    // No token yet: the exec plugin fails with a message that says how to log in.
    let out = run_with(
        &env,
        &["clusters", "--inventory", i, "c-tls", "kubectl", "get", "--raw", "/version"],
        &with_listen,
    );
    assert!(!out.success());
    assert!(out.stderr.contains("kharonctl clusters c-tls login"), "{}", out.stderr);

    let mut login = Command::new(kharon_e2e::bin("kharonctl"))
        .env_clear()
        .envs(env.vars())
        .args(["clusters", "--inventory", i, "c-tls", "login", "--token-stdin"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    login.stdin.take().unwrap().write_all(b"sha256~test-token\n").unwrap();
    assert!(login.wait().unwrap().success());

    let out = run_with(
        &env,
        &["clusters", "--inventory", i, "c-tls", "kubectl", "get", "--raw", "/version"],
        &with_listen,
    );
    ok(&out);
    let version: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(version["gitVersion"], "v1.30.0-kharon-test");
    assert_eq!(version["authorization"], "Bearer sha256~test-token");

    // The same through a kubeconfig file and kubectl run by hand.
    let file = env.path().join("kubeconfig");
    ok(&run_with(&env, &["kubeconfig", "--inventory", i, "-o", file.to_str().unwrap()], &with_listen));
    let vars = env.vars();
    let kv: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let args = ["--kubeconfig", file.to_str().unwrap(), "get", "--raw", "/version"];
    let got = kubectl(&args, &kv);
    assert!(got.status.success(), "{}\n{}", String::from_utf8_lossy(&got.stderr), daemon.log());
    assert!(String::from_utf8_lossy(&got.stdout).contains("v1.30.0-kharon-test"));

    // It really went through kharond: without the daemon, the proxy refuses and kubectl fails.
    drop(daemon);
    let got = kubectl(&args, &kv);
    assert!(!got.status.success(), "kubectl bypassed the proxy");
}

/// A cluster whose TLS API (and OAuth) server resolves only behind a real OpenSSH jump host
/// (`jumphost::Lab`), and kharond routing to it.
pub(crate) struct JumpCluster {
    pub(crate) lab: crate::jumphost::Lab,
    pub(crate) api: TlsApi,
    pub(crate) daemon: Kharond,
    pub(crate) inventory: PathBuf,
    cert: PathBuf,
}

impl JumpCluster {
    pub(crate) fn start() -> Self {
        use crate::jumphost::{Lab, LabOptions, TARGET};
        let lab = Lab::new(LabOptions::default());
        let api = TlsApi::start(lab.env.path(), TARGET);
        let cluster = json!({
            "id": "c1", "tenant": "t-test",
            // The lab's jump host anchors nothing: VSHN lists the base domain.
            "facts": {"distribution": "openshift4", "jumphost": lab.jumphost(), "jumphostDomains": "c1.example"},
            "dynamicFacts": {
                "openshiftBaseDomain": "c1.example",
                "openshiftApiURL": format!("https://{TARGET}:{}", api.port),
                "talosAPICertificateAuthorityData": api.ca_base64,
            }
        });
        let inventory = lab.env.write("inventory.json", &inventory::to_json(&[cluster]));
        let agent = lab.agent.socket().display().to_string();
        let daemon = Kharond::start_with(
            &lab.env,
            &["--inventory", inventory.to_str().unwrap(), "--ssh-config", lab.ssh_config.to_str().unwrap()],
            &[("SSH_AUTH_SOCK", agent.as_str())],
        );
        let cert = lab.env.path().join("ca.crt");
        JumpCluster { lab, api, daemon, inventory, cert }
    }

    fn listen(&self) -> String {
        self.daemon.socks_addr().to_string()
    }
}

/// The issue's "must show": real kubectl, a generated kubeconfig, and a TLS API server whose name
/// resolves only behind the jump host, reached through kharond.
#[test]
fn kubectl_get_version_through_a_jump_host() {
    let jc = JumpCluster::start();
    let (env, i) = (&jc.lab.env, jc.inventory.to_str().unwrap());
    let listen = jc.listen();
    let file = env.path().join("kubeconfig");
    ok(&run_with(
        env,
        &["kubeconfig", "--inventory", i, "-o", file.to_str().unwrap()],
        &[("KHARON_LISTEN", &listen)],
    ));
    let token = ocp_token_file(env, "c1");
    std::fs::write(&token, r#"{"token":"sha256~via-jump"}"#).unwrap();

    let vars = env.vars();
    let kv: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let got = kubectl(&["--kubeconfig", file.to_str().unwrap(), "get", "--raw", "/version"], &kv);
    assert!(got.status.success(), "{}\n{}", String::from_utf8_lossy(&got.stderr), jc.daemon.log());
    let version: serde_json::Value = serde_json::from_slice(&got.stdout).unwrap();
    assert_eq!(version["gitVersion"], "v1.30.0-kharon-test");
    assert_eq!(version["authorization"], "Bearer sha256~via-jump");
    let contexts =
        kubectl(&["config", "get-contexts", "-o", "name", "--kubeconfig", file.to_str().unwrap()], &kv);
    assert_eq!(String::from_utf8_lossy(&contexts.stdout), "c1\n");
    assert!(jc.daemon.log().contains("SSH session up"), "{}", jc.daemon.log());
    let _ = jc.api.port;
}

/// The OpenShift web login behind the jump host, started by kubectl's exec plugin on first use:
/// the test's "browser" (curl through kharond) follows the authorize redirect back to kharonctl's
/// loopback port; the token lands in the store and kubectl sends it.
#[test]
fn web_login_on_first_use_through_a_jump_host() {
    let jc = JumpCluster::start();
    let (env, i) = (&jc.lab.env, jc.inventory.to_str().unwrap());
    let listen = jc.listen();
    let browser = format!(
        "curl -sS --fail --max-time 20 --cacert {} -x socks5h://{listen} --noproxy 127.0.0.1 -L -o /dev/null",
        jc.cert.display()
    );
    let extra = [("KHARON_LISTEN", listen.as_str()), ("KHARON_BROWSER", browser.as_str())];
    let out =
        run_with(env, &["clusters", "--inventory", i, "c1", "kubectl", "get", "--raw", "/version"], &extra);
    assert!(out.success(), "{}\n{}\n{}", out.stdout, out.stderr, jc.daemon.log());
    let version: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(version["authorization"], "Bearer sha256~weblogin");
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ocp_token_file(env, "c1")).unwrap()).unwrap();
    assert_eq!(stored["token"], "sha256~weblogin");
    assert!(stored["expires_at"].as_u64().is_some());

    // `login` runs the same flow on request.
    std::fs::remove_file(ocp_token_file(env, "c1")).unwrap();
    ok(&run_with(env, &["clusters", "--inventory", i, "c1", "login"], &extra));
    let token = run_with(env, &["clusters", "--inventory", i, "c1", "token"], &[("KHARON_LISTEN", &listen)]);
    assert_eq!(token.stdout, "sha256~weblogin\n");
}

/// Where `clusters ID login` stores an OpenShift token (kharonctl's `openshift_login::path`).
fn ocp_token_file(env: &Env, id: &str) -> PathBuf {
    let dir = env.cache_dir().join("openshift-tokens");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{id}.json"))
}
