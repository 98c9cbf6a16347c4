//! The control socket's path and who answers on it: kharond replaces only a stale socket of its
//! own user and leaves anything else standing there alone; kharonctl talks only to a socket of
//! its own user, served by a process of its own user.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory, kharonctl, wait_until};

/// `nobody` on Debian; any uid other than ours does.
const OTHER_UID: u32 = 65534;

fn write_inventory(env: &Env) -> String {
    env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]))
        .display()
        .to_string()
}

/// The directory kharond would create, made by hand so something else can be put at the path.
fn socket_dir(env: &Env) {
    let dir = env.control_socket().parent().unwrap().to_owned();
    std::fs::create_dir_all(&dir).unwrap();
    kharon_e2e::set_mode(&dir, 0o700);
}

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR).expect("mkfifo");
}

#[test]
fn kharond_leaves_a_file_at_the_socket_path_alone() {
    let env = Env::new();
    let inv = write_inventory(&env);
    socket_dir(&env);
    let sock = env.control_socket();
    std::fs::write(&sock, "precious data\n").unwrap();

    let exited = Kharond::try_start(&env, &["--inventory", &inv], &[]).err().expect("must not start");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains(&sock.display().to_string()), "{}", exited.stderr);
    assert!(exited.stderr.contains("is a regular file, not a socket"), "{}", exited.stderr);
    assert!(exited.stderr.contains("--control-socket"), "{}", exited.stderr);
    assert_eq!(std::fs::read_to_string(&sock).unwrap(), "precious data\n", "the file must stay intact");
}

#[test]
fn kharond_leaves_a_symlink_a_directory_and_a_fifo_alone() {
    let env = Env::new();
    let inv = write_inventory(&env);
    socket_dir(&env);
    let sock = env.control_socket();

    // A symlink to a file elsewhere: neither the link nor its target may be removed.
    let target = env.write("elsewhere/target", "keep me\n");
    std::os::unix::fs::symlink(&target, &sock).unwrap();
    let exited = Kharond::try_start(&env, &["--inventory", &inv], &[]).err().expect("must not start");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains("is a symbolic link, not a socket"), "{}", exited.stderr);
    assert!(std::fs::symlink_metadata(&sock).unwrap().file_type().is_symlink(), "the link must stay");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n", "the target must stay intact");
    std::fs::remove_file(&sock).unwrap();

    std::fs::create_dir(&sock).unwrap();
    std::fs::write(sock.join("inside"), "x").unwrap();
    let exited = Kharond::try_start(&env, &["--inventory", &inv], &[]).err().expect("must not start");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains("is a directory, not a socket"), "{}", exited.stderr);
    assert!(sock.join("inside").exists(), "the directory must stay intact");
    std::fs::remove_dir_all(&sock).unwrap();

    mkfifo(&sock);
    let exited = Kharond::try_start(&env, &["--inventory", &inv], &[]).err().expect("must not start");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains("is a FIFO, not a socket"), "{}", exited.stderr);
    assert!(std::fs::symlink_metadata(&sock).is_ok(), "the FIFO must stay");
    std::fs::remove_file(&sock).unwrap();

    // With the path free again the daemon starts: the refusals were about the path only.
    let _daemon = Kharond::start(&env, &["--inventory", &inv]);
    assert!(kharonctl::run(&env, &["status"]).success());
}

#[test]
fn kharond_does_not_replace_another_users_socket() {
    let env = Env::new();
    let inv = write_inventory(&env);
    socket_dir(&env);
    let sock = env.control_socket();
    let stale = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    drop(stale);
    std::os::unix::fs::chown(&sock, Some(OTHER_UID), None).unwrap();

    let exited = Kharond::try_start(&env, &["--inventory", &inv], &[]).err().expect("must not start");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains(&format!("belongs to uid {OTHER_UID}")), "{}", exited.stderr);
    assert!(std::fs::symlink_metadata(&sock).is_ok(), "the other user's socket must stay");
}

#[test]
fn kharonctl_refuses_a_socket_owned_by_another_user() {
    let env = Env::new();
    let inv = write_inventory(&env);
    let daemon = Kharond::start(&env, &["--inventory", &inv]);
    let sock = env.control_socket();
    std::os::unix::fs::chown(&sock, Some(OTHER_UID), None).unwrap();
    // Widen the mode too, as a careless other user might: the owner check must still hold.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();

    let out = kharonctl::run(&env, &["status"]);
    assert!(!out.success(), "{out:?}");
    assert!(
        out.stderr.contains(&format!("belongs to uid {OTHER_UID} (nobody), not to us")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(&sock.display().to_string()), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "one line: {}", out.stderr);
    drop(daemon);
}

#[test]
fn kharonctl_refuses_a_path_that_is_not_a_socket() {
    let env = Env::new();
    socket_dir(&env);
    let sock = env.control_socket();
    std::fs::write(&sock, "not a socket").unwrap();
    let out = kharonctl::run(&env, &["status"]);
    assert!(!out.success(), "{out:?}");
    assert!(out.stderr.contains("is a regular file, not a socket"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&sock).unwrap(), "not a socket");
}

#[test]
fn kharonctl_refuses_a_socket_served_by_another_user() {
    use std::os::unix::process::CommandExt;

    // The listener binds as `nobody` in a directory it can write; the socket file is then given
    // to us, so only the peer credentials of the connection tell who answers.
    let env = Env::new();
    let dir = tempfile::Builder::new().prefix("khforeign").tempdir_in("/tmp").unwrap();
    kharon_e2e::set_mode(dir.path(), 0o777);
    let sock = dir.path().join("kharond.sock");
    let mut listener = Command::new("/usr/bin/systemd-socket-activate")
        .arg("-l")
        .arg(&sock)
        .args(["sleep", "60"])
        .uid(OTHER_UID)
        .gid(OTHER_UID)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run systemd-socket-activate as nobody");
    let bound = wait_until(Duration::from_secs(10), || sock.exists());
    assert!(bound, "the foreign listener did not bind");
    // The socket and its directory given to us, private: only who listens is left to tell.
    std::os::unix::fs::chown(&sock, Some(kharon_common::paths::uid()), None).unwrap();
    kharon_e2e::set_mode(dir.path(), 0o700);

    let socket = sock.display().to_string();
    let out = kharonctl::run_with(&env, &["status"], &[("KHARON_CONTROL_SOCKET", &socket)]);
    let _ = listener.kill();
    let _ = listener.wait();
    assert!(!out.success(), "{out:?}");
    assert!(
        out.stderr.contains(&format!("served by a process of uid {OTHER_UID}, not by us")),
        "{}",
        out.stderr
    );
}

/// utime + stime of `pid` so far, from /proc/PID/stat.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces; the fields after it are fixed.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let per_second =
        nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().expect("CLK_TCK") as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn out_of_descriptors_the_control_socket_waits_instead_of_spinning() {
    let env = Env::new();
    let inv = write_inventory(&env);
    // Idle SOCKS clients must hold their descriptor for the whole test.
    let config = env.write("config.toml", "handshake_timeout_secs = 120\n");
    let daemon = Kharond::start(&env, &["--inventory", &inv, "--config", config.to_str().unwrap()]);
    let pid = daemon.pid();

    // A few descriptors above what it holds now, as a hard limit it cannot raise again.
    let limit = open_descriptors(pid) as u64 + 4;
    rlimit::prlimit(pid as i32, rlimit::Resource::NOFILE, Some((limit, limit)), None).expect("prlimit");

    // Idle SOCKS clients until every descriptor is taken; the rest wait in the backlog.
    let mut clients = Vec::new();
    for _ in 0..16 {
        clients.push(std::net::TcpStream::connect(daemon.socks_addr()).unwrap());
    }
    let full = wait_until(Duration::from_secs(20), || open_descriptors(pid) as u64 >= limit);
    assert!(full, "kharond holds {} of {limit} descriptors", open_descriptors(pid));
    // Control clients now wait in the control socket's backlog; each accept fails with EMFILE.
    let controls: Vec<_> =
        (0..3).map(|_| std::os::unix::net::UnixStream::connect(env.control_socket()).unwrap()).collect();

    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_time(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_time(pid) - before;
    eprintln!("kharond used {used:?} of CPU in 2 s while out of descriptors");
    // A spinning accept loop burns most of a core (about 2 s here); backing off needs almost none.
    assert!(used < Duration::from_millis(300), "kharond used {used:?} of CPU in 2 s:\n{}", daemon.log());

    drop(controls);
    drop(clients);
    let answers = wait_until(Duration::from_secs(20), || kharonctl::run(&env, &["status"]).success());
    assert!(answers, "kharonctl status must answer once descriptors are free:\n{}", daemon.log());
    assert!(daemon.log().contains("control socket: accept failed"), "{}", daemon.log());
}

/// Without XDG_RUNTIME_DIR the control socket goes to `$TMPDIR/kharon-<uid>`, a name
/// anyone can take in a shared folder. A symbolic link planted there by another user is refused
/// (lstat), even while it points at a private directory of ours, and nothing is created through it.
#[test]
fn kharond_refuses_a_fallback_socket_folder_another_user_planted_as_a_link() {
    assert!(nix::unistd::geteuid().is_root(), "planting a link as another user (lchown) needs root");
    let env = Env::new();
    let inv = write_inventory(&env);
    let tmp = env.path().join("shared-tmp");
    std::fs::create_dir(&tmp).unwrap();
    kharon_e2e::set_mode(&tmp, 0o1777);
    let ours = env.path().join("looks-like-ours");
    std::fs::create_dir(&ours).unwrap();
    kharon_e2e::set_mode(&ours, 0o700);
    let planted = tmp.join("kharon-0");
    std::os::unix::fs::symlink(&ours, &planted).unwrap();
    std::os::unix::fs::lchown(&planted, Some(OTHER_UID), Some(OTHER_UID)).unwrap();

    let mut cmd = Command::new(kharon_e2e::bin("kharond"));
    cmd.env_clear()
        .envs(env.vars().into_iter().filter(|(k, _)| k != "XDG_RUNTIME_DIR"))
        .env("TMPDIR", &tmp)
        .args(["--listen", "127.0.0.1:0", "--inventory", &inv])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let out = kharon_e2e::output_within(cmd.spawn().unwrap(), Duration::from_secs(20))
        .expect("kharond kept running: it put its socket through the planted link");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "kharond started through the planted link:\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} is a symbolic link owned by uid 65534, not by us (uid 0)",
            planted.display()
        )),
        "{stderr}"
    );
    assert!(std::fs::read_dir(&ours).unwrap().next().is_none(), "a socket was created through the link");
    assert!(std::fs::symlink_metadata(&planted).unwrap().file_type().is_symlink(), "the link must stay");
}

/// kharonctl run by another user against someone's socket (a `KHARON_CONTROL_SOCKET` or
/// `XDG_RUNTIME_DIR` kept across `sudo -u`): it says whose kharond that is and what to do, not
/// only "Permission denied".
#[test]
fn kharonctl_of_another_user_is_told_whose_socket_it_is_and_what_to_do() {
    use std::os::unix::process::CommandExt;

    let env = Env::new();
    let inv = write_inventory(&env);
    let _daemon = Kharond::start(&env, &["--inventory", &inv]);
    // The other user's own HOME and XDG dirs, so that only the socket is someone else's.
    let theirs = Env::new();
    for dir in ["", "home", "config", "cache", "run"] {
        std::os::unix::fs::chown(theirs.path().join(dir), Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    }
    let out = Command::new(kharon_e2e::bin("kharonctl"))
        .env_clear()
        .envs(theirs.vars())
        .env("KHARON_CONTROL_SOCKET", env.control_socket())
        .arg("status")
        .uid(OTHER_UID)
        .gid(OTHER_UID)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for part in [
        format!(
            "cannot reach control socket {}: it lies in directory {} of uid 0 (root), which does not let you in \
             (mode 700; you are uid {OTHER_UID} (nobody)). It is that user's kharond, not yours",
            env.control_socket().display(),
            env.path().join("run").display()
        ),
        "start yours (`kharonctl service-install`, or `kharond`)".to_owned(),
        "KHARON_CONTROL_SOCKET".to_owned(),
        "or run kharonctl as uid 0 (root)".to_owned(),
    ] {
        assert!(stderr.contains(&part), "{part:?} missing:\n{stderr}");
    }
    assert!(!stderr.contains("Permission denied"), "{stderr}");
}

/// A socket directory that stops being the user's own while kharond runs (given away, opened to
/// everyone) is noticed by kharonctl, which refuses it as kharond does at start; made private
/// again, it is talked to again.
#[test]
fn kharonctl_refuses_a_socket_directory_that_stopped_being_private_while_kharond_runs() {
    let env = Env::new();
    let inv = write_inventory(&env);
    let _daemon = Kharond::start(&env, &["--inventory", &inv]);
    let dir = env.control_socket().parent().unwrap().to_owned();
    assert!(kharonctl::run(&env, &["status"]).success());

    std::os::unix::fs::chown(&dir, Some(OTHER_UID), None).unwrap();
    let out = kharonctl::run(&env, &["status"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "directory {} is owned by uid {OTHER_UID}, not by us (uid 0); refusing to talk to the control socket there",
            dir.display()
        )),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("then restart kharond"), "{}", out.stderr);

    std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
    kharon_e2e::set_mode(&dir, 0o777);
    let out = kharonctl::run(&env, &["reload"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("is writable by others (mode 777); refusing to talk"), "{}", out.stderr);
    assert!(out.stderr.contains(&format!("chmod 700 {}", dir.display())), "{}", out.stderr);

    kharon_e2e::set_mode(&dir, 0o700);
    assert!(kharonctl::run(&env, &["status"]).success());
}
