//! Behaviour of the whole module through its public API: each test writes a config (and its
//! Includes) under a temporary HOME, loads it and asserts on hops or on the exact message.
//! Expected behaviour was checked against OpenSSH 9.2 `ssh -G -F file NAME` where it applies.

use std::path::PathBuf;
use std::time::Duration;

use tempfile::TempDir;

use super::*;

/// A temporary HOME with `files` (paths relative to HOME) written into it.
fn home(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn env(name: &str) -> Option<String> {
    match name {
        "USER" => Some("alice".into()),
        "KEYS" => Some("/srv/keys".into()),
        "AGENT_SOCK" => Some("/run/agent.sock".into()),
        _ => None,
    }
}

fn load(home: &TempDir) -> Result<SshConfig, Error> {
    SshConfig::load(&config_path(home), None, home.path(), &env)
}

fn config_path(home: &TempDir) -> PathBuf {
    home.path().join(".ssh/config")
}

/// Loads a single config file and resolves `jumphost`.
fn chain_of(config: &str, jumphost: &str) -> Result<Chain, Error> {
    let home = home(&[(".ssh/config", config)]);
    load(&home)?.chain(jumphost)
}

/// "alias=user@host:port" per hop, first to last.
fn hops(chain: &Chain) -> Vec<String> {
    chain.hops.iter().map(|h| format!("{}={}", h.alias, h.display())).collect()
}

fn load_error(home: &TempDir) -> String {
    load(home).unwrap_err().to_string()
}

/// `$HOME/.ssh/config:LINE`, the way errors print it.
fn at(home: &TempDir, line: usize) -> String {
    format!("{}:{line}", config_path(home).display())
}

// ---- chains -------------------------------------------------------------------------------

#[test]
fn one_hop_takes_host_name_user_and_port_from_its_block() {
    let chain =
        chain_of("Host bastion\n  HostName 192.0.2.10\n  User ops\n  Port 2222\n", "bastion").unwrap();
    assert_eq!(chain.jumphost, "bastion");
    assert_eq!(hops(&chain), ["bastion=ops@192.0.2.10:2222"]);
    assert_eq!(chain.hops[0].transport, Transport::Tcp);
}

#[test]
fn defaults_apply_when_the_config_says_nothing_else() {
    let home = home(&[(".ssh/config", "Host bastion\n  HostName b.example\n")]);
    let chain = load(&home).unwrap().chain("bastion").unwrap();
    let hop = &chain.hops[0];
    let ssh = home.path().join(".ssh");
    assert_eq!(hop.user, "alice", "User defaults to $USER");
    assert_eq!(hop.port, 22);
    assert_eq!(hop.identity_files[0], ssh.join("id_rsa"));
    assert_eq!(hop.identity_files.len(), 7);
    assert!(!hop.identities_only);
    assert_eq!(hop.identity_agent, IdentityAgent::Env);
    assert!(hop.certificate_files.is_empty());
    assert_eq!(hop.server_alive_interval, Duration::from_secs(15));
    assert_eq!(hop.server_alive_count_max, 3);
    assert_eq!(hop.connect_timeout, None);
    assert_eq!(hop.strict_host_key_checking, StrictHostKeyChecking::Yes);
    assert_eq!(hop.user_known_hosts_files, [ssh.join("known_hosts"), ssh.join("known_hosts2")]);
    assert_eq!(
        hop.global_known_hosts_files,
        [PathBuf::from("/etc/ssh/ssh_known_hosts"), PathBuf::from("/etc/ssh/ssh_known_hosts2")]
    );
    assert_eq!(hop.host_key_alias, None);
    assert_eq!(hop.origin, Some(Origin { file: config_path(&home), line: 1 }));
}

#[test]
fn user_falls_back_to_logname_then_root() {
    let home = home(&[(".ssh/config", "Host b\n")]);
    let logname = |n: &str| (n == "LOGNAME").then(|| "bob".to_owned());
    let config = SshConfig::load(&config_path(&home), None, home.path(), &logname).unwrap();
    assert_eq!(config.chain("b").unwrap().hops[0].user, "bob");
    let config = SshConfig::load(&config_path(&home), None, home.path(), &|_| None).unwrap();
    assert_eq!(config.chain("b").unwrap().hops[0].user, "root");
}

#[test]
fn proxy_jump_chains_two_and_three_hops_recursively() {
    let config = "\
Host cluster1
  HostName 10.0.0.5
  ProxyJump inner
Host inner
  HostName 10.0.0.1
  User in
  ProxyJump outer
Host outer
  HostName outer.example
  Port 2200
";
    let chain = chain_of(config, "inner").unwrap();
    assert_eq!(hops(&chain), ["outer=alice@outer.example:2200", "inner=in@10.0.0.1:22"]);
    let chain = chain_of(config, "cluster1").unwrap();
    assert_eq!(
        hops(&chain),
        ["outer=alice@outer.example:2200", "inner=in@10.0.0.1:22", "cluster1=alice@10.0.0.5:22"]
    );
}

#[test]
fn proxy_jump_list_runs_first_to_last_like_ssh_dash_j() {
    // ssh turns `ProxyJump a,b` into `ssh -J a -W .. b`: `a` keeps its own ProxyJump, `b`'s own
    // ProxyJump is overridden by the list.
    let config = "\
Host target
  ProxyJump a,b
Host a
  HostName a.example
  ProxyJump front
Host b
  HostName b.example
  ProxyJump elsewhere
Host front
  HostName front.example
";
    let chain = chain_of(config, "target").unwrap();
    assert_eq!(
        hops(&chain),
        [
            "front=alice@front.example:22",
            "a=alice@a.example:22",
            "b=alice@b.example:22",
            "target=alice@target:22"
        ]
    );
}

#[test]
fn proxy_jump_user_and_port_override_the_jump_hosts_block() {
    let config = "\
Host t1
  ProxyJump bob@jump:2200
Host t2
  ProxyJump ssh://carol@jump:2201,ssh://[2001:db8::1]:2022
Host jump
  HostName jump.example
  User ops
  Port 22
";
    assert_eq!(hops(&chain_of(config, "t1").unwrap()), ["jump=bob@jump.example:2200", "t1=alice@t1:22"]);
    assert_eq!(
        hops(&chain_of(config, "t2").unwrap()),
        ["jump=carol@jump.example:2201", "2001:db8::1=alice@2001:db8::1:2022", "t2=alice@t2:22"]
    );
}

#[test]
fn proxy_jump_none_in_an_earlier_block_wins_over_a_later_default() {
    let config = "\
Host direct
  ProxyJump none
Host !bastion *
  ProxyJump bastion
Host bastion
";
    assert_eq!(hops(&chain_of(config, "direct").unwrap()), ["direct=alice@direct:22"]);
    let host = "Host other\n".to_owned() + config;
    assert_eq!(
        hops(&chain_of(&host, "other").unwrap()),
        ["bastion=alice@bastion:22", "other=alice@other:22"]
    );
}

#[test]
fn proxy_command_ssh_w_in_both_spellings_becomes_a_native_hop() {
    let config = "\
Host t1
  ProxyCommand ssh -W %h:%p -- j1
Host t2
  ProxyCommand ssh -q -W '[%h]:%p' t1
Host j1
  HostName 192.0.2.1
";
    assert_eq!(hops(&chain_of(config, "t1").unwrap()), ["j1=alice@192.0.2.1:22", "t1=alice@t1:22"]);
    let chain = chain_of(config, "t2").unwrap();
    assert_eq!(hops(&chain), ["j1=alice@192.0.2.1:22", "t1=alice@t1:22", "t2=alice@t2:22"]);
    assert!(chain.hops.iter().all(|h| h.transport == Transport::Tcp));
}

#[test]
fn other_proxy_command_is_the_first_hops_command_with_tokens_expanded() {
    let config = "\
Host corp
  HostName Corp.Example
  User ops
  Port 2022
  ProxyCommand nc -X 5 -x 'socks:1080' %h %p # %r@%n 100%%
";
    let chain = chain_of(config, "corp").unwrap();
    assert_eq!(
        chain.hops[0].transport,
        Transport::Command("nc -X 5 -x 'socks:1080' corp.example 2022 # ops@corp 100%".into())
    );
}

#[test]
fn a_later_list_entrys_own_proxy_command_is_ignored_like_ssh() {
    // Only the first hop can use a ProxyCommand. A later list entry is reached through the
    // previous one (`ssh -J a -W .. b`), and ssh ignores b's ProxyCommand; so do we, instead of
    // refusing a config that works with ssh. The first entry keeps its command.
    let config = "\
Host target
  ProxyJump a,b
Host a
  ProxyCommand connect-proxy %h %p
Host b
  ProxyCommand nc -x socks:1080 %h %p
";
    let chain = chain_of(config, "target").unwrap();
    assert_eq!(hops(&chain), ["a=alice@a:22", "b=alice@b:22", "target=alice@target:22"]);
    assert_eq!(chain.hops[0].transport, Transport::Command("connect-proxy a 22".into()));
    assert_eq!(chain.hops[1].transport, Transport::Tcp);
}

#[test]
fn proxy_command_none_and_first_wins_between_proxy_jump_and_proxy_command() {
    // Measured with ssh -G: the first of ProxyJump/ProxyCommand wins, `ProxyCommand none`
    // included, but `ProxyJump none` does not hide a later ProxyCommand.
    let config = "\
Host pc-first
  ProxyCommand ssh -W %h:%p x
  ProxyJump y
Host none-first
  ProxyCommand none
  ProxyJump y
Host jump-none
  ProxyJump none
  ProxyCommand ssh -W %h:%p z
";
    assert_eq!(hops(&chain_of(config, "pc-first").unwrap())[0], "x=alice@x:22");
    assert_eq!(hops(&chain_of(config, "none-first").unwrap()), ["none-first=alice@none-first:22"]);
    assert_eq!(hops(&chain_of(config, "jump-none").unwrap())[0], "z=alice@z:22");
}

// ---- matching -----------------------------------------------------------------------------

#[test]
fn negated_patterns_exclude_a_host_from_a_block() {
    let config = "\
Host *.prod !db?.prod
  User prod
Host db1.prod web.prod
Host *
  User fallback
";
    assert_eq!(chain_of(config, "web.prod").unwrap().hops[0].user, "prod");
    assert_eq!(chain_of(config, "db1.prod").unwrap().hops[0].user, "fallback");
}

#[test]
fn host_patterns_match_case_sensitively_and_the_host_name_is_lowercased() {
    // OpenSSH 9.2: `ssh -G FOO` does not match `Host foo`; `HostName Mixed.Example` → mixed.example.
    let config = "Host Bastion\n  HostName Mixed.Example\nHost bastion\n  HostName lower.example\n";
    assert_eq!(hops(&chain_of(config, "Bastion").unwrap()), ["Bastion=alice@mixed.example:22"]);
    assert_eq!(hops(&chain_of(config, "bastion").unwrap()), ["bastion=alice@lower.example:22"]);
    let hop = chain_of("Host bastion\n  Port 2\n", "BASTION").unwrap().hops.remove(0);
    assert_eq!((hop.port, hop.suggestion.as_deref()), (22, Some("bastion")));
}

#[test]
fn first_obtained_value_wins_and_identity_files_accumulate() {
    let config = "\
User early
Host bastion
  User ignored
  Port 2200
  IdentityFile ~/.ssh/bastion
Host *
  Port 22
  IdentityFile ~/.ssh/default
  IdentityFile ~/.ssh/bastion
  IdentitiesOnly yes
";
    let home = home(&[(".ssh/config", config)]);
    let hop = &load(&home).unwrap().chain("bastion").unwrap().hops[0];
    assert_eq!(hop.user, "early");
    assert_eq!(hop.port, 2200);
    assert!(hop.identities_only);
    let ssh = home.path().join(".ssh");
    assert_eq!(hop.identity_files, [ssh.join("bastion"), ssh.join("default")]);
}

/// Apple's `UseKeychain` (first value wins, like any flag) reaches the hop; a value ssh would
/// refuse is refused with its line; `AddKeysToAgent` is accepted and changes nothing.
#[test]
fn use_keychain_applies_first_value_and_a_bad_value_names_its_line() {
    let config = "Host bastion\n  UseKeychain yes\n  AddKeysToAgent confirm\nHost *\n  UseKeychain no\n";
    assert!(chain_of(config, "bastion").unwrap().hops[0].use_keychain);
    assert!(!chain_of(config, "other").unwrap().hops[0].use_keychain);
    let home = home(&[(".ssh/config", "Host *\n  UseKeychain sometimes\n")]);
    let err = load_error(&home);
    assert!(err.contains(&at(&home, 2)) && err.contains("UseKeychain: expected yes or no"), "{err}");
}

/// What a person may be asked when a hop wants more than a key (prompt.rs) follows ssh_config(5):
/// `BatchMode yes` with its line, the methods `KbdInteractiveAuthentication` (and its old name),
/// `PasswordAuthentication` and `NumberOfPasswordPrompts 0` leave, in `PreferredAuthentications`'
/// order, and how often an answer may be refused; first value wins, as for any option.
#[test]
fn what_a_person_may_be_asked_follows_the_ssh_config() {
    let config = "Host batch\n  BatchMode yes\nHost nokbd\n  KbdInteractiveAuthentication no\n\
                  Host oldname\n  ChallengeResponseAuthentication no\n  PasswordAuthentication no\n\
                  Host pref\n  PreferredAuthentications password,publickey,keyboard-interactive,password\n\
                  NumberOfPasswordPrompts 1\nHost zero\n  NumberOfPasswordPrompts 0\nHost *\n  BatchMode no\n";
    let asking = |alias: &str| chain_of(config, alias).unwrap().hops[0].asking.clone();
    assert_eq!(asking("other"), Asking::default());
    assert_eq!(asking("other").methods, ["keyboard-interactive", "password"]);
    assert_eq!(asking("other").attempts, 3);
    let batch = asking("batch").batch_mode.expect("BatchMode yes");
    assert_eq!(batch.line, 2);
    assert_eq!(asking("nokbd").methods, ["password"]);
    assert!(asking("oldname").methods.is_empty());
    assert_eq!(asking("pref").methods, ["password", "keyboard-interactive"]);
    assert_eq!(asking("pref").attempts, 1);
    assert!(asking("zero").methods.is_empty());
    let home = home(&[(".ssh/config", "Host *\n  NumberOfPasswordPrompts many\n")]);
    let err = load_error(&home);
    assert!(err.contains(&at(&home, 2)) && err.contains("NumberOfPasswordPrompts: bad number"), "{err}");
}

#[test]
fn keywords_ignore_case_and_accept_equals_and_quotes() {
    let config = "HOST bastion\n  hostname=b.example\n  PORT = 2200\n  user \"ops team\"\n";
    assert_eq!(hops(&chain_of(config, "bastion").unwrap()), ["bastion=ops team@b.example:2200"]);
}

#[test]
fn origin_names_the_first_specific_block() {
    let home = home(&[(".ssh/config", "Host *\n  User x\n\nHost bastion\n  Port 1\n")]);
    let hop = &load(&home).unwrap().chain("bastion").unwrap().hops[0];
    assert_eq!(hop.origin.as_ref().map(ToString::to_string), Some(at(&home, 4)));
}

// ---- Include ------------------------------------------------------------------------------

#[test]
fn include_globs_relative_to_dot_ssh_in_sorted_order() {
    let home = home(&[
        (".ssh/config", "Include conf.d/*.conf\nHost *\n  User late\n"),
        (".ssh/conf.d/20-b.conf", "Host bastion\n  User from-b\n"),
        (".ssh/conf.d/10-a.conf", "Host bastion\n  HostName a.example\n  User from-a\n"),
        (".ssh/conf.d/.10-a.conf.swp", "garbage line\n"),
        (".ssh/conf.d/notes.txt", "garbage line\n"),
    ]);
    let config = load(&home).unwrap();
    assert_eq!(hops(&config.chain("bastion").unwrap()), ["bastion=from-a@a.example:22"]);
    let ssh = home.path().join(".ssh");
    assert_eq!(
        config.files(),
        [ssh.join("config"), ssh.join("conf.d/10-a.conf"), ssh.join("conf.d/20-b.conf")]
    );
    assert_eq!(config.hosts(), ["bastion"]);
}

#[test]
fn include_inside_a_host_block_follows_openssh() {
    // As `ssh -G` shows: the included file's top lines belong to the including block, its own
    // Host lines work when that block matched, and nothing in it applies when it did not.
    let home = home(&[
        (
            ".ssh/config",
            "Host inc\n  Include ~/.ssh/inc1\n  User after-include\nHost other\n  Include inc1\n",
        ),
        (".ssh/inc1", "Port 1111\nHost inc\n  User from-inc\nHost *\n  HostName h-%h\n"),
    ]);
    let config = load(&home).unwrap();
    assert_eq!(hops(&config.chain("inc").unwrap()), ["inc=from-inc@h-inc:1111"]);
    assert_eq!(hops(&config.chain("other").unwrap()), ["other=alice@h-other:1111"]);
    assert_eq!(config.files().len(), 2, "a file included twice is read once");
}

#[test]
fn include_cycle_is_an_error_at_the_include_line() {
    let home = home(&[(".ssh/config", "Include a\n"), (".ssh/a", "Host x\n  Include config\n")]);
    let err = load_error(&home);
    let ssh = home.path().join(".ssh").canonicalize().unwrap();
    assert_eq!(
        err,
        format!(
            "{}:2: Include cycle: {} -> {} -> {}; remove one of these Include lines",
            home.path().join(".ssh/a").display(),
            ssh.join("config").display(),
            ssh.join("a").display(),
            ssh.join("config").display()
        )
    );
}

#[test]
fn bad_line_in_an_included_file_names_that_file() {
    let home = home(&[
        (".ssh/config", "Host a\n  Include extra.conf\n"),
        (".ssh/extra.conf", "\n\nMatch all host x\n"),
    ]);
    assert_eq!(
        load_error(&home),
        format!(
            "{}:3: Match: 'all' cannot be combined with other Match criteria",
            home.path().join(".ssh/extra.conf").display()
        )
    );
}

#[test]
fn missing_config_file_is_an_empty_config() {
    let home = home(&[]);
    let config = load(&home).unwrap();
    assert!(config.files().is_empty());
    assert!(config.hosts().is_empty());
    // As `ssh bastion` with no config: OpenSSH's defaults.
    assert_eq!(hops(&config.chain("bastion").unwrap()), ["bastion=alice@bastion:22"]);
}

// ---- expansion ----------------------------------------------------------------------------

#[test]
fn tokens_and_tilde_expand_in_path_options() {
    let config = "\
Host bastion
  HostName %h.example.com
  User ops
  Port 2222
  IdentityFile ~/.ssh/%h_%p_%r_%n_%u
  IdentityFile %d/keys/100%%
  CertificateFile keys/%k-cert.pub
  HostKeyAlias bastion-key
  UserKnownHostsFile ~/.ssh/kh_%n /etc/kh
  GlobalKnownHostsFile ~/global none-is-only-special-alone
";
    let home = home(&[(".ssh/config", config)]);
    let hop = &load(&home).unwrap().chain("bastion").unwrap().hops[0];
    let h = home.path();
    assert_eq!(hop.host_name, "bastion.example.com");
    assert_eq!(
        hop.identity_files,
        [h.join(".ssh/bastion.example.com_2222_ops_bastion_alice"), h.join("keys/100%")]
    );
    assert_eq!(hop.certificate_files, [h.join("keys/bastion-key-cert.pub")], "relative paths are under HOME");
    assert_eq!(hop.user_known_hosts_files, [h.join(".ssh/kh_bastion"), PathBuf::from("/etc/kh")]);
    assert_eq!(hop.global_known_hosts_files, [h.join("global"), h.join("none-is-only-special-alone")]);
    assert_eq!(hop.known_hosts_name(), "bastion-key");
}

#[test]
fn environment_variables_expand_in_paths_and_identity_agent() {
    let config = "\
Host a
  IdentityFile ${KEYS}/id_a
  IdentityAgent ${AGENT_SOCK}
Host b
  IdentityAgent $AGENT_SOCK
Host c
  IdentityAgent none
Host d
  IdentityAgent SSH_AUTH_SOCK
Host e
  IdentityAgent ~/agent.sock
";
    let home = home(&[(".ssh/config", config)]);
    let config = load(&home).unwrap();
    let hop = |name: &str| config.chain(name).unwrap().hops.remove(0);
    assert_eq!(hop("a").identity_files, [PathBuf::from("/srv/keys/id_a")]);
    assert_eq!(hop("a").identity_agent, IdentityAgent::Path("/run/agent.sock".into()));
    assert_eq!(hop("b").identity_agent, IdentityAgent::Path("/run/agent.sock".into()));
    assert_eq!(hop("c").identity_agent, IdentityAgent::None);
    assert_eq!(hop("d").identity_agent, IdentityAgent::Env);
    assert_eq!(hop("e").identity_agent, IdentityAgent::Path(home.path().join("agent.sock")));
}

#[test]
fn an_unset_variable_is_an_error_for_the_hop_that_uses_it() {
    let home = home(&[(".ssh/config", "Host fine\nHost broken\n  IdentityFile ${NOT_SET}/id\n")]);
    let config = load(&home).expect("only the hop that uses it fails");
    assert!(config.chain("fine").is_ok());
    assert_eq!(
        config.chain("broken").unwrap_err().to_string(),
        format!(
            "{}: IdentityFile for broken: ${{NOT_SET}} is not set in kharond's environment",
            at(&home, 3)
        )
    );
}

#[test]
fn an_unknown_token_is_an_error_at_load() {
    let home = home(&[(".ssh/config", "Host a\n  HostName %h.%p\n  IdentityFile ~/.ssh/%C\n")]);
    assert_eq!(
        load_error(&home),
        format!(
            "{}: HostName: unknown token %p (this option accepts %%, %h)\n{}: IdentityFile: token %C is not supported by kharon",
            at(&home, 2),
            at(&home, 3)
        )
    );
}

#[test]
fn times_and_host_key_checking_values_are_parsed() {
    let config = "\
Host a
  ServerAliveInterval 1m
  ServerAliveCountMax 5
  ConnectTimeout 10
  StrictHostKeyChecking accept-new
  UserKnownHostsFile none
Host b
  ServerAliveInterval 0
  ConnectTimeout none
  StrictHostKeyChecking off
Host c
  StrictHostKeyChecking ask
";
    let a = &chain_of(config, "a").unwrap().hops[0];
    assert_eq!(a.server_alive_interval, Duration::from_secs(60));
    assert_eq!(a.server_alive_count_max, 5);
    assert_eq!(a.connect_timeout, Some(Duration::from_secs(10)));
    assert_eq!(a.strict_host_key_checking, StrictHostKeyChecking::AcceptNew);
    assert!(a.user_known_hosts_files.is_empty());
    let b = &chain_of(config, "b").unwrap().hops[0];
    assert_eq!(b.server_alive_interval, Duration::ZERO, "0 turns probes off");
    assert_eq!(b.connect_timeout, None);
    assert_eq!(b.strict_host_key_checking, StrictHostKeyChecking::No);
    assert_eq!(chain_of(config, "c").unwrap().hops[0].strict_host_key_checking, StrictHostKeyChecking::Yes);
}

/// OpenSSH 9.2 keeps the first size and the first interval separately (readconf.c, `oRekeyLimit`):
/// a first line without an interval, or with `none`, leaves the interval to a later line.
#[test]
fn rekey_limit_keeps_its_first_size_and_its_first_interval() {
    let config = "\
Host a
  RekeyLimit 64M
Host a b
  RekeyLimit 1G 10m
Host c
  RekeyLimit default none
Host d
  RekeyLimit 0 0
";
    let limit = |alias| chain_of(config, alias).unwrap().hops[0].rekey_limit;
    assert_eq!(limit("a"), RekeyLimit { data: Some(64 << 20), interval: Some(Duration::from_secs(600)) });
    assert_eq!(limit("b"), RekeyLimit { data: Some(1 << 30), interval: Some(Duration::from_secs(600)) });
    assert_eq!(limit("c"), RekeyLimit::default(), "default none: the cipher's size, no interval");
    assert_eq!(limit("d"), RekeyLimit::default(), "0 is default, and an interval of 0 is none");
    assert_eq!(limit("e"), RekeyLimit::default(), "unset");
    let too_small = chain_of("Host a\n  RekeyLimit 8\n", "a").unwrap_err().to_string();
    assert!(too_small.contains("is too small"), "{too_small}");
}

// ---- source addresses ----------------------------------------------------------

#[test]
fn address_family_and_bind_options_apply_first_value_wins() {
    let config = "\
Host a
  AddressFamily INET
  BindInterface eth0
Host b
  BindAddress 127.0.0.2
  BindInterface lo
Host *
  AddressFamily inet6
  BindAddress 10.0.0.1
";
    let home = home(&[(".ssh/config", config)]);
    let config = load(&home).unwrap();
    let a = &config.chain("a").unwrap().hops[0];
    assert_eq!(a.address_family, AddressFamily::Inet);
    // BindAddress wins over BindInterface wherever it was set, as in ssh_create_socket.
    assert_eq!(
        a.bind.as_ref().map(|(b, o)| (b.clone(), o.line)),
        Some((Bind::Address("10.0.0.1".into()), 9))
    );
    let b = &config.chain("b").unwrap().hops[0];
    assert_eq!(b.address_family, AddressFamily::Inet6);
    assert_eq!(
        b.bind.as_ref().map(|(b, o)| (b.clone(), o.line)),
        Some((Bind::Address("127.0.0.2".into()), 5))
    );
    let c = &chain_of("Host c\n  BindInterface lo\n", "c").unwrap().hops[0];
    assert_eq!(c.bind.as_ref().map(|(b, _)| b.clone()), Some(Bind::Interface("lo".into())));
    assert_eq!(c.address_family, AddressFamily::Any);
}

#[test]
fn a_bad_address_family_names_the_values() {
    let home = home(&[(".ssh/config", "Host a\n  AddressFamily ipv4\n")]);
    assert_eq!(
        load_error(&home),
        format!("{}: AddressFamily: bad value \"ipv4\" (any, inet or inet6)", at(&home, 2))
    );
}

#[test]
fn ca_signature_algorithms_restrict_what_a_host_ca_may_sign_with() {
    let a = algorithms_of("Host a\n  CASignatureAlgorithms ssh-ed25519,sk-ssh-ed25519@openssh.com\n");
    assert_eq!(a.ca_signature("ssh-ed25519"), Ok(()));
    assert_eq!(a.ca_signature("rsa-sha2-512"), Err("ssh-ed25519".to_owned()));
    // OpenSSH's default: no SHA-1 RSA.
    let default = algorithms_of("Host a\n");
    assert_eq!(default.ca_signature("rsa-sha2-256"), Ok(()));
    assert!(default.ca_signature("ssh-rsa").is_err());
    assert_eq!(algorithms_of("Host a\n  CASignatureAlgorithms +ssh-rsa\n").ca_signature("ssh-rsa"), Ok(()));
    let typo = home(&[(".ssh/config", "Host a\n  CASignatureAlgorithms ssh-ed25591\n")]);
    assert_eq!(
        load_error(&typo),
        format!(
            "{}: CASignatureAlgorithms: unknown CA signature algorithm \"ssh-ed25591\" (`ssh -Q sig` lists them)",
            at(&typo, 2)
        )
    );
}

// ---- validation ---------------------------------------------------------------------------

#[test]
fn unsupported_option_is_refused_naming_it_even_in_an_unused_block() {
    let home = home(&[(".ssh/config", "Host old-router\n  KnownHostsCommand /usr/bin/keys %H\n")]);
    assert_eq!(
        load_error(&home),
        format!(
            "{}: KnownHostsCommand /usr/bin/keys %H is not supported: kharon checks host keys only against \
             known_hosts files; remove it, or name KnownHostsCommand in IgnoreUnknown (before this line) to have \
             kharon skip it",
            at(&home, 2)
        )
    );
}

/// Fedora 40's `/etc/crypto-policies/back-ends/openssh.config` (DEFAULT policy), which its
/// `/etc/ssh/ssh_config.d/50-redhat.conf` includes: every algorithm ssh has, Hostbased lists and
/// RequiredRSASize.
const FEDORA_POLICY: &str = "\
Ciphers aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes256-ctr,aes128-gcm@openssh.com,aes128-ctr
MACs hmac-sha2-256-etm@openssh.com,hmac-sha1-etm@openssh.com,umac-128-etm@openssh.com,hmac-sha2-512-etm@openssh.com,hmac-sha2-256,hmac-sha1,umac-128@openssh.com,hmac-sha2-512
GSSAPIKexAlgorithms gss-curve25519-sha256-,gss-nistp256-sha256-,gss-group14-sha256-,gss-group16-sha512-
KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521,sntrup761x25519-sha512@openssh.com,diffie-hellman-group-exchange-sha256,diffie-hellman-group14-sha256,diffie-hellman-group16-sha512,diffie-hellman-group18-sha512
HostKeyAlgorithms ecdsa-sha2-nistp256,ecdsa-sha2-nistp256-cert-v01@openssh.com,sk-ecdsa-sha2-nistp256@openssh.com,sk-ecdsa-sha2-nistp256-cert-v01@openssh.com,ecdsa-sha2-nistp384,ecdsa-sha2-nistp384-cert-v01@openssh.com,ecdsa-sha2-nistp521,ecdsa-sha2-nistp521-cert-v01@openssh.com,ssh-ed25519,ssh-ed25519-cert-v01@openssh.com,sk-ssh-ed25519@openssh.com,sk-ssh-ed25519-cert-v01@openssh.com,rsa-sha2-256,rsa-sha2-256-cert-v01@openssh.com,rsa-sha2-512,rsa-sha2-512-cert-v01@openssh.com
PubkeyAcceptedAlgorithms ecdsa-sha2-nistp256,ecdsa-sha2-nistp256-cert-v01@openssh.com,sk-ecdsa-sha2-nistp256@openssh.com,sk-ecdsa-sha2-nistp256-cert-v01@openssh.com,ecdsa-sha2-nistp384,ecdsa-sha2-nistp384-cert-v01@openssh.com,ecdsa-sha2-nistp521,ecdsa-sha2-nistp521-cert-v01@openssh.com,ssh-ed25519,ssh-ed25519-cert-v01@openssh.com,sk-ssh-ed25519@openssh.com,sk-ssh-ed25519-cert-v01@openssh.com,rsa-sha2-256,rsa-sha2-256-cert-v01@openssh.com,rsa-sha2-512,rsa-sha2-512-cert-v01@openssh.com
HostbasedAcceptedAlgorithms ecdsa-sha2-nistp256,ssh-ed25519,rsa-sha2-256,rsa-sha2-512
CASignatureAlgorithms ecdsa-sha2-nistp256,sk-ecdsa-sha2-nistp256@openssh.com,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521,ssh-ed25519,sk-ssh-ed25519@openssh.com,rsa-sha2-256,rsa-sha2-512
RequiredRSASize 2048
";

#[test]
fn a_crypto_policy_in_the_system_file_is_applied() {
    let home = home(&[
        (".ssh/config", "Host jump\n  HostName 10.0.0.1\n"),
        (
            "etc/ssh_config",
            "Include ssh_config.d/*.conf\nHost *\n  SendEnv LANG LC_*\n  GSSAPIAuthentication yes\n",
        ),
        ("etc/ssh_config.d/50-redhat.conf", "Include /CRYPTO\nHost *\n  ForwardX11Trusted yes\n"),
    ]);
    let policy = home.path().join("openssh.config");
    std::fs::write(&policy, FEDORA_POLICY).unwrap();
    let redhat = home.path().join("etc/ssh_config.d/50-redhat.conf");
    let text = std::fs::read_to_string(&redhat).unwrap().replace("/CRYPTO", &policy.display().to_string());
    std::fs::write(&redhat, text).unwrap();
    let system = home.path().join("etc/ssh_config");
    let config = SshConfig::load(&config_path(&home), Some(&system), home.path(), &env).unwrap();
    let hop = &config.chain("jump").unwrap().hops[0];
    assert_eq!(hop.required_rsa_size, 2048);
    assert_eq!(
        hop.algorithms.macs.as_deref(),
        Some(
            &[
                "hmac-sha2-256-etm@openssh.com",
                "hmac-sha1-etm@openssh.com",
                "hmac-sha2-512-etm@openssh.com",
                "hmac-sha2-256",
                "hmac-sha1",
                "hmac-sha2-512"
            ][..]
        )
    );
    let rsa = |bits: usize| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let out = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "rsa", "-b", &bits.to_string(), "-N", "", "-f"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success());
        russh::keys::load_public_key(dir.path().join("k.pub")).unwrap()
    };
    assert_eq!(hop.rsa_too_small(&rsa(1024)), Some(1024));
    assert_eq!(hop.rsa_too_small(&rsa(2048)), None);
}

#[test]
fn value_dependent_options_are_refused_only_when_they_change_something() {
    let fine = "Host a\n  HostbasedAuthentication no\n  PubkeyAuthentication yes\n  VerifyHostKeyDNS no\n";
    assert!(chain_of(fine, "a").is_ok());
    let home = home(&[(".ssh/config", "Host a\n  verifyhostkeydns yes\n  PubkeyAuthentication no\n")]);
    let err = load_error(&home);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with(&format!("{}: VerifyHostKeyDNS yes is not supported", at(&home, 2))),
        "{err}"
    );
    assert!(
        lines[1].starts_with(&format!("{}: PubkeyAuthentication no is not supported", at(&home, 3))),
        "{err}"
    );
}

#[test]
fn interactive_only_options_are_ignored() {
    let config = "\
Host a
  ForwardAgent yes
  ControlMaster auto
  ControlPath ~/.ssh/cm-%C
  LocalForward 8080 localhost:80
  SendEnv LANG
  GSSAPIAuthentication no
  ServerAliveInterval 30
";
    assert_eq!(chain_of(config, "a").unwrap().hops[0].server_alive_interval, Duration::from_secs(30));
}

#[test]
fn unknown_keyword_is_an_error_unless_ignore_unknown_lists_it() {
    let home = home(&[(".ssh/config", "Host a\n  Frobnicate yes\n")]);
    assert_eq!(
        load_error(&home),
        format!(
            "{}: unknown option \"Frobnicate\"; fix the spelling, or name it in IgnoreUnknown (before this line)",
            at(&home, 2)
        )
    );
    let ok = "IgnoreUnknown frob*,BindAddress\nHost a\n  Frobnicate yes\n  BindAddress 10.0.0.1\n";
    assert!(chain_of(ok, "a").is_ok());
}

#[test]
fn every_bad_line_is_reported_at_once() {
    let home =
        home(&[(".ssh/config", "Host a\n  Port http\n  Bogus 1\n  ProxyJump b:0\n  User\n  HostName \"x\n")]);
    let err = load(&home).unwrap_err();
    assert_eq!(err.iter().count(), 5);
    assert_eq!(
        err.to_string(),
        [
            format!("{}: Port: bad port \"http\" (expected 1-65535)", at(&home, 2)),
            format!(
                "{}: unknown option \"Bogus\"; fix the spelling, or name it in IgnoreUnknown (before this line)",
                at(&home, 3)
            ),
            format!("{}: ProxyJump: invalid jump host \"b:0\": bad port \"0\" (expected 1-65535)", at(&home, 4)),
            format!("{}: User: missing argument", at(&home, 5)),
            format!("{}: unbalanced quotes", at(&home, 6)),
        ]
        .join("\n")
    );
}

#[test]
fn unreadable_include_is_a_read_error() {
    let home = home(&[(".ssh/config", "Include sub\n")]);
    std::fs::create_dir_all(home.path().join(".ssh/sub")).unwrap();
    // A directory matched by a literal Include is not a file: nothing is read, nothing fails.
    assert!(load(&home).is_ok());
    let err =
        kharon_common::errors::chain(&SshConfig::load(home.path(), None, home.path(), &env).unwrap_err());
    assert!(err.starts_with(&format!("cannot read ssh config {}: ", home.path().display())), "{err}");
}

// ---- Match --------------------------------------------------------------------------------

/// Names that resolve only in this test (tests may not touch the network or /etc/hosts);
/// `Match exec` commands still run for real.
#[derive(Debug)]
struct Dns(Vec<&'static str>);

impl Machine for Dns {
    fn lookup(&self, name: &str, _: crate::AddressFamily) -> Option<super::machine::Found> {
        self.0.contains(&name).then_some(super::machine::Found { canonical: None })
    }
    fn exec(&self, shell: &std::path::Path, command: &str, timeout: Duration) -> Result<bool, String> {
        super::machine::System.exec(shell, command, timeout)
    }
}

fn with_dns(home: &TempDir, names: &[&'static str]) -> SshConfig {
    load(home).unwrap().with_machine(std::sync::Arc::new(Dns(names.to_vec())))
}

#[test]
fn match_host_sees_the_host_name_set_so_far_and_originalhost_the_alias() {
    let config = "\
Host jump
  HostName Jump.Example
Match host jump.example
  User by-host
Match originalhost jump
  Port 2200
Match host jump
  Port 1
";
    assert_eq!(hops(&chain_of(config, "jump").unwrap()), ["jump=by-host@jump.example:2200"]);
    assert_eq!(hops(&chain_of(config, "other").unwrap()), ["other=alice@other:22"]);
}

#[test]
fn match_user_localuser_all_and_negation() {
    let config = "\
Host a
  User ops
Match user ops !localuser bob
  Port 2201
Match !all
  IdentityFile ~/.ssh/never
Match localuser alice
  IdentityFile ~/.ssh/alice
Match user OPS
  Port 1
";
    let home = home(&[(".ssh/config", config)]);
    let hop = load(&home).unwrap().chain("a").unwrap().hops.remove(0);
    assert_eq!((hop.user.as_str(), hop.port), ("ops", 2201));
    assert_eq!(hop.identity_files, [home.path().join(".ssh/alice")]);
    assert_eq!(hop.origin, Some(Origin { file: config_path(&home), line: 1 }));
}

#[test]
fn match_user_sees_a_proxy_jump_user_like_ssh_dash_l() {
    let config = "Host t\n  ProxyJump bob@j\nMatch user bob\n  Port 2202\n";
    assert_eq!(hops(&chain_of(config, "t").unwrap())[0], "j=bob@j:2202");
}

#[test]
fn match_final_reads_the_config_again_with_the_final_host_name() {
    // Measured with `ssh -G` (OpenSSH 9.2): the second pass matches Host patterns against the
    // HostName, fills only what is unset and appends IdentityFiles not listed yet.
    let config = "\
Host jump
  HostName jump.example
  IdentityFile ~/.ssh/first
Match final
  User final
Host *.example
  Port 2222
  IdentityFile ~/.ssh/second
  IdentityFile ~/.ssh/first
";
    let home = home(&[(".ssh/config", config)]);
    let hop = load(&home).unwrap().chain("jump").unwrap().hops.remove(0);
    assert_eq!(hop.display(), "final@jump.example:2222");
    let ssh = home.path().join(".ssh");
    assert_eq!(hop.identity_files, [ssh.join("first"), ssh.join("second")]);
    let without = config.replace("Match final\n  User final\n", "");
    assert_eq!(hops(&chain_of(&without, "jump").unwrap()), ["jump=alice@jump.example:22"]);
}

#[test]
fn match_exec_runs_with_checked_tokens_only_when_the_line_still_matches() {
    let home = home(&[]);
    let mark = home.path().join("ran");
    let config = format!(
        "\
Match originalhost other exec \"touch {mark}\"
  Port 1
Match exec \"test %n = yes-host -a %p = 22 -a %r = alice -a %d = {home}\"
  Port 2201
Match exec \"exit 1\"
  Port 2
Match !exec false
  User negated
",
        mark = mark.display(),
        home = home.path().display()
    );
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    std::fs::write(config_path(&home), config).unwrap();
    let cfg = load(&home).unwrap();
    assert_eq!(hops(&cfg.chain("yes-host").unwrap()), ["yes-host=negated@yes-host:2201"]);
    assert_eq!(hops(&cfg.chain("no-host").unwrap()), ["no-host=negated@no-host:22"]);
    assert!(!mark.exists(), "exec after a false criterion is not run");
    // A name from the inventory never reaches the shell unchecked.
    let evil = "x$(touch pwned)";
    let err = cfg.chain(evil).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}: Match exec for \"{evil}\": %n would be", at(&home, 3))), "{err}");
    assert!(!std::path::Path::new("pwned").exists() && !home.path().join("pwned").exists());
}

#[test]
fn a_match_exec_that_fails_refuses_only_the_jump_hosts_that_ran_it() {
    let home =
        home(&[(".ssh/config", "Host ok\n  Port 2\nMatch originalhost slow exec \"sleep 30\"\n  Port 1\n")]);
    let mut cfg = load(&home).unwrap();
    cfg.exec_timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let err = cfg.chain("slow").unwrap_err();
    assert_eq!(err.origin(), Some(&Origin { file: config_path(&home), line: 3 }));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: Match exec for slow: \"sleep 30\": it was still running after 300ms and was stopped",
            at(&home, 3)
        )
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(hops(&cfg.chain("ok").unwrap()), ["ok=alice@ok:2"]);
}

#[test]
fn an_unsupported_criterion_refuses_only_the_jump_hosts_it_could_apply_to() {
    let config = "\
Host good
  HostName 127.0.0.1
Host bad
  HostName 127.0.0.2
Match host 127.0.0.2 tagged prod
  User tagged
Host via-bad
  ProxyJump bad
Host other
  Include never.conf
";
    let home =
        home(&[(".ssh/config", config), (".ssh/never.conf", "Match localnetwork 10.0.0.0/8\n  Port 1\n")]);
    let cfg = load(&home).expect("an unsupported criterion is not an error of the file");
    assert_eq!(hops(&cfg.chain("good").unwrap()), ["good=alice@127.0.0.1:22"]);
    let refusal = format!(
        "{}: Match tagged prod: kharon cannot evaluate this for bad (it matches the tag ssh is started with \
         (-P), which a tunnel does not have), so it does not use bad (other jump hosts are not affected); \
         remove the criterion, or change the line so that it does not apply to bad",
        at(&home, 5)
    );
    assert_eq!(cfg.chain("bad").unwrap_err().to_string(), refusal);
    assert_eq!(cfg.chain("via-bad").unwrap_err().to_string(), refusal, "a chain through it is refused too");
    // The Include sits in `Host other`, so for `other` its line is reached and undecidable.
    let err = cfg.chain("other").unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}:1: Match localnetwork 10.0.0.0/8: ",
            home.path().join(".ssh/never.conf").display()
        )),
        "{err}"
    );
    for unknown in ["version 9.*", "sessiontype shell", "command ls", "frobnicate x"] {
        let cfg = chain_of(&format!("Match {unknown}\n  User x\n"), "a").unwrap_err().to_string();
        assert!(cfg.contains(&format!(": Match {unknown}: kharon cannot evaluate this for a")), "{cfg}");
    }
}

#[test]
fn bad_match_lines_are_errors_of_the_file_as_in_openssh() {
    let home = home(&[(".ssh/config", "Match host\nMatch all user x\nMatch exec \"echo %Z\"\nMatch\n")]);
    assert_eq!(
        load_error(&home),
        [
            format!("{}: Match: missing argument for host", at(&home, 1)),
            format!("{}: Match: 'all' cannot be combined with other Match criteria", at(&home, 2)),
            format!(
                "{}: Match exec: unknown token %Z (this option accepts %%, %C, %L, %d, %h, %i, %k, %l, %n, %p, %r, %u)",
                at(&home, 3)
            ),
            format!("{}: Match: missing argument", at(&home, 4)),
        ]
        .join("\n")
    );
}

// ---- CanonicalizeHostname -----------------------------------------------------------------

const CANONICAL: &str = "\
CanonicalizeHostname yes
CanonicalDomains a.example corp.example
Host *.corp.example
  User corp
Match canonical host jump.corp.example
  Port 2201
Host proxied
  ProxyJump jump
Host pinned
  CanonicalizeHostname no
";

#[test]
fn canonicalization_tries_each_domain_and_reads_the_config_again() {
    let home = home(&[(".ssh/config", CANONICAL)]);
    let cfg = with_dns(&home, &["jump.corp.example.", "proxied.corp.example.", "pinned.corp.example."]);
    assert_eq!(hops(&cfg.chain("jump").unwrap()), ["jump=corp@jump.corp.example:2201"]);
    // `yes` leaves a host reached through a proxy alone; its jump host is canonicalized.
    assert_eq!(
        hops(&cfg.chain("proxied").unwrap()),
        ["jump=corp@jump.corp.example:2201", "proxied=alice@proxied:22"]
    );
    // The first value wins: CanonicalizeHostname yes came first.
    assert_eq!(hops(&cfg.chain("pinned").unwrap()), ["pinned=corp@pinned.corp.example:22"]);
    // Unknown everywhere: kept as it is (CanonicalizeFallbackLocal yes, the default).
    assert_eq!(hops(&cfg.chain("nowhere").unwrap()), ["nowhere=alice@nowhere:22"]);
    // Two dots are more than CanonicalizeMaxDots 1.
    assert_eq!(hops(&cfg.chain("jump.x.y").unwrap()), ["jump.x.y=alice@jump.x.y:22"]);
}

#[test]
fn canonicalize_always_includes_proxied_hosts_and_fallback_local_no_refuses() {
    let always = CANONICAL.replace("CanonicalizeHostname yes", "CanonicalizeHostname always");
    let first = home(&[(".ssh/config", &always)]);
    let cfg = with_dns(&first, &["jump.corp.example.", "proxied.corp.example."]);
    assert_eq!(hops(&cfg.chain("proxied").unwrap())[1], "proxied=corp@proxied.corp.example:22");

    let strict = format!("CanonicalizeFallbackLocal no\n{CANONICAL}");
    let home = home(&[(".ssh/config", &strict)]);
    let cfg = with_dns(&home, &["jump.corp.example."]);
    assert!(cfg.chain("jump").is_ok());
    assert_eq!(
        cfg.chain("nowhere").unwrap_err().to_string(),
        format!(
            "{}: CanonicalizeHostname for nowhere: cannot canonicalize \"nowhere\": none of nowhere.a.example., \
             nowhere.corp.example. resolves, and CanonicalizeFallbackLocal is no",
            at(&home, 2)
        )
    );
}

#[test]
fn canonical_options_are_checked_at_load() {
    let home = home(&[(
        ".ssh/config",
        "CanonicalizeHostname maybe\nCanonicalDomains a..b\nCanonicalDomains none x\nCanonicalizeMaxDots -1\n\
         CanonicalizePermittedCNAMEs nocolon\n",
    )]);
    let err = load(&home).unwrap_err();
    assert_eq!(err.iter().count(), 5, "{err}");
    assert!(
        err.to_string().contains("CanonicalizeHostname: bad value \"maybe\" (yes, no or always)"),
        "{err}"
    );
}

// ---- jump host resolution errors ----------------------------------------------------------

#[test]
fn a_jump_host_without_a_host_block_gets_the_defaults_and_a_suggestion() {
    // OpenSSH connects to such a name with its defaults plus whatever matches (`Host *`, ...).
    let home = home(&[(".ssh/config", "Host bastion-prod bastion-test\n  User ops\nHost *\n  Port 2222\n")]);
    let config = load(&home).unwrap();
    let chain = config.chain("bastion-prd").unwrap();
    assert_eq!(hops(&chain), ["bastion-prd=alice@bastion-prd:2222"]);
    let hop = &chain.hops[0];
    assert_eq!(hop.suggestion.as_deref(), Some("bastion-prod"), "for the error if the connection fails");
    assert_eq!(hop.origin, Some(Origin { file: config_path(&home), line: 3 }), "Host * applied");
    assert_eq!(config.chain("zzz").unwrap().hops[0].suggestion, None, "nothing close");
    assert_eq!(config.chain("bastion-prod").unwrap().hops[0].suggestion, None, "named by a Host block");
    assert!(chain_of("Host *.example\n", "b.example").unwrap().hops[0].suggestion.is_none());
}

#[test]
fn proxy_jump_cycle_is_an_error_with_its_path_and_line() {
    let config = "Host a\n  ProxyJump b\nHost b\n  ProxyCommand ssh -W %h:%p c\nHost c\n  ProxyJump a\n";
    let home = home(&[(".ssh/config", config)]);
    assert_eq!(
        load(&home).unwrap().chain("a").unwrap_err().to_string(),
        format!(
            "{}: ProxyJump cycle: a -> b -> c -> a: a is reached through itself, so ssh would start ssh after \
             ssh without end; break the loop in one of these lines",
            at(&home, 6)
        )
    );
    // The same name on another port is another hop, which still loops through itself.
    let home = home_with("Host a\n  HostName 10.0.0.1\nHost a:2222\nHost *\n  ProxyJump a:2222\n");
    let err = load(&home).unwrap().chain("a").unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}: ProxyJump cycle: a:2222 -> a:2222:", at(&home, 5))), "{err}");
}

fn home_with(config: &str) -> TempDir {
    home(&[(".ssh/config", config)])
}

#[test]
fn a_jump_host_that_is_the_host_itself_is_sshs_jumphost_loop() {
    // The classic: a catch-all ProxyJump that also applies to the bastion itself (ssh.c: "jumphost
    // loop via bastion").
    let home = home_with("Host target\nHost *\n  ProxyJump bastion\n");
    assert_eq!(
        load(&home).unwrap().chain("target").unwrap_err().to_string(),
        format!(
            "{}: ProxyJump for bastion: jumphost loop via bastion: that is alice@bastion:22 itself (the same \
             host, port and user), which ssh refuses too",
            at(&home, 3)
        )
    );
    let home =
        home_with("Host jump\n  HostName 127.0.0.1\n  Port 2201\n  User u\n  ProxyJump u@127.0.0.1:2201\n");
    let err = load(&home).unwrap().chain("jump").unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}: ProxyJump for jump: jumphost loop via 127.0.0.1:", at(&home, 5))),
        "{err}"
    );
}

#[test]
fn the_same_host_on_other_ports_or_as_another_user_is_no_cycle() {
    // One bastion behind two NAT ports.
    let chain =
        chain_of("Host jump\n  HostName 127.0.0.1\n  ProxyJump u@127.0.0.1:2201,u@127.0.0.1:2202\n", "jump")
            .unwrap();
    assert_eq!(
        hops(&chain),
        ["127.0.0.1=u@127.0.0.1:2201", "127.0.0.1=u@127.0.0.1:2202", "jump=alice@127.0.0.1:22"]
    );
    let chain =
        chain_of("Host jump\n  ProxyJump os1,os1:2222\nHost os1\n  HostName 10.0.0.1\n", "jump").unwrap();
    assert_eq!(hops(&chain), ["os1=alice@10.0.0.1:22", "os1=alice@10.0.0.1:2222", "jump=alice@jump:22"]);
    let chain =
        chain_of("Host jump\n  ProxyJump bob@os1,os1\nHost os1\n  HostName 10.0.0.1\n", "jump").unwrap();
    assert_eq!(hops(&chain), ["os1=bob@10.0.0.1:22", "os1=alice@10.0.0.1:22", "jump=alice@jump:22"]);
    // A host reached through itself under another name: ssh does not call that a loop either.
    let chain = chain_of(
        "Host jump\n  HostName 10.0.0.1\n  ProxyJump other\nHost other\n  HostName 10.0.0.1\n",
        "jump",
    )
    .unwrap();
    assert_eq!(hops(&chain), ["other=alice@10.0.0.1:22", "jump=alice@10.0.0.1:22"]);
}

#[test]
fn the_system_file_is_read_after_the_users_with_its_includes_under_its_directory() {
    let home = home(&[
        (".ssh/config", "Host jump\n  User mine\n"),
        ("etc/ssh_config", "Include ssh_config.d/*.conf\nHost jump\n  User theirs\n  Port 2222\n"),
        ("etc/ssh_config.d/50-policy.conf", "Host *\n  MACs hmac-sha1\n  HostName %h.example\n"),
    ]);
    let system = home.path().join("etc/ssh_config");
    let config = SshConfig::load(&config_path(&home), Some(&system), home.path(), &env).unwrap();
    let hop = &config.chain("jump").unwrap().hops[0];
    // The user's value wins, the system file fills in the rest, its Include included.
    assert_eq!(hop.display(), "mine@jump.example:2222");
    assert_eq!(hop.algorithms.macs.as_deref(), Some(&["hmac-sha1"][..]));
    assert_eq!(config.hosts(), ["jump"]);
    assert_eq!(config.files().len(), 3, "{:?}", config.files());
    // A missing system file is no file, as for ssh.
    let missing = home.path().join("etc/absent");
    assert!(SshConfig::load(&config_path(&home), Some(&missing), home.path(), &env).is_ok());
    // Its lines are checked like the user's, with file:line; `~` has no meaning there.
    std::fs::write(&system, "Include ~/x.conf\nHost *\n  Ciphers +nope-cbc\n").unwrap();
    let err = SshConfig::load(&config_path(&home), Some(&system), home.path(), &env).unwrap_err().to_string();
    assert!(err.contains(&format!("{}:1: Include: bad include path", system.display())), "{err}");
    assert!(err.contains(&format!("{}:3: Ciphers: unknown cipher \"nope-cbc\"", system.display())), "{err}");
}

#[test]
fn hosts_lists_explicit_names_once_in_file_order() {
    let home =
        home(&[(".ssh/config", "Host b a *.prod !c\nInclude more\nHost a d?\n"), (".ssh/more", "Host e\n")]);
    assert_eq!(load(&home).unwrap().hosts(), ["b", "a", "e"]);
}

#[test]
fn include_that_matches_nothing_is_fine_and_tilde_user_is_refused() {
    let home =
        home(&[(".ssh/config", "Include conf.d/*.conf missing\nHost a\n  IdentityFile ~bob/.ssh/id\n")]);
    assert_eq!(
        load_error(&home),
        format!(
            "{}: IdentityFile: \"~bob/.ssh/id\": ~user paths are not supported; write the full path",
            at(&home, 3)
        )
    );
}

// ---- algorithm lists ----------------------------------------------------------------------

fn algorithms_of(config: &str) -> crate::Algorithms {
    chain_of(config, "a").unwrap().hops[0].algorithms.clone()
}

#[test]
fn a_hardened_config_keeps_what_kharon_implements_in_the_users_order() {
    // The shape of widely shared hardening guides (ssh-audit, Mozilla), in `Host *`.
    let config = "\
Host a
  HostName 10.0.0.1
Host *
  KexAlgorithms sntrup761x25519-sha512@openssh.com,curve25519-sha256,curve25519-sha256@libssh.org,diffie-hellman-group16-sha512,diffie-hellman-group-exchange-sha256
  Ciphers chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com,aes256-ctr
  MACs hmac-sha2-512-etm@openssh.com,hmac-sha2-256-etm@openssh.com,umac-128-etm@openssh.com
  HostKeyAlgorithms ssh-ed25519-cert-v01@openssh.com,ssh-ed25519,sk-ssh-ed25519@openssh.com,rsa-sha2-512
";
    let a = algorithms_of(config);
    assert_eq!(
        a.kex.as_deref(),
        Some(
            &[
                "curve25519-sha256",
                "curve25519-sha256@libssh.org",
                "diffie-hellman-group16-sha512",
                "diffie-hellman-group-exchange-sha256"
            ][..]
        )
    );
    assert_eq!(
        a.ciphers.as_deref(),
        Some(
            &[
                "chacha20-poly1305@openssh.com",
                "aes256-gcm@openssh.com",
                "aes128-gcm@openssh.com",
                "aes256-ctr"
            ][..]
        )
    );
    assert_eq!(
        a.macs.as_deref(),
        Some(&["hmac-sha2-512-etm@openssh.com", "hmac-sha2-256-etm@openssh.com"][..])
    );
    assert_eq!(
        a.host_keys.as_deref(),
        Some(&["ssh-ed25519-cert-v01@openssh.com", "ssh-ed25519", "rsa-sha2-512"][..])
    );

    let preferred = a.preferred(&Default::default());
    let names = |v: Vec<&str>| v.join(",");
    assert_eq!(
        names(preferred.cipher.iter().map(AsRef::as_ref).collect()),
        "chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com,aes256-ctr"
    );
    // What OpenSSH adds to every client proposal stays, whatever the user's list: extension
    // negotiation and strict key exchange (the Terrapin fix).
    let kex = names(preferred.kex.iter().map(AsRef::as_ref).collect());
    assert!(kex.starts_with("curve25519-sha256,"), "{kex}");
    assert!(kex.ends_with(",ext-info-c,kex-strict-c-v00@openssh.com"), "{kex}");
    assert_eq!(names(preferred.key.iter().map(|k| k.as_str()).collect()), "ssh-ed25519,rsa-sha2-512");
}

#[test]
fn no_algorithm_lines_mean_kharons_defaults() {
    let a = algorithms_of("Host a\n  HostName 10.0.0.1\n");
    assert_eq!(a, Default::default());
    let preferred = a.preferred(&Default::default());
    assert_eq!(preferred.cipher.first().map(AsRef::as_ref), Some("aes256-gcm@openssh.com"));
    assert!(preferred.kex.iter().any(|k| k.as_ref() == "kex-strict-c-v00@openssh.com"));
}

fn host_key_names(preferred: &russh::Preferred) -> (Vec<String>, Vec<String>) {
    (
        preferred.host_key_certificates.iter().map(|a| a.to_certificate_type()).collect(),
        preferred.key.iter().map(|a| a.as_str().to_owned()).collect(),
    )
}

#[test]
fn host_certificates_are_offered_only_to_a_host_a_ca_line_names() {
    let a = algorithms_of("Host a\n");
    let (certificates, plain) = host_key_names(&a.preferred(&KnownHostKeys::default()));
    assert!(certificates.is_empty(), "{certificates:?}");
    assert_eq!(plain[0], "ssh-ed25519");
    let ca = KnownHostKeys { certificate_authority: true, plain: Vec::new() };
    let (certificates, _) = host_key_names(&a.preferred(&ca));
    assert_eq!(certificates[0], "ssh-ed25519-cert-v01@openssh.com");
    assert!(certificates.contains(&"rsa-sha2-512-cert-v01@openssh.com".to_owned()), "{certificates:?}");
    assert!(!certificates.contains(&"ssh-rsa-cert-v01@openssh.com".to_owned()), "SHA-1 only when asked");
    // The user's list decides which certificate types there are.
    let only = algorithms_of("Host a\n  HostKeyAlgorithms ssh-ed25519,rsa-sha2-256-cert-v01@openssh.com\n");
    let (certificates, plain) = host_key_names(&only.preferred(&ca));
    assert_eq!(
        (certificates, plain),
        (vec!["rsa-sha2-256-cert-v01@openssh.com".to_owned()], vec!["ssh-ed25519".to_owned()])
    );
    let none = algorithms_of("Host a\n  HostKeyAlgorithms -*-cert-v01@openssh.com\n");
    assert!(host_key_names(&none.preferred(&ca)).0.is_empty());
    // A list of certificates only still negotiates them; the check falls back to the key.
    let certs_only = algorithms_of("Host a\n  HostKeyAlgorithms ssh-ed25519-cert-v01@openssh.com\n");
    let (certificates, plain) = host_key_names(&certs_only.preferred(&KnownHostKeys::default()));
    assert_eq!((certificates.len(), plain.len()), (1, 0));
}

#[test]
fn known_key_types_go_first_unless_the_user_ordered_the_list() {
    use russh::keys::Algorithm;
    let rsa_known =
        KnownHostKeys { certificate_authority: false, plain: vec![Algorithm::Rsa { hash: None }] };
    let (_, plain) = host_key_names(&algorithms_of("Host a\n").preferred(&rsa_known));
    assert_eq!(&plain[..3], ["rsa-sha2-512", "rsa-sha2-256", "ssh-ed25519"], "{plain:?}");
    assert!(!plain.contains(&"ssh-rsa".to_owned()), "SHA-1 only when asked, as ssh since 8.8: {plain:?}");
    let (_, plain) =
        host_key_names(&algorithms_of("Host a\n  HostKeyAlgorithms +ssh-rsa\n").preferred(&rsa_known));
    assert_eq!(&plain[..3], ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"], "+/- lists keep the reordering");
    let given = algorithms_of("Host a\n  HostKeyAlgorithms ssh-ed25519,rsa-sha2-512\n");
    let (_, plain) = host_key_names(&given.preferred(&rsa_known));
    assert_eq!(plain, ["ssh-ed25519", "rsa-sha2-512"], "a plain list is the user's order");
    let ecdsa = KnownHostKeys {
        certificate_authority: false,
        plain: vec![Algorithm::Ecdsa { curve: russh::keys::EcdsaCurve::NistP384 }],
    };
    let (_, plain) = host_key_names(&algorithms_of("Host a\n").preferred(&ecdsa));
    assert_eq!(plain[0], "ecdsa-sha2-nistp384", "the curve counts");
}

#[test]
fn plus_minus_and_caret_edit_the_default_list() {
    let a = algorithms_of(
        "Host a\n  Ciphers -chacha20*,aes1*\n  MACs +hmac-sha1\n  KexAlgorithms ^diffie-hellman-group14-sha256\n",
    );
    assert_eq!(a.ciphers.as_deref(), Some(&["aes256-gcm@openssh.com", "aes256-ctr"][..]));
    let macs = a.macs.unwrap();
    assert_eq!(macs.last(), Some(&"hmac-sha1"));
    assert!(macs.len() > 1, "{macs:?}");
    let kex = a.kex.unwrap();
    assert_eq!(kex[0], "diffie-hellman-group14-sha256");
    assert_eq!(kex.iter().filter(|k| **k == "diffie-hellman-group14-sha256").count(), 1, "{kex:?}");
}

#[test]
fn the_first_algorithm_line_that_applies_wins() {
    let a = algorithms_of("Host a\n  Ciphers aes128-ctr\nHost *\n  Ciphers aes256-ctr\n");
    assert_eq!(a.ciphers.as_deref(), Some(&["aes128-ctr"][..]));
}

#[test]
fn bad_algorithm_lists_are_errors_with_file_and_line() {
    let typo = home(&[(".ssh/config", "Host a\n  Ciphers aes256-gmc@openssh.com\n")]);
    assert_eq!(
        load_error(&typo),
        format!(
            "{}: Ciphers: unknown cipher \"aes256-gmc@openssh.com\" (`ssh -Q cipher` lists them)",
            at(&typo, 2)
        )
    );
    let nothing_left =
        home(&[(".ssh/config", "Host *\n  MACs umac-128-etm@openssh.com,umac-64@openssh.com\n")]);
    let err = load_error(&nothing_left);
    assert!(
        err.starts_with(&format!(
            "{}: MACs: leaves no MAC that kharon implements; it has ",
            at(&nothing_left, 2)
        )),
        "{err}"
    );
    assert!(err.contains("hmac-sha2-256-etm@openssh.com"), "{err}");
    let pattern = home(&[(".ssh/config", "Host a\n  KexAlgorithms curve25519*\n")]);
    assert_eq!(
        load_error(&pattern),
        format!(
            "{}: KexAlgorithms: \"curve25519*\": patterns only work in a list that starts with '-' (as in ssh)",
            at(&pattern, 2)
        )
    );
    let unimplemented = home(&[(".ssh/config", "Host *\n  HostKeyAlgorithms +ssh-dss\n")]);
    let err = load_error(&unimplemented);
    assert!(
        err.starts_with(&format!(
            "{}: HostKeyAlgorithms: \"ssh-dss\" is an OpenSSH host key algorithm that kharon's SSH library (russh) \
             does not implement",
            at(&unimplemented, 2)
        )),
        "{err}"
    );
    let everything_removed = home(&[(".ssh/config", "Host a\n  HostKeyAlgorithms -*\n")]);
    assert!(load_error(&everything_removed).contains("leaves no host key algorithm"));
}

// ---- hostile input ---------------------------------------------------------------

/// The message of a ProxyCommand token refused at `line` of the config.
fn refused_token(home: &TempDir, line: usize, alias: &str, token: &str, value: &str, why: &str) -> String {
    format!(
        "{}: ProxyCommand for {alias}: %{token} would be {value:?}, but {why}, so kharon does not run the \
         command; fix the name where it comes from (HostName, User, a ProxyJump entry or the cluster's jumphost)",
        at(home, line)
    )
}

#[test]
fn a_proxy_command_never_gets_shell_syntax_from_a_host_name() {
    // The reproduction: the jump host name (from the inventory) matched a wildcard
    // block, and `%h` put `$(...)` into the command that `sh -c` runs.
    let config = "Host *.jump.test\n  ProxyCommand /bin/echo %h\n";
    let home = home(&[(".ssh/config", config)]);
    let config = load(&home).unwrap();
    let evil = "$(touch /tmp/x).jump.test";
    assert_eq!(
        config.chain(evil).unwrap_err().to_string(),
        refused_token(&home, 2, &format!("{evil:?}"), "h", evil, "a host name must not contain '$'")
    );
    for (alias, bad) in [
        ("a`id`.jump.test", '`'),
        ("a;id.jump.test", ';'),
        ("a|id.jump.test", '|'),
        ("a&id.jump.test", '&'),
        ("a>x.jump.test", '>'),
        ("a\\x.jump.test", '\\'),
        ("a'x.jump.test", '\''),
        ("a\"x.jump.test", '"'),
        ("a{x}.jump.test", '{'),
        ("a,x.jump.test", ','),
        ("a x.jump.test", ' '),
        ("a\nx.jump.test", '\n'),
        ("a\u{7f}x.jump.test", '\u{7f}'),
    ] {
        let err = config.chain(alias).unwrap_err().to_string();
        assert!(err.contains(&format!("a host name must not contain {bad:?}")), "{alias:?}: {err}");
        assert!(err.starts_with(&at(&home, 2)), "{err}");
        assert!(!err.contains('\n'), "the value is escaped: {err}");
    }
    let err = config.chain("-oProxyCommand=x.jump.test").unwrap_err().to_string();
    assert!(err.contains("a host name must not start with '-'"), "{err}");
    // Plain names, IPv6 and the tokens that are always safe still work.
    assert_eq!(
        config.chain("db-1_a.jump.test").unwrap().hops[0].transport,
        Transport::Command("/bin/echo db-1_a.jump.test".into())
    );
}

#[test]
fn every_source_of_a_token_value_is_checked() {
    // %h from HostName, %n from the alias, %r from User or a ProxyJump `user@`.
    let config = "\
Host from-hostname
  HostName a;b
  ProxyCommand nc %h %p
Host *.alias.test
  HostName safe.example
  ProxyCommand nc %h %p # %n
Host from-user
  User x$(id)
  ProxyCommand nc %h %p -u %r
Host via-jump
  ProxyJump y`id`@first,via-jump-2
Host via-jump-2 first
  ProxyCommand connect %r@%h %p
Host via-dash
  ProxyJump -oX,via-jump-2
Host plain-user
  ProxyJump first
Host *
  ProxyCommand nc %n %p
";
    let home = home(&[(".ssh/config", config)]);
    let cfg = load(&home).unwrap();
    let err = |alias: &str| cfg.chain(alias).unwrap_err().to_string();
    assert_eq!(
        err("from-hostname"),
        refused_token(&home, 3, "from-hostname", "h", "a;b", "a host name must not contain ';'")
    );
    assert_eq!(
        err("a(b).alias.test"),
        refused_token(
            &home,
            6,
            "\"a(b).alias.test\"",
            "n",
            "a(b).alias.test",
            "a host name must not contain '('"
        )
    );
    assert_eq!(
        err("from-user"),
        refused_token(&home, 9, "from-user", "r", "x$(id)", "a user name must not contain '$'")
    );
    assert_eq!(
        err("via-jump"),
        refused_token(&home, 13, "first", "r", "y`id`", "a user name must not contain '`'")
    );
    assert_eq!(
        err("via-dash"),
        refused_token(&home, 19, "-oX", "n", "-oX", "a host name must not start with '-'")
    );
    // A user name as OpenSSH allows it passes; the chain through `first` is unaffected.
    assert_eq!(
        cfg.chain("plain-user").unwrap().hops[0].transport,
        Transport::Command("connect alice@first 22".into())
    );
}

#[test]
fn user_names_follow_openssh_valid_ruser() {
    use super::expand::check_command_value as check;
    for ok in ["alice", "a.b-c_d", "DOMAIN\\user", "first last", "x@corp"] {
        assert_eq!(check('r', ok), Ok(()), "{ok:?}");
    }
    for (bad, why) in [
        ("", "must not be empty"),
        ("a -o", "must not have a '-' after whitespace"),
        ("a\\", "must not end in '\\'"),
        ("a;b", "must not contain ';'"),
        ("$HOME", "must not contain '$'"),
        ("a\u{0}b", "must not contain '\\0'"),
        ("a\tb", "must not contain '\\t'"),
    ] {
        let err = check('r', bad).unwrap_err();
        assert!(err.contains(why), "{bad:?}: {err}");
    }
    assert_eq!(check('p', "22"), Ok(()));
}

#[test]
fn a_non_ascii_option_name_is_an_unknown_option() {
    // Byte 6 of `xÄÄÄ` falls inside the last `Ä`; `GSSAPIä` starts with the six bytes "GSSAPI",
    // one of the GSSAPI options kharon ignores.
    let home = home(&[(".ssh/config", "Host a\n  ÄÄÄÄ yes\n  xÄÄÄ yes\n  GSSAPIä yes\n")]);
    let unknown = |line: usize, keyword: &str| {
        format!(
            "{}: unknown option {keyword:?}; fix the spelling, or name it in IgnoreUnknown (before this line)",
            at(&home, line)
        )
    };
    assert_eq!(load_error(&home), [unknown(2, "ÄÄÄÄ"), unknown(3, "xÄÄÄ")].join("\n"));
}

/// `.ssh/config` includes `d1`, `d1` includes `d2`, ... down to `d{depth}`.
fn include_chain(depth: usize) -> TempDir {
    let mut files = vec![(".ssh/config".to_owned(), "Include d1\nHost a\n".to_owned())];
    for n in 1..=depth {
        let next = if n < depth { format!("Include d{}\n", n + 1) } else { "Port 2222\n".to_owned() };
        files.push((format!(".ssh/d{n}"), format!("# level {n}\n{next}")));
    }
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    home(&files)
}

#[test]
fn includes_nest_as_deep_as_openssh_allows_and_no_deeper() {
    let ok = include_chain(16);
    assert_eq!(load(&ok).unwrap().chain("a").unwrap().hops[0].port, 2222);
    let deep = include_chain(17);
    assert_eq!(
        load_error(&deep),
        format!(
            "{}:2: Include of {} nests more than 16 files deep (OpenSSH's limit); include these files from a \
             shallower level",
            deep.path().join(".ssh/d16").display(),
            deep.path().join(".ssh/d17").display()
        )
    );
    // A chain long enough to overflow the stack when followed to the end stops at the limit.
    let very_deep = include_chain(5000);
    let err = load_error(&very_deep);
    assert!(
        err.starts_with(&format!("{}:2: Include of ", very_deep.path().join(".ssh/d16").display())),
        "{err}"
    );
    assert_eq!(load(&very_deep).unwrap_err().iter().count(), 1);
}

#[test]
fn a_file_that_includes_itself_is_a_cycle() {
    let home = home(&[(".ssh/config", "Host a\n  Include config\n")]);
    let config = config_path(&home).canonicalize().unwrap();
    assert_eq!(
        load_error(&home),
        format!(
            "{}: Include cycle: {} -> {}; remove one of these Include lines",
            at(&home, 2),
            config.display(),
            config.display()
        )
    );
}

#[test]
fn absurd_numbers_are_errors_not_overflows() {
    let home = home(&[(
        ".ssh/config",
        "Host a\n  Port 99999999999\n  ServerAliveInterval 99999999999999\n  ConnectTimeout 3000000000\n  \
         ServerAliveCountMax 99999999999\n  ConnectTimeout 18446744073709551616\n  ServerAliveInterval 999999999999w\n",
    )]);
    assert_eq!(
        load_error(&home),
        [
            format!("{}: Port: bad port \"99999999999\" (expected 1-65535)", at(&home, 2)),
            format!(
                "{}: ServerAliveInterval: time \"99999999999999\" is longer than 2147483647 seconds (68 years)",
                at(&home, 3)
            ),
            format!(
                "{}: ConnectTimeout: time \"3000000000\" is longer than 2147483647 seconds (68 years)",
                at(&home, 4)
            ),
            format!("{}: ServerAliveCountMax: bad number \"99999999999\"", at(&home, 5)),
            format!(
                "{}: ConnectTimeout: bad time \"18446744073709551616\" (e.g. 30, 30s, 5m, 1h30m)",
                at(&home, 6)
            ),
            format!(
                "{}: ServerAliveInterval: time \"999999999999w\" is longer than 2147483647 seconds (68 years)",
                at(&home, 7)
            ),
        ]
        .join("\n")
    );
    // The largest accepted values can be added to a clock reading (russh arms its keepalive
    // timer as `Instant::now() + interval`).
    let max =
        chain_of("Host a\n  ServerAliveInterval 2147483647\n  ConnectTimeout 2147483647\n", "a").unwrap();
    let hop = &max.hops[0];
    assert!(std::time::Instant::now().checked_add(hop.server_alive_interval).is_some());
    assert!(tokio::time::Instant::now().checked_add(hop.connect_timeout.unwrap()).is_some());
}

mod arbitrary_text {
    use proptest::prelude::*;
    use std::time::Duration;

    /// Resolves nothing, runs nothing.
    #[derive(Debug)]
    struct Inert;

    impl super::Machine for Inert {
        fn lookup(&self, _: &str, _: crate::AddressFamily) -> Option<super::super::machine::Found> {
            None
        }
        fn exec(&self, _: &std::path::Path, _: &str, _: Duration) -> Result<bool, String> {
            Ok(false)
        }
    }

    use super::{home, load};

    const KEYWORDS: &[&str] = &[
        "Host",
        "HostName",
        "User",
        "Port",
        "ProxyJump",
        "ProxyCommand",
        "IdentityFile",
        "IdentityAgent",
        "CertificateFile",
        "IgnoreUnknown",
        "ServerAliveInterval",
        "ServerAliveCountMax",
        "ConnectTimeout",
        "StrictHostKeyChecking",
        "UserKnownHostsFile",
        "GlobalKnownHostsFile",
        "HostKeyAlias",
        "Ciphers",
        "MACs",
        "KexAlgorithms",
        "HostKeyAlgorithms",
        "PubkeyAcceptedAlgorithms",
        "Match",
        "Match exec",
        "Match host",
        "CanonicalizeHostname",
        "CanonicalDomains",
        "IdentitiesOnly",
        "GSSAPIAuthentication",
        "AddressFamily",
        "PubkeyAuthentication",
    ];

    /// A line: anything at all, or a known keyword with arbitrary values, or an Include whose
    /// pattern stays inside the temporary HOME (no `/`, so no glob walks the real file system).
    fn line() -> impl Strategy<Value = String> {
        prop_oneof![
            "\\PC{0,60}",
            (
                prop::sample::select(KEYWORDS),
                prop::sample::select(vec![" ", "=", " = ", "\t"]),
                "[ -~]{0,40}"
            )
                .prop_map(|(k, sep, v)| format!("{k}{sep}{v}")),
            (prop::sample::select(KEYWORDS), "\\PC{0,30}").prop_map(|(k, v)| format!("  {k} {v}")),
            "[a-z0-9*?.~!\\[\\]-]{0,12}".prop_map(|p| format!("Include {p}")),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        #[test]
        fn loading_and_resolving_never_panics(
            lines in prop::collection::vec(line(), 0..24),
            name in "\\PC{0,20}",
        ) {
            let text = lines.join("\n");
            let home = home(&[(".ssh/config", text.as_str()), (".ssh/inc", text.as_str())]);
            if let Ok(config) = load(&home) {
                // Random `Match exec` lines must not run random commands, nor random names
                // reach a resolver.
                let config = config.with_machine(std::sync::Arc::new(Inert));
                for alias in [name.as_str(), "a", "bastion", "x.jump.test", "$(id)"] {
                    let _ = config.chain(alias);
                }
                let _ = config.hosts();
            }
        }
    }
}
