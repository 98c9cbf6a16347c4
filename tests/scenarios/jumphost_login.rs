//! A jump host that asks a person: a real OpenSSH sshd with
//! `AuthenticationMethods publickey,keyboard-interactive` (or `publickey,password`) and a PAM
//! stack of its own (`harness::sshd`, `Builder::pam`), whose `pam_exec` checks a one-time code:
//! each code works once. After the key, sshd logs "Partial publickey" and asks more; the
//! question shows in `status` and `test`, connections wait for its answer, and a person answers
//! through `kharonctl login-jump` or the SSH_ASKPASS program, which gets the prompt ssh itself
//! shows. Real curl goes through the hop afterwards, and the code is in no log: kharond's (at
//! trace level), kharonctl's output, the askpass program's record aside.
//! In a desktop session (a private D-Bus session bus with a notification server that records what
//! it is sent, `harness::desktop`), the question is a desktop notification, once, and the clients
//! that waited for it past their connect timeout hear what became of it.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use kharon_e2e::agent::Agent;
use kharon_e2e::desktop::DesktopBus;
use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::HttpServer;
use kharon_e2e::sshd::{self, Sshd};
use kharon_e2e::{Env, inventory, kharonctl, output_within, socks, wait_until};

/// The target's name: resolvable only at the jump host.
const TARGET: &str = "api.c1.example";
const JUMPHOST: &str = "hop1";

/// PAM's own prompt for the code: `pam_exec expose_authtok` asks for it as a password.
const PAM_PROMPT: &str = "Password: ";

/// One jump host whose sshd wants a key and then `second` (`keyboard-interactive` or
/// `password`), both answered by PAM, and everything a scenario needs around it.
struct Bastion {
    env: Env,
    agent: Agent,
    sshd: Sshd,
    /// The code PAM takes next; removed once used.
    code_file: PathBuf,
    _pam_dir: tempfile::TempDir,
    key: PathBuf,
    ssh_config: PathBuf,
    target: HttpServer,
}

impl Bastion {
    fn new(second: &str) -> Bastion {
        assert!(
            sshd::hosts_supported(),
            "these scenarios need `unshare -m` (root) for sshd's own PAM and hosts"
        );
        let env = Env::new();
        let key = env.home().join(".ssh/id_kharon");
        let (agent, public) = Agent::with_new_key(&key);
        let pam_dir = tempfile::Builder::new().prefix("khpam").tempdir_in("/tmp").expect("pam dir");
        let code_file = pam_dir.path().join("code");
        // pam_exec hands the answer over on standard input, NUL-terminated; a code works once.
        let check = pam_dir.path().join("check");
        std::fs::write(
            &check,
            format!(
                "#!/bin/sh\nanswer=$(tr -d '\\000')\nexpected=$(cat {code} 2>/dev/null) || exit 1\n\
                 [ -n \"$expected\" ] && [ \"$answer\" = \"$expected\" ] || exit 1\nrm -f {code}\n",
                code = code_file.display()
            ),
        )
        .expect("write the PAM check");
        kharon_e2e::set_mode(&check, 0o755);
        let pam = format!(
            "auth required pam_exec.so expose_authtok quiet {}\nauth required pam_permit.so\n\
             account required pam_permit.so\nsession required pam_permit.so\npassword required pam_deny.so\n",
            check.display()
        );
        let sshd = Sshd::builder()
            .authorize(&public)
            .hosts(&[(TARGET, "127.0.0.1")])
            .pam(&pam)
            .option("UsePAM yes")
            // The suite runs as root, and sshd hands PAM a bogus password for a root login
            // that PermitRootLogin restricts to keys (auth-pam.c, `fake_password`).
            .option("PermitRootLogin yes")
            .option(&format!("AuthenticationMethods publickey,{second}"))
            .option(if second == "password" {
                "PasswordAuthentication yes"
            } else {
                "KbdInteractiveAuthentication yes"
            })
            .start();
        std::fs::write(env.home().join(".ssh/known_hosts"), sshd.host_key_line() + "\n")
            .expect("known_hosts");
        let ssh_config = env.home().join(".ssh/config");
        let target = HttpServer::start("target");
        let bastion = Bastion { env, agent, sshd, code_file, _pam_dir: pam_dir, key, ssh_config, target };
        bastion.write_ssh_config(&[]);
        bastion
    }

    /// The ssh config: the bastion's Host block, with `extra` lines.
    fn write_ssh_config(&self, extra: &[&str]) {
        let known_hosts =
            format!("UserKnownHostsFile {}", self.env.home().join(".ssh/known_hosts").display());
        let mut lines = vec![known_hosts.as_str()];
        lines.extend_from_slice(extra);
        let block = sshd::host_block(JUMPHOST, self.sshd.port(), &sshd::current_user(), &self.key, &lines);
        std::fs::write(&self.ssh_config, block).expect("ssh config");
    }

    /// A fresh one-time code that PAM takes (once), distinctive enough to be searched for in logs.
    fn issue_code(&self) -> String {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let code = format!("otp{nanos:x}{:x}", std::process::id());
        std::fs::write(&self.code_file, &code).expect("write the code");
        code
    }

    /// kharond routing `c1.example` through the bastion, logging everything (`trace`), with `extra`
    /// in its environment.
    fn daemon(&self, extra: &[(&str, &str)]) -> Kharond {
        self.daemon_with(&[], extra)
    }

    /// [`Bastion::daemon`] with `config` as its config file.
    fn daemon_configured(&self, config: &str, extra: &[(&str, &str)]) -> Kharond {
        let file = self.env.write("config.toml", config);
        self.daemon_with(&["--config", file.to_str().unwrap()], extra)
    }

    fn daemon_with(&self, args: &[&str], extra: &[(&str, &str)]) -> Kharond {
        let inv = self
            .env
            .write("inventory.json", &inventory::to_json(&[inventory::routed("c1", JUMPHOST, "c1.example")]));
        let agent = self.agent.socket().display().to_string();
        let mut vars = vec![("SSH_AUTH_SOCK", agent.as_str()), ("RUST_LOG", "trace")];
        vars.extend_from_slice(extra);
        let mut all =
            vec!["--inventory", inv.to_str().unwrap(), "--ssh-config", self.ssh_config.to_str().unwrap()];
        all.extend_from_slice(args);
        Kharond::start_with(&self.env, &all, &vars)
    }

    /// `curl -x socks5h://… http://api.c1.example:PORT/hello`, started (it may wait for a person).
    fn curl(&self, daemon: &Kharond) -> std::process::Child {
        Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "60", "-x", &daemon.proxy_url()])
            .arg(format!("http://{TARGET}:{}/hello", self.target.port()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run curl")
    }

    /// `kharonctl status -o json` → the bastion's chain.
    fn chain(&self) -> serde_json::Value {
        let status = kharonctl::run(&self.env, &["status", "-o", "json"]).json();
        status["chains"]
            .as_array()
            .and_then(|chains| chains.iter().find(|c| c["jumphost"] == JUMPHOST).cloned())
            .unwrap_or(serde_json::Value::Null)
    }

    /// Waits (bounded) until the chain's state is `state`; the chain as last seen.
    fn chain_reaching(&self, state: &str) -> serde_json::Value {
        let mut chain = serde_json::Value::Null;
        let reached = wait_until(Duration::from_secs(15), || {
            chain = self.chain();
            chain["state"] == state
        });
        assert!(reached, "the chain never was {state}: {chain}");
        chain
    }

    /// An HTTP CONNECT to the target, raw, by a client that may wait for a person; the whole
    /// answer.
    fn http_connect(&self, daemon: &Kharond) -> String {
        let authority = format!("{TARGET}:{}", self.target.port());
        let head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
        String::from_utf8_lossy(&socks::exchange_waiting(daemon.socks_addr(), head.as_bytes())).into_owned()
    }
}

/// curl's body, or a panic with what curl and kharond said.
fn curl_done(curl: std::process::Child, daemon: &Kharond) -> String {
    let out = output_within(curl, Duration::from_secs(70)).expect("curl ends within its --max-time");
    assert!(
        out.status.success(),
        "curl exit {:?}: {}\n---- kharond log ----\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr),
        daemon.log()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_nowhere(code: &str, places: &[(&str, &str)]) {
    for (name, text) in places {
        assert!(!text.contains(code), "the answer appears in {name}:\n{text}");
    }
}

#[test]
fn a_one_time_password_bastion_is_answered_through_kharonctl_on_a_terminal() {
    let b = Bastion::new("keyboard-interactive");
    let daemon = b.daemon(&[]);
    let code = b.issue_code();

    // A client's connection waits for the answer instead of failing.
    let curl = b.curl(&daemon);
    let chain = b.chain_reaching("asking");
    let question = &chain["question"];
    assert_eq!(question["method"], "keyboard-interactive", "{chain}");
    assert_eq!(question["wants"], "keyboard-interactive after publickey", "{chain}");
    assert_eq!(question["prompts"][0]["text"], PAM_PROMPT, "{chain}");
    assert_eq!(question["prompts"][0]["echo"], false, "{chain}");
    let table = kharonctl::run(&b.env, &["status"]).stdout;
    assert!(
        table.contains(&format!("jump host {JUMPHOST} asks: hop 1/1 {JUMPHOST}"))
            && table.contains("wants keyboard-interactive after publickey and asks \"Password: \"")
            && table.contains(&format!("answer with `kharonctl login-jump {JUMPHOST}`")),
        "{table}"
    );

    // `kharonctl test` names the question at once rather than waiting for it.
    let started = Instant::now();
    let out = kharonctl::run(&b.env, &["test", "-o", "json"]);
    assert!(started.elapsed() < Duration::from_secs(8), "test waited {:?}", started.elapsed());
    let rows = out.json();
    let connect = rows
        .as_array()
        .and_then(|r| r.iter().find(|r| r["cluster"] == "c1" && r["check"] == "connect"))
        .cloned()
        .unwrap_or_default();
    let error = connect["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("jump host {JUMPHOST} waits for a person: hop 1/1 {JUMPHOST}"))
            && error.contains("wants keyboard-interactive after publickey and asks \"Password: \"")
            && error.contains(&format!("answer with `kharonctl login-jump {JUMPHOST}`")),
        "{rows}"
    );

    // The person answers on a terminal, without echo.
    let mut cmd = kharonctl::command(&b.env, &["login-jump", JUMPHOST]);
    cmd.env("TERM", "dumb");
    let mut tty = rexpect::session::spawn_command(cmd, Some(15_000)).expect("kharonctl on a pseudo-terminal");
    let shown = tty.exp_string(PAM_PROMPT).expect("the prompt on the terminal");
    assert!(shown.contains("wants keyboard-interactive after publickey"), "{shown}");
    tty.send_line(&code).expect("type the code");
    let rest = tty.exp_string(&format!("jump host {JUMPHOST} is connected")).expect("connected");
    let screen = format!("{shown}{rest}");

    // The connection that waited goes through, and the next one rides the same session.
    assert_eq!(curl_done(curl, &daemon), "hello from target");
    assert_eq!(curl_done(b.curl(&daemon), &daemon), "hello from target");
    assert_eq!(b.chain()["state"], "connected");
    assert_eq!(b.sshd.log().matches("Accepted keyboard-interactive/pam").count(), 1, "{}", b.sshd.log());
    assert_nowhere(
        &code,
        &[("the terminal", &screen), ("kharond's log", &daemon.log()), ("test", &out.stdout)],
    );
}

#[test]
fn a_one_time_password_bastion_is_answered_through_ssh_askpass_as_ssh_asks() {
    let b = Bastion::new("keyboard-interactive");
    let asked = b.env.path().join("askpass.asked");
    let answer = b.env.path().join("askpass.answer");
    let askpass = b.env.write(
        "askpass",
        &format!("#!/bin/sh\nprintf '%s\\n' \"$1\" >> {}\ncat {}\n", asked.display(), answer.display()),
    );
    kharon_e2e::set_mode(&askpass, 0o755);
    let askpass_env = [("SSH_ASKPASS", askpass.to_str().unwrap()), ("SSH_ASKPASS_REQUIRE", "force")];

    // The oracle: the prompt ssh gives the program for this very jump host.
    std::fs::write(&answer, b.issue_code()).unwrap();
    let ssh = Command::new("ssh")
        .args(["-F", b.ssh_config.to_str().unwrap(), "-o", "BatchMode=no", JUMPHOST, "true"])
        .env("SSH_AUTH_SOCK", b.agent.socket())
        .envs(askpass_env)
        .env_remove("DISPLAY")
        .stdin(Stdio::null())
        .output()
        .expect("run ssh");
    assert!(ssh.status.success(), "ssh: {}", String::from_utf8_lossy(&ssh.stderr));
    let ssh_asked = std::fs::read_to_string(&asked).expect("ssh ran the program");
    std::fs::remove_file(&asked).unwrap();

    let daemon = b.daemon(&askpass_env);
    let code = b.issue_code();
    std::fs::write(&answer, &code).unwrap();
    assert_eq!(curl_done(b.curl(&daemon), &daemon), "hello from target");
    let kharond_asked = std::fs::read_to_string(&asked).expect("kharond ran the program");
    assert_eq!(kharond_asked, ssh_asked, "the prompt, as ssh shows it");
    assert_eq!(kharond_asked, format!("({}@127.0.0.1) {PAM_PROMPT}\n", sshd::current_user()));
    assert_eq!(b.chain()["state"], "connected");
    assert!(
        daemon.log().contains(&format!("SSH_ASKPASS {} asked too", askpass.display())),
        "{}",
        daemon.log()
    );
    assert_nowhere(&code, &[("kharond's log", &daemon.log())]);
}

#[test]
fn a_password_after_the_key_is_asked_through_ssh_askpass_as_ssh_asks() {
    let b = Bastion::new("password");
    let asked = b.env.path().join("askpass.asked");
    let code = b.issue_code();
    let askpass = b.env.write(
        "askpass",
        &format!("#!/bin/sh\nprintf '%s\\n' \"$1\" >> {}\necho '{code}'\n", asked.display()),
    );
    kharon_e2e::set_mode(&askpass, 0o755);
    let daemon = b.daemon(&[("SSH_ASKPASS", askpass.to_str().unwrap()), ("SSH_ASKPASS_REQUIRE", "force")]);
    assert_eq!(curl_done(b.curl(&daemon), &daemon), "hello from target");
    // ssh's own prompt for a password (sshconnect2.c, userauth_passwd).
    let prompt = std::fs::read_to_string(&asked).expect("kharond ran the program");
    assert_eq!(prompt, format!("{}@127.0.0.1's password: \n", sshd::current_user()));
    assert!(b.sshd.log().contains("Accepted password"), "{}", b.sshd.log());
    assert_nowhere(&code, &[("kharond's log", &daemon.log())]);
}

#[test]
fn an_unanswered_question_fails_connections_until_someone_logs_in() {
    let b = Bastion::new("keyboard-interactive");
    // A question stays open 2 s instead of 90 s (`answer_wait_secs`).
    b.env.write("config/kharon/config.toml", "answer_wait_secs = 2\n");
    let daemon = b.daemon(&[]);
    let code = b.issue_code();

    // The HTTP CONNECT client waits for the question's time, then gets what to do.
    let started = Instant::now();
    let answer = b.http_connect(&daemon);
    let waited = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(
        answer.contains(
            "nobody answered within 2s: it wants keyboard-interactive after publickey and asks \"Password: \""
        ) && answer.contains(&format!("run `kharonctl login-jump {JUMPHOST}` to answer it")),
        "{answer}"
    );
    assert!(waited >= Duration::from_secs(2), "{waited:?}");
    let chain = b.chain_reaching("login-required");
    assert!(chain["last_error"].as_str().unwrap_or_default().contains("kharonctl login-jump"), "{chain}");

    // Nobody is asked again by the next connection: it fails at once, saying so.
    let started = Instant::now();
    let answer = b.http_connect(&daemon);
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    assert!(
        answer.contains(&format!(
            "jump host {JUMPHOST} waits for a person to log in, and connections through it fail until then"
        )) && answer.contains("kharonctl login-jump"),
        "{answer}"
    );
    assert_eq!(
        b.sshd.log().matches("Partial publickey").count(),
        1,
        "one login, one question: {}",
        b.sshd.log()
    );

    // A wrong code is refused and asked again; the right one logs in (answers on standard input).
    let mut login = kharonctl::command(&b.env, &["login-jump", JUMPHOST])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kharonctl login-jump");
    login.stdin.take().unwrap().write_all(format!("wrong\n{code}\n").as_bytes()).unwrap();
    let out = output_within(login, Duration::from_secs(30)).expect("login-jump ends");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}\n---- kharond log ----\n{}", daemon.log());
    assert_eq!(stdout, format!("jump host {JUMPHOST} is connected\n"));
    assert!(stderr.contains("it refused the previous answer; try again"), "{stderr}");
    assert_eq!(curl_done(b.curl(&daemon), &daemon), "hello from target");
    assert_nowhere(
        &code,
        &[("kharonctl's output", &format!("{stdout}{stderr}")), ("kharond's log", &daemon.log())],
    );
}

/// Runs `kharonctl login-jump JUMPHOST` with `answer` on its standard input; whether it logged in,
/// and what it said.
fn login_jump(b: &Bastion, answer: &str) -> (bool, String) {
    let mut login = kharonctl::command(&b.env, &["login-jump", JUMPHOST])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kharonctl login-jump");
    login.stdin.take().unwrap().write_all(format!("{answer}\n").as_bytes()).unwrap();
    let out = output_within(login, Duration::from_secs(30)).expect("login-jump ends");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

/// A SOCKS client through `daemon` that waits for the jump host's question; the `n`th
/// notification the desktop got once the question is open, and the client's thread.
fn question_notified(
    b: &Bastion,
    daemon: &Kharond,
    desktop: &DesktopBus,
    n: usize,
) -> (serde_json::Value, std::thread::JoinHandle<u8>) {
    let (addr, port) = (daemon.socks_addr(), b.target.port());
    let socks = std::thread::spawn(move || socks::connect_by_name_waiting(addr, TARGET, port).0);
    b.chain_reaching("asking");
    let shown = wait_until(Duration::from_secs(10), || desktop.notifications().len() >= n);
    assert!(
        shown,
        "no notification {n}: {:?}\n---- kharond log ----\n{}",
        desktop.notifications(),
        daemon.log()
    );
    (desktop.notifications()[n - 1].clone(), socks)
}

#[test]
fn a_question_shows_on_the_desktop_once_and_the_clients_waiting_for_it_are_told() {
    let b = Bastion::new("keyboard-interactive");
    // One refused answer ends a login: what the waiting clients are told comes at once.
    b.write_ssh_config(&["NumberOfPasswordPrompts 1"]);
    let desktop = DesktopBus::start();
    let bus = [("DBUS_SESSION_BUS_ADDRESS", desktop.address())];
    // Connections give up on a dial after 1 s: the clients below wait for the question past it.
    let daemon = b.daemon_configured("connect_timeout_secs = 1\n", &bus);
    let (n, socks) = question_notified(&b, &daemon, &desktop, 1);
    // A second client waits for the same question.
    let http = {
        let (addr, authority) = (daemon.socks_addr(), format!("{TARGET}:{}", b.target.port()));
        std::thread::spawn(move || {
            let head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
            String::from_utf8_lossy(&socks::exchange_waiting(addr, head.as_bytes())).into_owned()
        })
    };
    b.issue_code();
    std::thread::sleep(Duration::from_millis(1500));
    let (logged_in, said) = login_jump(&b, "wrong");
    assert!(!logged_in && said.contains("it refused 1 answers"), "{said}");
    let (answer, code) = (http.join().expect("the HTTP client"), socks.join().expect("the SOCKS client"));

    // One notification for the question, however many clients waited for it.
    assert_eq!(desktop.notifications().len(), 1, "{:?}", desktop.notifications());
    assert_eq!(n["app_name"], "kharon", "{n}");
    assert_eq!(n["summary"], format!("Jump host {JUMPHOST} asks for a one-time password"), "{n}");
    let body = n["body"].as_str().unwrap_or_default();
    assert!(body.starts_with(&format!("Run `kharonctl login-jump {JUMPHOST}` within 1m 2")), "{n}");
    assert!(body.ends_with(&format!("connections through {JUMPHOST} wait until then.")), "{n}");
    let expires = n["expire_timeout"].as_i64().unwrap_or_default();
    assert!((80_000..=90_000).contains(&expires), "it expires with the question: {n}");

    // The clients waited past their connect timeout and hear what became of the question. HTTP
    // CONNECT: a 502 that says the jump host waits for a person, and the command.
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(
        answer.contains(&format!(
            "jump host {JUMPHOST} waits for a person to log in, and connections through it fail until then"
        )) && answer.contains(&format!("run `kharonctl login-jump {JUMPHOST}` to try again")),
        "{answer}\n---- kharond log ----\n{}",
        daemon.log()
    );
    // SOCKS5: "network unreachable", as for any hop that cannot be passed; not "TTL expired" (a
    // timeout) or a general failure. Its reason is in the log.
    assert_eq!(code, 3, "SOCKS reply code\n---- kharond log ----\n{}", daemon.log());
    let log = daemon.log();
    assert!(
        log.lines().any(|l| l.contains(&format!("cannot connect via jump host {JUMPHOST}"))
            && l.contains("it refused 1 answers")
            && l.contains(&format!("kharonctl login-jump {JUMPHOST}"))),
        "{log}"
    );

    // A person logs in: the question their login brings up is on their terminal, not the desktop.
    let code = b.issue_code();
    let (logged_in, said) = login_jump(&b, &code);
    assert!(logged_in, "{said}");
    let skipped = "no desktop notification: a person is logging in to it with kharonctl login-jump";
    assert!(wait_until(Duration::from_secs(10), || daemon.log().contains(skipped)), "{}", daemon.log());
    assert_eq!(desktop.notifications().len(), 1, "{:?}", desktop.notifications());
    assert_eq!(curl_done(b.curl(&daemon), &daemon), "hello from target");
    drop(daemon);

    // Without notify-send, systemd's busctl makes the same call.
    let only_busctl = b.env.path().join("only-busctl");
    std::fs::create_dir(&only_busctl).unwrap();
    let busctl = ["/usr/bin/busctl", "/bin/busctl"].into_iter().find(|p| std::path::Path::new(p).exists());
    std::os::unix::fs::symlink(busctl.expect("busctl (systemd)"), only_busctl.join("busctl")).unwrap();
    let path = only_busctl.display().to_string();
    let daemon = b.daemon(&[bus[0], ("PATH", path.as_str())]);
    let (second, socks) = question_notified(&b, &daemon, &desktop, 2);
    assert_eq!(second["summary"], n["summary"], "{second}");
    assert!(second["body"].as_str().unwrap_or_default().contains("kharonctl login-jump hop1"), "{second}");
    assert_eq!((&second["app_icon"], &second["hints"]["urgency"]), (&json!("dialog-password"), &json!(1)));
    let (logged_in, said) = login_jump(&b, &b.issue_code());
    assert!(logged_in, "{said}");
    assert_eq!(socks.join().expect("the SOCKS client"), 0, "answered: the waiting client goes through");
    drop(daemon);

    // `desktop_notifications = false` in the config file: the desktop hears nothing. A question
    // open 2 s, clients that give up on a dial after 1 s: when the question expires unanswered,
    // each waiting client hears that, not that its own wait ran out.
    let daemon = b.daemon_configured(
        "desktop_notifications = false\nanswer_wait_secs = 2\nconnect_timeout_secs = 1\n",
        &bus,
    );
    let (addr, port) = (daemon.socks_addr(), b.target.port());
    let socks = std::thread::spawn(move || socks::connect_by_name_waiting(addr, TARGET, port).0);
    b.chain_reaching("asking");
    let answer = b.http_connect(&daemon);
    assert_eq!(socks.join().expect("the SOCKS client"), 3, "{}", daemon.log());
    assert!(
        answer.starts_with("HTTP/1.1 502")
            && answer.contains("nobody answered within 2s")
            && answer.contains(&format!("run `kharonctl login-jump {JUMPHOST}` to answer it")),
        "{answer}\n---- kharond log ----\n{}",
        daemon.log()
    );
    assert!(!daemon.log().contains("took longer than"), "{}", daemon.log());
    assert!(daemon.log().contains("desktop notifications are off"), "{}", daemon.log());
    assert_eq!(desktop.notifications().len(), 2, "{:?}", desktop.notifications());
}

#[test]
fn a_jump_host_wanting_what_no_person_can_give_says_what_it_wants() {
    // sshd takes the key as a first factor, then wants hostbased: nothing anyone can type.
    let env = Env::new();
    let key = env.home().join(".ssh/id_kharon");
    let (agent, public) = Agent::with_new_key(&key);
    let sshd = Sshd::builder()
        .authorize(&public)
        .option("HostbasedAuthentication yes")
        .option("AuthenticationMethods publickey,hostbased")
        .start();
    let known_hosts = env.home().join(".ssh/known_hosts");
    std::fs::write(&known_hosts, sshd.host_key_line() + "\n").unwrap();
    let ssh_config = env.home().join(".ssh/config");
    let extra = format!("UserKnownHostsFile {}", known_hosts.display());
    std::fs::write(
        &ssh_config,
        sshd::host_block(JUMPHOST, sshd.port(), &sshd::current_user(), &key, &[&extra]),
    )
    .unwrap();
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c1", JUMPHOST, "c1.example")]));
    let agent_socket = agent.socket().display().to_string();
    let daemon = Kharond::start_with(
        &env,
        &["--inventory", inv.to_str().unwrap(), "--ssh-config", ssh_config.to_str().unwrap()],
        &[("SSH_AUTH_SOCK", agent_socket.as_str())],
    );
    let (code, _) = socks::connect_by_name(daemon.socks_addr(), TARGET, 443);
    assert_ne!(code, 0);
    let status = kharonctl::run(&env, &["status", "-o", "json"]).json();
    let error = status["chains"][0]["last_error"].as_str().unwrap_or_default().to_owned();
    assert!(
        error.contains("it accepted agent key") && error.contains("but it wants hostbased after publickey"),
        "{error}"
    );
    assert!(sshd.log().contains("Partial publickey"), "{}", sshd.log());
}

#[test]
fn batch_mode_yes_lets_nobody_be_asked_as_it_keeps_ssh_from_asking() {
    let b = Bastion::new("keyboard-interactive");
    b.write_ssh_config(&["BatchMode yes"]);
    b.issue_code();
    // The oracle: ssh asks nobody, and is refused.
    let ssh = Command::new("ssh")
        .args(["-F", b.ssh_config.to_str().unwrap(), JUMPHOST, "true"])
        .env("SSH_AUTH_SOCK", b.agent.socket())
        .stdin(Stdio::null())
        .output()
        .expect("run ssh");
    assert!(!ssh.status.success());
    assert!(String::from_utf8_lossy(&ssh.stderr).contains("Permission denied (keyboard-interactive)"));

    let daemon = b.daemon(&[]);
    let (code, _) = socks::connect_by_name(daemon.socks_addr(), TARGET, b.target.port());
    assert_ne!(code, 0, "refused, not asked");
    let chain = b.chain_reaching("failed");
    assert!(chain["question"].is_null(), "{chain}");
    let error = chain["last_error"].as_str().unwrap_or_default();
    let line = format!("{}:7", b.ssh_config.display());
    assert!(
        error.contains(&format!(
            "it wants keyboard-interactive after publickey, and BatchMode yes ({line}) lets nobody be asked for it"
        )),
        "{error}"
    );
}
