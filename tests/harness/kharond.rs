//! Starts the built `kharond` on an ephemeral port, waits until its control socket answers and
//! learns the SOCKS address from `kharonctl status -o json`. Keeps the daemon's log for failures.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Env, kharonctl, wait_until};

pub struct Kharond {
    child: Child,
    socks: SocketAddr,
    log: Arc<Mutex<String>>,
}

/// How a start attempt ended when the daemon exits by itself.
#[derive(Debug)]
pub struct Exited {
    pub code: Option<i32>,
    pub stderr: String,
}

fn spawn(
    env: &Env,
    args: &[&str],
    extra: &[(&str, &str)],
    nofile: Option<u64>,
) -> (Child, Arc<Mutex<String>>) {
    spawn_wrapped(env, &[], args, extra, nofile)
}

/// `wrapper… kharond …`: a wrapper that execs its last argument in place (`nsenter -t PID -n`),
/// so the child's pid stays kharond's.
fn spawn_wrapped(
    env: &Env,
    wrapper: &[&str],
    args: &[&str],
    extra: &[(&str, &str)],
    nofile: Option<u64>,
) -> (Child, Arc<Mutex<String>>) {
    let mut cmd = match wrapper.split_first() {
        Some((program, rest)) => {
            let mut cmd = Command::new(program);
            cmd.args(rest).arg(crate::bin("kharond"));
            cmd
        }
        None => Command::new(crate::bin("kharond")),
    };
    if let Some(limit) = nofile {
        use std::os::unix::process::CommandExt as _;
        let rlimit = libc::rlimit { rlim_cur: limit as libc::rlim_t, rlim_max: limit as libc::rlim_t };
        // SAFETY: setrlimit in the forked child before exec; it only reads the struct we pass.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.env_clear()
        .envs(env.vars())
        .env("RUST_LOG", "info,kharond=debug")
        .arg("--control-socket")
        .arg(env.control_socket())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if !args.contains(&"--listen") {
        cmd.args(["--listen", "127.0.0.1:0"]);
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn kharond");
    let log = Arc::new(Mutex::new(String::new()));
    if let Some(stderr) = child.stderr.take() {
        crate::collect_output(stderr, Arc::clone(&log));
    }
    (child, log)
}

impl Kharond {
    /// Starts the daemon and panics (with its log) if it is not serving within 20 s.
    pub fn start(env: &Env, args: &[&str]) -> Self {
        Self::start_with(env, args, &[])
    }

    pub fn start_with(env: &Env, args: &[&str], extra: &[(&str, &str)]) -> Self {
        match Self::try_start(env, args, extra) {
            Ok(daemon) => daemon,
            Err(exited) => panic!("kharond exited with {:?}:\n{}", exited.code, exited.stderr),
        }
    }

    /// Starts the daemon with its descriptor limit (soft and hard) at `nofile`, as a shell's
    /// `ulimit -n` would leave it; panics as [`Kharond::start`] does.
    pub fn start_with_nofile(env: &Env, args: &[&str], extra: &[(&str, &str)], nofile: u64) -> Self {
        let (child, log) = spawn(env, args, extra, Some(nofile));
        match Self::wait_ready(env, child, log) {
            Ok(daemon) => daemon,
            Err(exited) => panic!("kharond exited with {:?}:\n{}", exited.code, exited.stderr),
        }
    }

    /// Starts the daemon through `wrapper` (e.g. `nsenter -t PID -n --`, to run it in a network
    /// namespace a test made), which must exec kharond in place; panics as [`Kharond::start`].
    pub fn start_wrapped(env: &Env, wrapper: &[&str], args: &[&str], extra: &[(&str, &str)]) -> Self {
        let (child, log) = spawn_wrapped(env, wrapper, args, extra, None);
        match Self::wait_ready(env, child, log) {
            Ok(daemon) => daemon,
            Err(exited) => panic!("kharond exited with {:?}:\n{}", exited.code, exited.stderr),
        }
    }

    /// Starts the daemon; if it exits on its own instead, returns its exit code and stderr.
    pub fn try_start(env: &Env, args: &[&str], extra: &[(&str, &str)]) -> Result<Self, Exited> {
        let (child, log) = spawn(env, args, extra, None);
        Self::wait_ready(env, child, log)
    }

    fn wait_ready(env: &Env, mut child: Child, log: Arc<Mutex<String>>) -> Result<Self, Exited> {
        let socket = env.control_socket();
        let mut exited = None;
        let ready = wait_until(Duration::from_secs(20), || {
            if let Ok(Some(status)) = child.try_wait() {
                exited = Some(status.code());
                return true;
            }
            // Ready means *this* process answers: another daemon may own the socket.
            socket.exists() && {
                let out = kharonctl::run(env, &["status", "-o", "json"]);
                out.success() && out.json()["pid"] == child.id()
            }
        });
        if let Some(code) = exited {
            // Let the reader thread collect the last lines.
            wait_until(Duration::from_secs(2), || log.lock().map(|l| !l.is_empty()).unwrap_or(true));
            std::thread::sleep(Duration::from_millis(50));
            let stderr = log.lock().map(|l| l.clone()).unwrap_or_default();
            return Err(Exited { code, stderr });
        }
        if !ready {
            let _ = child.kill();
            let stderr = log.lock().map(|l| l.clone()).unwrap_or_default();
            panic!("kharond did not become ready within 20 s:\n{stderr}");
        }
        let status = kharonctl::run(env, &["status", "-o", "json"]).json();
        let socks = status["listen_address"].as_str().and_then(|a| a.parse().ok()).expect("listen address");
        Ok(Self { child, socks, log })
    }

    pub fn socks_addr(&self) -> SocketAddr {
        self.socks
    }

    /// `socks5h://127.0.0.1:PORT`, for curl and HTTPS_PROXY.
    pub fn proxy_url(&self) -> String {
        format!("socks5h://{}", self.socks)
    }

    /// `http://127.0.0.1:PORT`: the same port as an HTTP CONNECT proxy, for HTTPS_PROXY.
    pub fn http_proxy_url(&self) -> String {
        format!("http://{}", self.socks)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal (e.g. libc::SIGHUP) to the daemon, our own child.
    pub fn signal(&self, signal: i32) {
        let signal = nix::sys::signal::Signal::try_from(signal).expect("a signal number");
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), signal);
    }

    /// Resident memory (`VmRSS`), in KiB.
    pub fn rss_kib(&self) -> u64 {
        crate::procfs::rss_kib(self.pid())
    }

    /// How many file descriptors the daemon holds.
    pub fn open_fds(&self) -> usize {
        crate::procfs::open_fds(self.pid())
    }

    /// Everything the daemon logged so far.
    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Whether the daemon is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends a signal (e.g. libc::SIGTERM) and waits up to 10 s for the exit code.
    pub fn signal_and_wait(&mut self, signal: i32) -> Option<i32> {
        self.signal(signal);
        let mut code = None;
        wait_until(Duration::from_secs(10), || match self.child.try_wait() {
            Ok(Some(status)) => {
                code = status.code();
                true
            }
            _ => false,
        });
        code
    }
}

impl Drop for Kharond {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        crate::failure::print_log_if_failing("kharond log", || self.log());
    }
}
