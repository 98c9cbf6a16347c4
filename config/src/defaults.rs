//! Each setting's default and the range its value must lie in, in one place.

use std::time::Duration;

/// Default SOCKS listen address: loopback only (house rule 6).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:12000";
/// How long a SOCKS client may take to send its greeting, auth and request.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long resolving and connecting a target may take before the client gets a reply code.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// VSHN's production Lieutenant, the default of Go kharon's `update` (its `internal/cmd/update.go`),
/// so the first `kharonctl update` works without any setting.
pub const DEFAULT_LIEUTENANT_URL: &str = "https://api.syn.vshn.net";
/// The range of `handshake_timeout_secs` and `connect_timeout_secs`. Both are waits a client
/// sits through before it hears anything: an hour is far past any useful value (a TCP connect
/// gives up after about two minutes of SYN retries), and a bound keeps deadlines computed from
/// them (`now + timeout`) representable.
pub const TIMEOUT_SECS: std::ops::RangeInclusive<u64> = 1..=3600;
/// How long connections through a jump host wait for a person to answer its question (a one-time
/// password), unless `answer_wait_secs` says otherwise. sshd gives a whole login `LoginGraceTime`
/// (120 s unless configured, sshd_config(5)); 90 s is time to find a token or open an app, and
/// leaves sshd's own time for its verdict and a second question.
pub const DEFAULT_ANSWER_WAIT: Duration = Duration::from_secs(90);
/// How long one reload may take, waiting for an earlier one included, unless
/// `reload_deadline_secs` says otherwise. Reading and compiling a 10,000-cluster inventory and an
/// ssh config takes well under a second, so this only trips on a read that hangs or `Match exec`
/// commands that take long, and leaves room for a slow disk or a network home directory.
pub const DEFAULT_RELOAD_DEADLINE: Duration = Duration::from_secs(30);
/// The range of `reload_deadline_secs`: below kharonctl's 60 s call timeout, so that the user gets
/// kharond's explanation rather than a bare client timeout.
pub const RELOAD_DEADLINE_SECS: std::ops::RangeInclusive<u64> = 1..=55;
/// The range of `ssh_window` sizes: the engine's smallest and largest window.
pub const SSH_WINDOW_BYTES: std::ops::RangeInclusive<u64> = (256 << 10)..=(16 << 20);
/// VSHN's Passbolt, which holds the emergency credentials' bucket list (docs/emergency-credentials.md).
pub const DEFAULT_PASSBOLT_URL: &str = "https://cloud.passbolt.com/vshn";
