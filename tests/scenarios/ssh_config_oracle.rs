//! Real OpenSSH as the oracle for kharond's ssh_config resolution: for every case in
//! `tests/fixtures/ssh_config/` (see its README), kharond runs on the config with one cluster
//! per jump host, and every hop of every chain it resolved (`kharonctl status -o json`,
//! `hop_details`) must equal what `ssh -G` prints for that hop, field by field: user, host name,
//! port, identity files and ProxyCommand. The chain itself is followed as ssh follows it: a
//! `ProxyJump a,b` becomes `ssh -J a -l/-p … b`, a `ProxyCommand ssh -W %h:%p x` a hop `x`.
//!
//! `ssh -G` prints IdentityFile as written; `~/` is expanded to the test's HOME on its side
//! (kharond's are absolute). Nothing else is normalised.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory, kharonctl};

/// One hop as both sides describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hop {
    alias: String,
    user: String,
    host: String,
    port: String,
    identity_files: Vec<String>,
    proxy_command: String,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/ssh_config")
}

/// The name `Match localuser` and `%u` see: ssh takes it from the password database.
fn local_user() -> String {
    let out = Command::new("id").arg("-un").output().expect("run id -un");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Copies a case into `~/.ssh/`, filling in `@USER@`; returns the jump hosts it names.
fn install(case: &Path, ssh_dir: &Path, user: &str) -> Vec<String> {
    let mut jumphosts = Vec::new();
    let mut stack = vec![case.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let to = ssh_dir.join(path.strip_prefix(case).unwrap());
            if path.is_dir() {
                std::fs::create_dir_all(&to).unwrap();
                stack.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap().replace("@USER@", user);
            if path.file_name().is_some_and(|n| n == "config") {
                let line =
                    text.lines().find_map(|l| l.strip_prefix("# jumphosts:")).expect("# jumphosts: line");
                jumphosts = line.split_whitespace().map(str::to_owned).collect();
            }
            std::fs::write(&to, text).unwrap();
        }
    }
    jumphosts
}

struct Oracle<'a> {
    env: &'a Env,
    config: PathBuf,
    user: &'a str,
}

impl Oracle<'_> {
    /// `ssh -G` for `alias`, with the command-line options ssh would give that hop.
    fn ssh_g(
        &self,
        alias: &str,
        user: Option<&str>,
        port: Option<&str>,
        jumps: Option<&str>,
    ) -> BTreeMap<String, Vec<String>> {
        let mut cmd = Command::new("ssh");
        cmd.env_clear().envs(self.env.vars()).env("USER", self.user).arg("-G").arg("-F").arg(&self.config);
        if let Some(user) = user {
            cmd.args(["-l", user]);
        }
        if let Some(port) = port {
            cmd.args(["-p", port]);
        }
        if let Some(jumps) = jumps {
            cmd.args(["-J", jumps]);
        }
        let out = cmd.arg(alias).output().expect("run ssh -G");
        assert!(out.status.success(), "ssh -G {alias}: {}", String::from_utf8_lossy(&out.stderr));
        let mut options: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some((key, value)) = line.split_once(' ') {
                options.entry(key.to_owned()).or_default().push(value.to_owned());
            }
        }
        options
    }

    /// The hops ssh would use to reach `alias`, first to last.
    fn chain(
        &self,
        alias: &str,
        user: Option<&str>,
        port: Option<&str>,
        jumps: Option<&str>,
        depth: usize,
    ) -> Vec<Hop> {
        assert!(depth < 10, "chain too deep at {alias}");
        let g = self.ssh_g(alias, user, port, jumps);
        let one = |key: &str| g.get(key).and_then(|v| v.first()).cloned().unwrap_or_default();
        let mut hops = Vec::new();
        let mut proxy_command = String::new();
        let jump = one("proxyjump");
        let command = one("proxycommand");
        if !jump.is_empty() && jump != "none" {
            let entries: Vec<&str> = jump.split(',').collect();
            let (last, before) = entries.split_last().unwrap();
            let (user, rest) = match last.split_once('@') {
                Some((u, r)) => (Some(u), r),
                None => (None, *last),
            };
            let (host, port) = match rest.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            };
            let before = (!before.is_empty()).then(|| before.join(","));
            hops = self.chain(host, user, port, before.as_deref(), depth + 1);
        } else if !command.is_empty() && command != "none" {
            match ssh_w_destination(&command) {
                Some(dest) => hops = self.chain(&dest, None, None, None, depth + 1),
                None => {
                    proxy_command = command
                        .replace("%%", "\u{0}")
                        .replace("%h", &one("hostname"))
                        .replace("%p", &one("port"))
                        .replace("%r", &one("user"))
                        .replace("%n", alias)
                        .replace('\u{0}', "%");
                }
            }
        }
        let home = self.env.home().display().to_string();
        let identity_files = g
            .get("identityfile")
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|f| match f.strip_prefix("~/") {
                Some(rest) => format!("{home}/{rest}"),
                None => f,
            })
            .collect();
        hops.push(Hop {
            alias: alias.to_owned(),
            user: one("user"),
            host: one("hostname"),
            port: one("port"),
            identity_files,
            proxy_command,
        });
        hops
    }
}

/// `ssh [-q] -W %h:%p DEST` or `ssh DEST -W %h:%p`: the corpus's two native forms.
fn ssh_w_destination(command: &str) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    if words.first() != Some(&"ssh") || !words.contains(&"-W") {
        return None;
    }
    let mut rest = words[1..].iter();
    let mut dest = None;
    while let Some(word) = rest.next() {
        match *word {
            "-W" => {
                rest.next();
            }
            w if w.starts_with('-') => {}
            w => dest = Some(w.to_owned()),
        }
    }
    dest
}

/// kharond's hops for one chain entry of `kharonctl status -o json`.
fn kharond_hops(chain: &serde_json::Value) -> Vec<Hop> {
    let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    chain["hop_details"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| Hop {
            alias: s(&h["alias"]),
            user: s(&h["user"]),
            host: s(&h["host"]),
            port: h["port"].to_string(),
            identity_files: h["identity_files"].as_array().into_iter().flatten().map(s).collect(),
            proxy_command: s(&h["proxy_command"]),
        })
        .collect()
}

/// Field-by-field differences between the two chains.
fn diff(kharond: &[Hop], ssh: &[Hop]) -> Vec<String> {
    let mut out = Vec::new();
    if kharond.len() != ssh.len() {
        let names = |hops: &[Hop]| hops.iter().map(|h| h.alias.clone()).collect::<Vec<_>>().join(" -> ");
        out.push(format!("  hops: kharond {} | ssh {}", names(kharond), names(ssh)));
    }
    for (i, (k, s)) in kharond.iter().zip(ssh).enumerate() {
        let fields: [(&str, String, String); 6] = [
            ("alias", k.alias.clone(), s.alias.clone()),
            ("user", k.user.clone(), s.user.clone()),
            ("hostname", k.host.clone(), s.host.clone()),
            ("port", k.port.clone(), s.port.clone()),
            ("identityfile", format!("{:?}", k.identity_files), format!("{:?}", s.identity_files)),
            ("proxycommand", k.proxy_command.clone(), s.proxy_command.clone()),
        ];
        for (field, kv, sv) in fields {
            if kv != sv {
                out.push(format!(
                    "  hop {} ({}) {field}:\n    kharond {kv}\n    ssh -G  {sv}",
                    i + 1,
                    s.alias
                ));
            }
        }
    }
    out
}

#[test]
fn kharond_resolves_every_jump_host_of_the_corpus_as_ssh_dash_g_does() {
    let user = local_user();
    let mut cases: Vec<PathBuf> =
        std::fs::read_dir(fixtures()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    cases.sort();
    assert!(cases.len() >= 8, "the corpus is {cases:?}");
    let mut mismatches = Vec::new();
    let mut compared = 0;
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let env = Env::new();
        let ssh_dir = env.home().join(".ssh");
        let jumphosts = install(case, &ssh_dir, &user);
        assert!(!jumphosts.is_empty(), "{name}: no jump hosts");
        let clusters: Vec<_> = jumphosts
            .iter()
            .enumerate()
            .map(|(i, jh)| inventory::routed(&format!("c{i}"), jh, &format!("j{i}.example")))
            .collect();
        let inv = env.write("inventory.json", &inventory::to_json(&clusters));
        let config = ssh_dir.join("config");
        let daemon = Kharond::start_with(
            &env,
            &["--inventory", inv.to_str().unwrap(), "--ssh-config", config.to_str().unwrap()],
            &[("USER", user.as_str())],
        );
        let status = kharonctl::run(&env, &["status", "-o", "json"]).json();
        let oracle = Oracle { env: &env, config: config.clone(), user: &user };
        for jumphost in &jumphosts {
            let chain = status["chains"]
                .as_array()
                .and_then(|chains| chains.iter().find(|c| c["jumphost"] == jumphost.as_str()))
                .unwrap_or_else(|| {
                    panic!("{name}: no chain for {jumphost} in status:\n{status}\n{}", daemon.log())
                });
            assert_eq!(chain["config_error"], "", "{name}: {jumphost} refused: {chain}");
            let ssh = oracle.chain(jumphost, None, None, None, 0);
            let differences = diff(&kharond_hops(chain), &ssh);
            if !differences.is_empty() {
                mismatches.push(format!("{name}: jump host {jumphost}:\n{}", differences.join("\n")));
            }
            compared += ssh.len();
        }
    }
    assert!(mismatches.is_empty(), "kharond and ssh -G disagree:\n{}", mismatches.join("\n"));
    assert!(compared >= 30, "only {compared} hops compared");
}
