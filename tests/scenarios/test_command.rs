//! `kharonctl test`: one healthy cluster behind a real jump host and one whose jump host is
//! down. The command must name the broken hop in its table and exit non-zero.

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{inventory, kharonctl, sshd};

use crate::jumphost::{Lab, LabOptions, TARGET, TlsServer};

#[test]
fn test_checks_each_cluster_through_its_tunnel_and_names_the_broken_hop() {
    let lab = Lab::new(LabOptions::default());
    let tls = TlsServer::start(lab.env.path());
    // A second jump host that nobody listens for.
    let dead_port = kharon_e2e::free_port();
    let mut config = std::fs::read_to_string(&lab.ssh_config).unwrap();
    config.push_str(&sshd::host_block("hop-dead", dead_port, &sshd::current_user(), &lab.key, &[]));
    std::fs::write(&lab.ssh_config, config).unwrap();

    let mut healthy = inventory::routed("c-ok", &lab.jumphost(), "c1.example");
    healthy["dynamicFacts"]["openshiftApiURL"] = format!("https://{TARGET}:{}", tls.port).into();
    let broken = inventory::routed("c-broken", "hop-dead", "c2.example");
    let inv = lab.env.write("inventory.json", &inventory::to_json(&[healthy, broken]));
    let agent = lab.agent.socket().display().to_string();
    let _daemon = Kharond::start_with(
        &lab.env,
        &["--inventory", inv.to_str().unwrap(), "--ssh-config", lab.ssh_config.to_str().unwrap()],
        &[("SSH_AUTH_SOCK", agent.as_str())],
    );

    let agent_env = [("SSH_AUTH_SOCK", agent.as_str())];
    let out = kharonctl::run_with(&lab.env, &["test", "-o", "json"], &agent_env);
    assert_eq!(out.code, Some(1), "a broken cluster must fail the run\n{}\n{}", out.stdout, out.stderr);
    let rows = out.json();
    let rows = rows.as_array().unwrap();
    let find = |cluster: &str, check: &str| {
        rows.iter()
            .find(|r| r["cluster"] == cluster && r["check"] == check)
            .unwrap_or_else(|| panic!("no {check} row for {cluster}: {rows:?}"))
            .clone()
    };
    assert_eq!(find("c-ok", "connect")["ok"], true, "{rows:?}");
    assert_eq!(find("c-ok", "https /version")["ok"], true, "{rows:?}");
    assert_eq!(find("c-ok", "connect")["path"], lab.jumphost());
    let broken = find("c-broken", "connect");
    assert_eq!(broken["ok"], false);
    assert!(broken["error"].as_str().unwrap().contains("hop-dead"), "{broken}");
    assert!(rows.iter().all(|r| !(r["cluster"] == "c-broken" && r["check"] == "https /version")));
    assert_eq!(find("(local)", "agent")["ok"], true);

    // The table for people names the broken hop too; one cluster alone can pass.
    let table = kharonctl::run_with(&lab.env, &["test"], &agent_env);
    assert!(table.stdout.contains("FAILED") && table.stdout.contains("hop-dead"), "{}", table.stdout);
    let only_ok = kharonctl::run_with(&lab.env, &["test", "c-ok"], &agent_env);
    assert_eq!(only_ok.code, Some(0), "{}\n{}", only_ok.stdout, only_ok.stderr);
    let unknown = kharonctl::run_with(&lab.env, &["test", "c-nope"], &agent_env);
    assert_eq!(unknown.code, Some(1));
    assert!(unknown.stderr.contains("c-nope"), "{}", unknown.stderr);
}
