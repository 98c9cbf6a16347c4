//! Startup failures: each is one clear line on stderr and a non-zero exit code. (No cache yet is
//! not one: see `first_start`.)

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory};

#[test]
fn a_corrupt_inventory_names_the_file() {
    let env = Env::new();
    let inv = env.write("broken.json", "{\"not\": \"an array\"}");
    let exited =
        Kharond::try_start(&env, &["--inventory", inv.to_str().unwrap()], &[]).err().expect("must fail");
    assert_eq!(exited.code, Some(2));
    assert!(exited.stderr.contains("broken.json"), "{}", exited.stderr);
    assert!(!exited.stderr.contains("panicked"), "{}", exited.stderr);
}

#[test]
fn a_busy_port_is_named_and_not_replaced_by_another() {
    let env = Env::new();
    let inv = env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]));
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let exited = Kharond::try_start(&env, &["--inventory", inv.to_str().unwrap(), "--listen", &addr], &[])
        .err()
        .expect("must fail on a busy port");
    assert_eq!(exited.code, Some(3));
    assert!(exited.stderr.contains(&addr), "{}", exited.stderr);
    assert!(!env.control_socket().exists(), "no control socket for a daemon that did not start");
}

#[test]
fn a_public_listen_address_needs_authentication() {
    let env = Env::new();
    let inv = env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]));
    let exited =
        Kharond::try_start(&env, &["--inventory", inv.to_str().unwrap(), "--listen", "0.0.0.0:0"], &[])
            .err()
            .expect("must refuse");
    assert_eq!(exited.code, Some(2));
    assert!(exited.stderr.contains("not loopback"), "{}", exited.stderr);
}

#[test]
fn socket_activation_uses_the_passed_listeners() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;

    let env = Env::new();
    let inv = env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]));
    let socks = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let socks_addr = socks.local_addr().unwrap();
    let sock_path = env.control_socket();
    std::fs::create_dir_all(sock_path.parent().unwrap()).unwrap();
    let control = std::os::unix::net::UnixListener::bind(&sock_path).unwrap();
    let (socks_fd, control_fd) = (socks.as_raw_fd(), control.as_raw_fd());

    // As systemd does: descriptors 3 and 4, LISTEN_PID set to the daemon's own pid (the shell
    // execs kharond, keeping its pid), names in LISTEN_FDNAMES.
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "LISTEN_PID=$$ exec \"$0\" \"$@\""])
        .arg(kharon_e2e::bin("kharond"))
        .args(["--inventory", inv.to_str().unwrap(), "--listen", "127.0.0.1:1"])
        .env_clear()
        .envs(env.vars())
        .env("LISTEN_FDS", "2")
        .env("LISTEN_FDNAMES", "socks:control")
        .stderr(std::fs::File::create(env.path().join("kharond.log")).unwrap());
    // SAFETY: only async-signal-safe fcntl/dup2 calls between fork and exec. The listeners are
    // first moved above fd 10, so neither can be overwritten by the other's dup2 (e.g. socks on 4,
    // control on 3), and the close-on-exec flag is cleared explicitly (dup2(3, 3) keeps it).
    unsafe {
        cmd.pre_exec(move || {
            let high_socks = libc::fcntl(socks_fd, libc::F_DUPFD, 10);
            let high_control = libc::fcntl(control_fd, libc::F_DUPFD, 10);
            if high_socks < 0
                || high_control < 0
                || libc::dup2(high_socks, 3) < 0
                || libc::dup2(high_control, 4) < 0
                || libc::fcntl(3, libc::F_SETFD, 0) < 0
                || libc::fcntl(4, libc::F_SETFD, 0) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let ready = kharon_e2e::wait_until(std::time::Duration::from_secs(20), || {
        kharon_e2e::kharonctl::run(&env, &["status", "-o", "json"]).success()
    });
    let status = kharon_e2e::kharonctl::run(&env, &["status", "-o", "json"]);
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read_to_string(env.path().join("kharond.log")).unwrap_or_default();
    assert!(ready, "daemon did not answer on the passed control socket:\n{log}");
    // --listen 127.0.0.1:1 would fail to bind; the passed listener is used instead.
    assert_eq!(status.json()["listen_address"], socks_addr.to_string());
    assert!(sock_path.exists(), "the manager's socket must not be removed by the daemon");
}

#[test]
fn a_timeout_beyond_an_hour_is_refused_naming_the_key() {
    let env = Env::new();
    let inv = env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]));
    let config = env.write("config.toml", "connect_timeout_secs = 9223372036854775807\n");
    let exited = Kharond::try_start(
        &env,
        &["--inventory", inv.to_str().unwrap(), "--config", config.to_str().unwrap()],
        &[],
    )
    .err()
    .expect("must refuse");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains("connect_timeout_secs = 9223372036854775807"), "{}", exited.stderr);
    assert!(exited.stderr.contains("between 1 and 3600 seconds"), "{}", exited.stderr);
    assert!(!exited.stderr.contains("panicked"), "{}", exited.stderr);
}

#[test]
fn a_password_file_others_may_read_is_warned_about_at_start() {
    let env = Env::new();
    let inv = env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]));
    let config = env.write("config.toml", "[socks]\nusername = \"u\"\npassword = \"hunter2\"\n");
    let args = ["--inventory", inv.to_str().unwrap(), "--config", config.to_str().unwrap()];
    let warning = format!("run `chmod 600 {}`", config.display());

    kharon_e2e::set_mode(&config, 0o644);
    let daemon = Kharond::start(&env, &args);
    let log = daemon.log();
    assert!(log.contains(&warning), "{log}");
    assert!(log.contains("mode 0644"), "{log}");
    assert!(!log.contains("hunter2"), "the password itself is never logged: {log}");
    drop(daemon);

    kharon_e2e::set_mode(&config, 0o600);
    let daemon = Kharond::start(&env, &args);
    assert!(!daemon.log().contains("chmod 600"), "{}", daemon.log());
}
