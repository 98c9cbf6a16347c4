//! `kharonctl test`: one healthy cluster behind a real jump host and one whose jump host is
//! down. The command must name the broken hop in its table and exit non-zero. Also: every
//! endpoint of a cluster (API, console, OAuth) is checked, a malformed URL is named by cluster and
//! fact, and the ssh-agent that counts is kharond's, not the caller's shell's.

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{inventory, kharonctl, sshd};

use crate::jumphost::{Lab, LabOptions, TARGET};
use crate::kubeconfig::TlsApi;

/// A TLS API server for TARGET with a CA-signed certificate, and the fact that makes kharonctl
/// trust that CA (`test` verifies certificates as `clusters ID login` does).
fn api(lab: &Lab) -> TlsApi {
    let dir = lab.env.path().join("api");
    std::fs::create_dir_all(&dir).unwrap();
    TlsApi::start(&dir, TARGET)
}

const CA_FACT: &str = "talosAPICertificateAuthorityData";

/// The row of `-o json` for this cluster, endpoint and check.
fn find(rows: &[serde_json::Value], cluster: &str, endpoint: &str, check: &str) -> serde_json::Value {
    rows.iter()
        .find(|r| r["cluster"] == cluster && r["endpoint"] == endpoint && r["check"] == check)
        .unwrap_or_else(|| panic!("no {endpoint} {check} row for {cluster}: {rows:#?}"))
        .clone()
}

/// Starts kharond on `clusters`, through the lab's jump hosts with the lab's agent, and runs
/// `kharonctl test -o json` (with `env`), which must fail: every scenario here has a failing
/// cluster. Returns the daemon (stopped when dropped), the inventory file and the rows.
fn test_rows(
    lab: &Lab,
    clusters: &[serde_json::Value],
    env: &[(&str, &str)],
) -> (Kharond, std::path::PathBuf, Vec<serde_json::Value>) {
    let inv = lab.env.write("inventory.json", &inventory::to_json(clusters));
    let agent = lab.agent.socket().display().to_string();
    let daemon = Kharond::start_with(
        &lab.env,
        &["--inventory", inv.to_str().unwrap(), "--ssh-config", lab.ssh_config.to_str().unwrap()],
        &[("SSH_AUTH_SOCK", agent.as_str())],
    );
    let out = kharonctl::run_with(&lab.env, &["test", "-o", "json"], env);
    assert_eq!(out.code, Some(1), "a failing cluster must fail the run\n{}\n{}", out.stdout, out.stderr);
    let rows = out.json().as_array().cloned().unwrap_or_default();
    (daemon, inv, rows)
}

#[test]
fn test_checks_each_cluster_through_its_tunnel_and_names_the_broken_hop() {
    let lab = Lab::new(LabOptions::default());
    let tls = api(&lab);
    // A second jump host that nobody listens for.
    let dead_port = kharon_e2e::free_port();
    let mut config = std::fs::read_to_string(&lab.ssh_config).unwrap();
    config.push_str(&sshd::host_block("hop-dead", dead_port, &sshd::current_user(), &lab.key, &[]));
    std::fs::write(&lab.ssh_config, config).unwrap();

    let mut healthy = inventory::routed("c-ok", &lab.jumphost(), "c1.example");
    healthy["dynamicFacts"]["openshiftApiURL"] = format!("https://{TARGET}:{}", tls.port).into();
    healthy["dynamicFacts"][CA_FACT] = tls.ca_base64.clone().into();
    let broken = inventory::routed("c-broken", "hop-dead", "c2.example");
    let agent = lab.agent.socket().display().to_string();
    let agent_env = [("SSH_AUTH_SOCK", agent.as_str())];
    let (_daemon, inv, rows) = test_rows(&lab, &[healthy, broken], &agent_env);
    let rows = &rows[..];
    assert_eq!(find(rows, "c-ok", "api", "connect")["ok"], true, "{rows:?}");
    assert_eq!(find(rows, "c-ok", "api", "https")["ok"], true, "{rows:?}");
    assert_eq!(find(rows, "c-ok", "api", "https")["url"], format!("https://{TARGET}:{}/version", tls.port));
    assert_eq!(find(rows, "c-ok", "api", "connect")["path"], lab.jumphost());
    let broken = find(rows, "c-broken", "api", "connect");
    assert_eq!(broken["ok"], false);
    assert!(broken["error"].as_str().unwrap().contains("hop-dead"), "{broken}");
    assert!(rows.iter().all(|r| !(r["cluster"] == "c-broken" && r["check"] == "https")));
    assert_eq!(find(rows, "(local)", "ssh-agent", "agent")["ok"], true);

    // The table for people names the broken hop too; one cluster alone can pass.
    let table = kharonctl::run_with(&lab.env, &["test"], &agent_env);
    assert!(table.stdout.contains("FAILED") && table.stdout.contains("hop-dead"), "{}", table.stdout);
    let only_ok = kharonctl::run_with(&lab.env, &["test", "c-ok"], &agent_env);
    assert_eq!(only_ok.code, Some(0), "{}\n{}", only_ok.stdout, only_ok.stderr);
    let unknown = kharonctl::run_with(&lab.env, &["test", "c-nope"], &agent_env);
    assert_eq!(unknown.code, Some(1));
    assert!(unknown.stderr.contains("c-nope"), "{}", unknown.stderr);

    // A part of an id names a cluster: "c-o" only c-ok, while "ok" is in c-ok and c-br(ok)en,
    // which without a terminal is exit 2 listing both. kharonctl reads the clusters every command
    // reads: the same inventory file, or with no inventory or cache of its own, kharond's table.
    let same = [("SSH_AUTH_SOCK", agent.as_str()), ("KHARON_INVENTORY", inv.to_str().unwrap())];
    for env in [&same[..], &agent_env[..]] {
        let part = kharonctl::run_with(&lab.env, &["test", "c-o"], env);
        assert_eq!(part.code, Some(0), "{env:?}\n{}\n{}", part.stdout, part.stderr);
        assert!(part.stdout.contains("c-ok") && !part.stdout.contains("c-broken"), "{}", part.stdout);
        let two = kharonctl::run_with(&lab.env, &["test", "ok"], env);
        assert_eq!(two.code, Some(2), "{env:?}\n{}\n{}", two.stdout, two.stderr);
        assert!(two.stderr.contains("c-ok") && two.stderr.contains("c-broken"), "{}", two.stderr);
    }
}

/// API, console and OAuth route of one cluster, each connected through the jump host and fetched
/// over TLS; a console URL that is not a URL, reported by cluster and fact instead of skipped; and
/// kharonctl run from a shell without SSH_AUTH_SOCK while kharond has an agent: not a failure.
#[test]
fn test_checks_api_console_and_oauth_and_names_a_malformed_url() {
    let lab = Lab::new(LabOptions::default());
    let tls = api(&lab);
    let target = format!("{TARGET}:{}", tls.port);
    let mut full = inventory::routed("c-full", &lab.jumphost(), "c1.example");
    full["dynamicFacts"]["openshiftApiURL"] = format!("https://{target}").into();
    full["dynamicFacts"]["openshiftConsoleURL"] = format!("https://{target}/console").into();
    // Steward's fact is a host name; a port is allowed in it like in any host:port.
    full["dynamicFacts"]["openshiftOAuthRoute"] = target.clone().into();
    full["dynamicFacts"][CA_FACT] = tls.ca_base64.clone().into();
    let mut bad = inventory::routed("c-bad", &lab.jumphost(), "c2.example");
    bad["dynamicFacts"]["openshiftApiURL"] = format!("https://{target}").into();
    bad["dynamicFacts"]["openshiftConsoleURL"] = "https://console.apps.c2.example:99999/".into();
    bad["dynamicFacts"][CA_FACT] = tls.ca_base64.clone().into();
    let agent = lab.agent.socket().display().to_string();
    // The harness clears the environment: this kharonctl has no SSH_AUTH_SOCK.
    let (_daemon, inv, rows) = test_rows(&lab, &[full.clone(), bad], &[]);
    let rows = &rows[..];
    for (endpoint, fact, fetched) in [
        ("api", "openshiftApiURL", format!("https://{target}/version")),
        ("console", "openshiftConsoleURL", format!("https://{target}/console")),
        ("oauth", "openshiftOAuthRoute", format!("https://{target}")),
    ] {
        let connect = find(rows, "c-full", endpoint, "connect");
        assert_eq!((&connect["ok"], &connect["fact"]), (&true.into(), &fact.into()), "{connect}");
        assert_eq!(connect["path"], lab.jumphost());
        let https = find(rows, "c-full", endpoint, "https");
        assert_eq!((&https["ok"], &https["url"]), (&true.into(), &fetched.into()), "{https}");
    }
    let malformed = find(rows, "c-bad", "console", "url");
    assert_eq!((&malformed["ok"], &malformed["fact"]), (&false.into(), &"openshiftConsoleURL".into()));
    let why = malformed["error"].as_str().unwrap().to_owned();
    assert!(why.contains("openshiftConsoleURL") && why.contains("console.apps.c2.example:99999"), "{why}");
    assert_eq!(find(rows, "c-bad", "api", "https")["ok"], true, "{rows:#?}");
    // kharond's agent, not this shell's: checked and fine.
    let agent_row = find(rows, "(local)", "ssh-agent", "agent");
    assert_eq!((&agent_row["ok"], &agent_row["path"]), (&true.into(), &agent.as_str().into()), "{agent_row}");
    // The only other failure is the inventory's own warning about that same fact.
    let failed: Vec<(&str, &str)> = rows
        .iter()
        .filter(|r| r["ok"] == false)
        .map(|r| (r["cluster"].as_str().unwrap(), r["check"].as_str().unwrap()))
        .collect();
    assert_eq!(failed, [("(local)", "inventory"), ("c-bad", "url")], "{rows:#?}");

    // The table marks the failing row; its note under the table names the fact, once.
    let table = kharonctl::run(&lab.env, &["test"]);
    let line = table.stdout.lines().find(|l| l.contains("c-bad") && l.contains("FAILED")).unwrap_or_default();
    assert!(line.contains("console url") && line.contains("[2]"), "{}", table.stdout);
    let note = table.stdout.lines().find(|l| l.starts_with("[2] c-bad console")).unwrap_or_default();
    assert!(note.contains("openshiftConsoleURL"), "{}", table.stdout);
    let said = format!("{}{}", table.stdout, table.stderr);
    assert_eq!(said.matches(why.as_str()).count(), 1, "the error once:\n{said}");
    assert!(table.stdout.contains("oauth https"), "{}", table.stdout);

    // Without the malformed cluster everything passes, still with no agent in this shell.
    std::fs::write(&inv, inventory::to_json(&[full])).unwrap();
    let reload = kharonctl::run(&lab.env, &["reload"]);
    assert!(reload.success(), "{}", reload.stderr);
    let out = kharonctl::run(&lab.env, &["test"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
}

/// `test` verifies the API's certificate as `clusters ID login` does: the same
/// roots (the system's and the cluster's CA fact) and the same verifier. A server that presents a
/// CA certificate as its own (what `openssl req -x509` makes) fails both even with that CA
/// trusted; a certificate the CA issued passes. The refusal is said once, in words.
#[test]
fn test_refuses_the_certificate_login_refuses_and_says_it_once() {
    let lab = Lab::new(LabOptions {
        last_hop_hosts: vec![
            ("api.c2.example".to_owned(), "127.0.0.1".to_owned()),
            ("api.c3.example".to_owned(), "127.0.0.1".to_owned()),
        ],
        ..LabOptions::default()
    });
    let good_dir = lab.env.path().join("good");
    std::fs::create_dir_all(&good_dir).unwrap();
    let good = TlsApi::start(&good_dir, "api.c2.example");
    let leaf_dir = lab.env.path().join("ca-as-leaf");
    std::fs::create_dir_all(&leaf_dir).unwrap();
    let ca_as_leaf = crate::jumphost::TlsServer::start(&leaf_dir);
    let own_cert = crate::kubeconfig::base64_encode(&std::fs::read(leaf_dir.join("cert.pem")).unwrap());

    let mut leaf = inventory::routed("c-leaf", &lab.jumphost(), "c1.example");
    leaf["dynamicFacts"]["openshiftApiURL"] = format!("https://{TARGET}:{}", ca_as_leaf.port).into();
    leaf["dynamicFacts"][CA_FACT] = own_cert.into();
    let mut fine = inventory::routed("c-good", &lab.jumphost(), "c2.example");
    fine["dynamicFacts"]["openshiftApiURL"] = format!("https://api.c2.example:{}", good.port).into();
    fine["dynamicFacts"][CA_FACT] = good.ca_base64.clone().into();
    // A CA fact that decodes but holds no certificate: that cluster's row fails, the rest go on.
    let mut broken = inventory::routed("c-badca", &lab.jumphost(), "c3.example");
    broken["dynamicFacts"]["openshiftApiURL"] = format!("https://api.c3.example:{}", good.port).into();
    broken["dynamicFacts"][CA_FACT] =
        crate::kubeconfig::base64_encode(b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n")
            .into();
    let (_daemon, _, rows) = test_rows(&lab, &[leaf, fine, broken], &[]);
    let rows = &rows[..];
    assert_eq!(find(rows, "c-good", "api", "https")["ok"], true, "{rows:#?}");
    let unusable = find(rows, "c-badca", "api", "https");
    assert_eq!(unusable["ok"], false, "{unusable}");
    let why = unusable["error"].as_str().unwrap_or_default();
    assert!(why.contains("cannot make an HTTPS client with the cluster's own CA"), "{why}");
    assert_eq!(find(rows, "c-leaf", "api", "connect")["ok"], true, "the path works: {rows:#?}");
    let refused = find(rows, "c-leaf", "api", "https");
    assert_eq!(refused["ok"], false, "{refused}");
    let why = refused["error"].as_str().unwrap_or_default();
    assert!(why.contains("a CA certificate (basic constraints CA:TRUE) as its own"), "{why}");
    assert!(
        why.contains("CaUsedAsEndEntity") && why.contains("`kharonctl clusters c-leaf login` refuses it too"),
        "{why}"
    );

    // Said once: in the note under the table, not also on the live lines.
    let table = kharonctl::run(&lab.env, &["test"]);
    assert_eq!(table.code, Some(1));
    let said = format!("{}{}", table.stdout, table.stderr);
    assert_eq!(said.matches("CaUsedAsEndEntity").count(), 1, "{said}");

    // `login` refuses that server the same way (the web login's first request), and says it once.
    let login =
        kharonctl::run_with(&lab.env, &["clusters", "c-leaf", "login"], &[("KHARON_BROWSER", "true")]);
    assert_eq!(login.code, Some(1), "{login:?}");
    assert_eq!(login.stderr.matches("CaUsedAsEndEntity").count(), 1, "{}", login.stderr);
    assert!(login.stderr.contains("oauth-authorization-server"), "{}", login.stderr);
    assert!(
        login.stderr.contains("a CA certificate (basic constraints CA:TRUE) as its own"),
        "{}",
        login.stderr
    );
}
