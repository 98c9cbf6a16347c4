//! `kharonctl service-install` and `service-uninstall`: run kharond under the user's service manager
//! (a systemd user unit on Linux, a launchd agent on macOS).
//!
//! What the files contain is `crate::service`'s business; this file finds the inputs (the kharond
//! binary, the ssh-agent, the listen address), writes only what changed, and asks the manager to
//! (re)start the daemon when it can be reached. It is idempotent: a second run with the same inputs
//! writes nothing and says so. Without a reachable manager (no user bus, a container, `--no-start`)
//! the files are still written and the command says how to start the service later.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context as _, bail};

use crate::context::Context;
use crate::service::{self, Agent, File, Inputs, Platform, is_per_login_agent, launchd, systemd};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  kharonctl service-install --dry-run\n  \
    kharonctl service-install --socket-activation\n  kharonctl service-uninstall")]
pub struct Args {
    /// Print the files with their target paths; write nothing, start nothing
    #[arg(long)]
    dry_run: bool,
    /// Let systemd create the SOCKS listener and the control socket (socket units; Linux only)
    #[arg(long)]
    socket_activation: bool,
    /// Write the files but neither enable nor start the service
    #[arg(long)]
    no_start: bool,
    /// The kharond binary the service runs [default: next to kharonctl, else the first on PATH]
    #[arg(long, value_name = "PATH")]
    kharond: Option<PathBuf>,
    /// Write the files of another platform (for tests and packagers)
    #[arg(long, value_enum, hide = true)]
    platform: Option<Platform>,
}

#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// Print what would be removed; change nothing
    #[arg(long)]
    dry_run: bool,
    /// Remove the files without asking the service manager to stop the service
    #[arg(long)]
    no_stop: bool,
    /// Remove the files of another platform (for tests)
    #[arg(long, value_enum, hide = true)]
    platform: Option<Platform>,
}

/// A non-empty environment variable. This command reads the user's session (desktop, agent,
/// runtime dir) on purpose: the service must see what the user's shell sees.
fn getenv(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let platform = args.platform.unwrap_or_else(Platform::current);
    if args.socket_activation && platform == Platform::Macos {
        bail!(
            "--socket-activation needs systemd; on macOS launchd starts kharond, which binds its own sockets"
        );
    }
    let home = home()?;
    let dir = unit_dir(platform, &home);
    let kharond = kharond_binary(&args)?;
    let agent = match platform {
        Platform::Linux => Agent::for_systemd(&getenv),
        Platform::Macos => Agent::for_launchd(&getenv),
    };
    warn_about_agent(platform, &agent);
    let inputs = Inputs {
        kharond,
        home: home.clone(),
        agent,
        listen: ctx.config.listen.value,
        control_socket: systemd_path(&ctx.config.control_socket.value),
        socket_activation: args.socket_activation,
    };
    let files = service::render(platform, &dir, &inputs);
    let stale = stale_socket_units(platform, &dir, &files);

    if args.dry_run {
        print_files(&files)?;
        for path in &stale {
            println!("==> {} <== (would be removed)", path.display());
        }
        return Ok(ExitCode::SUCCESS);
    }

    let changed = install_files(platform, &home, &files, &stale, args.no_start)?;
    if args.no_start {
        eprintln!("not starting the service (--no-start); start it with: {}", start_hint(platform, &files));
        return Ok(ExitCode::SUCCESS);
    }
    start_service(platform, &files, changed);
    Ok(ExitCode::SUCCESS)
}

/// The kharond binary the service runs: `--kharond` made absolute and checked, else [`find_kharond`].
fn kharond_binary(args: &Args) -> anyhow::Result<PathBuf> {
    let Some(path) = &args.kharond else {
        return find_kharond();
    };
    let path = std::path::absolute(path).with_context(|| format!("{}", path.display()))?;
    if !is_executable(&path) {
        bail!("{} is not an executable file; pass the kharond binary to --kharond", path.display());
    }
    Ok(path)
}

/// Warns on stderr when the service gets no ssh-agent, or one whose socket changes with every login.
fn warn_about_agent(platform: Platform, agent: &Agent) {
    match agent {
        Agent::Inherit if platform == Platform::Linux => eprintln!(
            "warning: SSH_AUTH_SOCK is not set, so kharond will have no ssh-agent and can only use key files \
             without a passphrase; start your agent and run service-install again"
        ),
        // `ssh-agent` started by hand or by a login script picks a new random directory each time.
        Agent::Socket(sock) if is_per_login_agent(sock) => eprintln!(
            "note: the service will use the ssh-agent at {sock}, which changes with every login; {} and run \
             service-install again",
            match platform {
                Platform::Linux =>
                    "prefer an agent with a fixed socket (e.g. `systemctl --user enable --now \
                                    ssh-agent`, %t/ssh-agent.socket)",
                Platform::Macos =>
                    "prefer the agent macOS starts at every login (leave SSH_AUTH_SOCK as \
                                    launchd sets it) or one with a fixed socket (1Password, Secretive)",
            }
        ),
        _ => {}
    }
}

/// The socket units in `dir` that `files` does not contain: an earlier `--socket-activation`
/// install wrote them, and this install does not want them.
fn stale_socket_units(platform: Platform, dir: &Path, files: &[File]) -> Vec<PathBuf> {
    match platform {
        Platform::Linux => systemd::ALL
            .iter()
            .map(|name| dir.join(name))
            .filter(|path| path.exists() && !files.iter().any(|f| &f.path == path))
            .collect(),
        Platform::Macos => Vec::new(),
    }
}

/// Writes the files that changed and removes the stale units (disabling them first unless
/// `no_start`), printing each outcome; returns whether anything on disk changed.
fn install_files(
    platform: Platform,
    home: &Path,
    files: &[File],
    stale: &[PathBuf],
    no_start: bool,
) -> anyhow::Result<bool> {
    let mut changed = false;
    for file in files {
        let outcome = write_if_changed(file)?;
        changed |= outcome != Outcome::Unchanged;
        println!("{} {}", outcome.as_str(), file.path.display());
    }
    if platform == Platform::Macos {
        let logs = home.join("Library/Logs");
        std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    }
    if !stale.is_empty() {
        let names: Vec<&str> = stale.iter().filter_map(|p| p.file_name()?.to_str()).collect();
        if !no_start {
            // Failing to disable is not fatal: the manager may be unreachable, or the unit already off.
            let _ = systemctl(&[&["disable", "--now"], &names[..]].concat());
        }
        for path in stale {
            std::fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))?;
            println!("removed {}", path.display());
        }
        changed = true;
    }
    if !changed {
        println!("all files unchanged");
    }
    Ok(changed)
}

/// Asks the service manager to (re)start the service; when it cannot be reached, says how to start
/// the service later instead of failing.
fn start_service(platform: Platform, files: &[File], changed: bool) {
    let started = match platform {
        Platform::Linux => start_systemd(files, changed),
        Platform::Macos => start_launchd(files, changed),
    };
    match started {
        Ok(message) => println!("{message}"),
        Err(e) => eprintln!(
            "note: the service manager is not reachable ({}); the files are installed, start the service \
             with: {}",
            kharon_common::errors::chain(e.as_ref()),
            start_hint(platform, files)
        ),
    }
}

pub async fn run_uninstall(args: UninstallArgs, _ctx: &Context) -> anyhow::Result<ExitCode> {
    let platform = args.platform.unwrap_or_else(Platform::current);
    let dir = unit_dir(platform, &home()?);
    let names: Vec<&str> = match platform {
        Platform::Linux => systemd::ALL.to_vec(),
        Platform::Macos => vec![launchd::FILE_NAME],
    };
    let installed: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).filter(|p| p.exists()).collect();
    if installed.is_empty() {
        println!("kharond is not installed as a service (nothing in {})", dir.display());
        return Ok(ExitCode::SUCCESS);
    }
    if args.dry_run {
        for path in &installed {
            println!("would remove {}", path.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !args.no_stop {
        let stopped = match platform {
            Platform::Linux => {
                let units: Vec<&str> = installed.iter().filter_map(|p| p.file_name()?.to_str()).collect();
                systemctl(&[&["disable", "--now"], &units[..]].concat())
            }
            Platform::Macos => {
                let args = launchd::stop_args(uid());
                launchctl(&args.iter().map(String::as_str).collect::<Vec<_>>())
            }
        };
        if let Err(e) = stopped {
            eprintln!(
                "note: could not stop the service ({}); removing its files anyway",
                kharon_common::errors::chain(e.as_ref())
            );
        }
    }
    for path in &installed {
        std::fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))?;
        println!("removed {}", path.display());
    }
    if platform == Platform::Linux && !args.no_stop {
        let _ = systemctl(&["daemon-reload"]);
    }
    Ok(ExitCode::SUCCESS)
}

fn home() -> anyhow::Result<PathBuf> {
    match getenv("HOME") {
        Some(home) if Path::new(&home).is_absolute() => Ok(PathBuf::from(home)),
        _ => bail!("HOME is not set to an absolute path; cannot tell where the service files go"),
    }
}

/// `$XDG_CONFIG_HOME/systemd/user` (systemd reads it there), or `~/Library/LaunchAgents`.
fn unit_dir(platform: Platform, home: &Path) -> PathBuf {
    match platform {
        Platform::Linux => getenv("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".config"))
            .join("systemd/user"),
        Platform::Macos => home.join("Library/LaunchAgents"),
    }
}

/// A path for a unit file: below `$XDG_RUNTIME_DIR` it becomes `%t/…`, so the unit follows the
/// runtime directory of whichever session starts it.
fn systemd_path(path: &Path) -> String {
    let relative = getenv("XDG_RUNTIME_DIR").and_then(|rt| path.strip_prefix(rt).ok().map(Path::to_owned));
    match relative {
        Some(rest) => format!("%t/{}", systemd::escape_specifiers(&rest.to_string_lossy())),
        None => systemd::escape_specifiers(&path.to_string_lossy()),
    }
}

/// kharond next to the running kharonctl (how releases and `cargo install` lay them out), else the
/// first one on PATH. The path is absolute but symlinks are kept, so a package manager's
/// `bin/kharond` link keeps working across upgrades.
fn find_kharond() -> anyhow::Result<PathBuf> {
    let beside = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join("kharond")));
    if let Some(path) = beside.as_ref().filter(|p| is_executable(p)) {
        return Ok(path.clone());
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join("kharond"))
            .find(|p| is_executable(p))
    });
    match on_path {
        Some(path) => Ok(path),
        None => bail!(
            "cannot find kharond next to kharonctl{} or on PATH; install it, or pass its path with --kharond",
            beside.and_then(|p| Some(format!(" ({})", p.parent()?.display()))).unwrap_or_default()
        ),
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn uid() -> u32 {
    kharon_common::paths::uid()
}

fn print_files(files: &[File]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for (i, file) in files.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(out, "==> {} <==", file.path.display())?;
        out.write_all(file.contents.as_bytes())?;
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Created,
    Updated,
    Unchanged,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Updated => "updated",
            Outcome::Unchanged => "unchanged",
        }
    }
}

/// Writes `file` unless it already holds exactly these bytes; atomically (temp file + rename), mode
/// 0644 as service managers expect.
fn write_if_changed(file: &File) -> anyhow::Result<Outcome> {
    let outcome = match std::fs::read(&file.path) {
        Ok(old) if old == file.contents.as_bytes() => return Ok(Outcome::Unchanged),
        Ok(_) => Outcome::Updated,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Outcome::Created,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.path.display())),
    };
    kharon_common::files::write_atomic(&file.path, file.contents.as_bytes(), 0o644)
        .with_context(|| format!("cannot write {}", file.path.display()))?;
    Ok(outcome)
}

/// Runs a service-manager command; an error carries its stderr.
fn manager(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(program).args(args).output().with_context(|| format!("cannot run {program}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!("`{program} {}` failed: {}", args.join(" "), stderr.trim());
    }
    Ok(())
}

fn systemctl(args: &[&str]) -> anyhow::Result<()> {
    manager("systemctl", &[&["--user"], args].concat())
}

fn launchctl(args: &[&str]) -> anyhow::Result<()> {
    manager("launchctl", args)
}

fn unit_names(files: &[File]) -> Vec<&str> {
    files.iter().filter_map(|f| f.path.file_name()?.to_str()).collect()
}

/// Enables every unit; starts the service, or restarts it when a file changed (`enable --now`
/// leaves a running service on its old unit).
fn start_systemd(files: &[File], changed: bool) -> anyhow::Result<String> {
    let units = unit_names(files);
    systemctl(&["daemon-reload"])?;
    if changed {
        systemctl(&[&["enable"], &units[..]].concat())?;
        systemctl(&["restart", systemd::SERVICE])?;
        Ok(format!("enabled and (re)started {}", units.join(", ")))
    } else {
        systemctl(&[&["enable", "--now"], &units[..]].concat())?;
        Ok(format!("{} enabled and running", units.join(", ")))
    }
}

/// Bootstraps the agent into the GUI domain, or makes sure the loaded one runs
/// ([`launchd::start_steps`]).
fn start_launchd(files: &[File], changed: bool) -> anyhow::Result<String> {
    let uid = uid();
    let target = launchd::service_target(uid);
    let Some(plist) = files.first().map(|f| f.path.to_string_lossy().into_owned()) else {
        bail!("no plist to load");
    };
    let loaded = || launchctl(&["print", &target]).is_ok();
    let was_loaded = loaded();
    for step in launchd::start_steps(uid, &plist, was_loaded, changed) {
        match step {
            launchd::Step::Launchctl(args) => {
                launchctl(&args.iter().map(String::as_str).collect::<Vec<_>>())?
            }
            launchd::Step::AwaitBootout => {
                // At most 5 s, checked every 100 ms: launchd removes a service within moments.
                let gone = (0..50).any(|_| {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    !loaded()
                });
                if !gone {
                    bail!("launchd still has the old {} after `launchctl bootout {target}`", launchd::LABEL);
                }
            }
        }
    }
    Ok(if was_loaded && !changed {
        format!("{} is loaded and unchanged; started it if it was not running", launchd::LABEL)
    } else {
        format!("bootstrapped {} into {}", launchd::LABEL, launchd::domain(uid))
    })
}

fn start_hint(platform: Platform, files: &[File]) -> String {
    match platform {
        Platform::Linux => format!(
            "systemctl --user daemon-reload && systemctl --user enable --now {}",
            unit_names(files).join(" ")
        ),
        Platform::Macos => format!(
            "launchctl bootstrap gui/$(id -u) {}",
            files.first().map(|f| f.path.display().to_string()).unwrap_or_default()
        ),
    }
}
