//! Every value the engine is tuned with, and its default, in one place: the daemon sets the few
//! a user may choose (kharond's config file: the window policy, how long a question waits),
//! tests and benchmarks set any of them in-process. A figure that justifies a default names the
//! benchmark that reproduces it.

use std::time::Duration;

/// The engine's settings ([`crate::PoolSettings::engine`]).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub flow: FlowSettings,
    pub sessions: SessionSettings,
    pub login: LoginSettings,
    pub transport: TransportSettings,
}

/// How a path's sessions are sized (`flow`).
#[derive(Debug, Clone)]
pub struct FlowSettings {
    /// Which rule sizes the windows.
    pub policy: WindowPolicy,
    /// A channel's window is re-opened once this much of it has arrived: OpenSSH's three 32 KiB
    /// packets (channels.c, `channel_check_window`: `c->local_window_max - c->local_window >
    /// c->local_maxpacket*3`), so what is in flight stays near the whole window and about one
    /// bandwidth-delay product fills a link. And always once less than half is left, russh's own
    /// rule.
    pub reopen_after: u32,
    /// …or, for a window larger than this many such batches, once this share of it has arrived:
    /// each adjust of a nested hop's session is a packet of its own on every hop before it, and
    /// through three loopback hops adjusts every three packets cost a sixth of the throughput
    /// (`HOPS=3 bench/routed.sh 512 50 7`; vendor/README.md).
    pub reopen_share: u32,
    /// OpenSSH's packet size (`CHAN_TCP_PACKET_DEFAULT`, channels.h), what its sshd reads from a
    /// forwarded socket per pass (`CHANNEL_MAX_READ`), what we send per packet, and the largest a
    /// near jump host may send us: the unit a reader's batch is counted in.
    pub packet: u32,
    /// The largest data packet a far jump host may send us: about two [`Self::packet`]s, so that
    /// an sshd which reads 32 KiB per pass and sends one packet per pass drains a backlog in its
    /// channel buffer instead of carrying it along (docs/ssh-engine.md, "At 1 Gbit/s"). Not
    /// 64 KiB: russh logs an error above 65,535.
    pub large_packet: u32,
    /// Sessions dialled with a larger window than this get [`Self::large_packet`]s: twice
    /// OpenSSH's own window, a backlog whose cost is at most four times what OpenSSH users pay.
    /// A near hop's dial round trip includes its sshd's start-up (13 ms on loopback with sshd
    /// logging at DEBUG1), which lifts its window a little past 2 MiB; this one takes about 26 ms
    /// at the assumed 1 Gbit/s. On loopback, large packets cost both ends a quarter more CPU per
    /// byte (`bench/routed.sh`).
    pub large_packets_above: u32,
    pub meter: MeterSettings,
    pub adaptive: AdaptiveSettings,
}

/// Which rule sizes a path's windows (`flow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowPolicy {
    /// Windows follow what the path is measured to carry (`flow::adaptive`).
    Adaptive,
    /// Every session and channel gets this window, as `ssh` gives every channel OpenSSH's 2 MiB
    /// (`flow::fixed`); nothing is measured.
    Fixed(u32),
}

impl WindowPolicy {
    /// OpenSSH's own window (`CHAN_TCP_WINDOW_DEFAULT`, channels.h): what `ssh -D` gives a channel.
    pub const OPENSSH: WindowPolicy = WindowPolicy::Fixed(2 * 1024 * 1024);
}

/// How a path is measured while its channels carry data (`flow::meter`).
#[derive(Debug, Clone)]
pub struct MeterSettings {
    /// The pause between one ping's answer and the next ping: about five samples a second on a
    /// 50 ms path, a 60-byte request each.
    pub gap: Duration,
    /// How long a ping may take; one that takes longer counts as this long (a queue that deep
    /// shrinks the window anyway), and the next one is sent.
    pub ping_limit: Duration,
    /// An interval that moved fewer bytes than this ends the measuring: nothing bulk is flowing.
    /// Measuring starts only once this much has arrived, too: a ping per small request delayed
    /// one request in ten by 80-90 ms on an idle 50 ms path (`bench/shaped.sh`, 4 repetitions).
    pub busy: u64,
    /// Pings of a quiet path, [`Self::gap`] apart, whose lowest seeds the minimum round trip: a
    /// new session's, and the end of a busy spell's. One is not enough: a new session's first
    /// answer took 64 ms on a 20 ms path in one run, and the end of a download found 30-40 ms
    /// while its queue drained (`bench/shaped.sh`, traced).
    pub quiet_pings: usize,
    /// The shortest step at which a drain reads what was delivered (flow/adaptive.rs,
    /// "Draining"): a step is otherwise the time the link takes to carry the drain's window, at
    /// most [`Self::gap`].
    pub drain_step: Duration,
    /// The longest a drain waits for its ping, in multiples of the time the far side needs to use
    /// up what it was allowed at the path's measured rate: the rate can be a burst's, above the
    /// link's own (28 against 24 MB/s on 10 ms each way at 200 Mbit/s, `bench/shaped.sh` traced),
    /// and a transfer that ends meanwhile never uses it up. Ending the wait earlier, when the
    /// link carried less than half its rate for 20 ms, did not work: kharond's reads come in
    /// bursts, and such a drain ended with 1.43 of 1.97 MB delivered, its ping 38 ms on a 20 ms
    /// path (`ONLY=200m bench/shaped.sh`, traced).
    pub drain_limit: f64,
}

/// The adaptive window rule's parameters (`flow::adaptive`, whose module doc says what each is
/// for in the rule).
#[derive(Debug, Clone)]
pub struct AdaptiveSettings {
    /// Bandwidth-delay products of window: one keeps the link full once windows re-open early,
    /// the quarter more lets a rate the window limited show that it can grow. With 1.0 and no
    /// [`Self::slack`] the window settled at 527 KiB on 10 ms each way at 200 Mbit/s and left the
    /// link a fifth short; 768 KiB (what 1.25 BDP and the slack come to there) filled it at the
    /// small-request latency of an idle link (`bench/shaped.sh`).
    pub gain: f64,
    /// Bytes in flight that a ping's round trip does not account for: the three 32 KiB packets
    /// that arrive before a window is re-opened, and one more held by an sshd on the way.
    pub slack: f64,
    /// The smallest window: eight 32 KiB packets, well under a BDP of any path worth measuring,
    /// what a link of ~20 Mbit/s at 50 ms needs.
    pub floor: u32,
    /// The largest window: a full 1 Gbit/s link up to ~65 ms.
    pub ceiling: u32,
    /// How long the lowest round trip stands for the path's own. BBR keeps 10 s and then drains
    /// its own queue to measure again; a receiver cannot make the far sshd drain, and under a long
    /// download every ping waits behind the window's own quarter BDP, so a minimum that expires
    /// there is replaced by a queued one and the window grows on its own queue (with 30 s:
    /// 783, 957, then 1175 KiB within a minute on 10 ms each way at 200 Mbit/s, `bench/shaped.sh`).
    /// Every dial and every quiet moment measures it too.
    pub min_rtt_span: Duration,
    /// BBR's bottleneck-rate filter: the highest rate of this many samples (about ten round
    /// trips).
    pub rate_samples: usize,
    /// A queue must show in this many consecutive samples (their lowest round trip) to count.
    /// Two: under a deep queue a sample takes 2-4 s, and every second of it is a second other
    /// requests wait.
    pub recent: usize,
    /// Queueing below this is not worth a smaller window: on a loaded 2-core machine a ping may
    /// wait tens of milliseconds for the CPU, and a loopback path would shrink for that. Half of
    /// LEDBAT's target (RFC 6817 §2.5: TARGET at most 100 ms).
    pub queue_floor: Duration,
    /// The window a path starts with, before its first sample: OpenSSH's own, what `ssh -D` keeps
    /// for good. From there the startup doubles it per sample while the rate grows with it.
    pub start: u32,
    /// The startup doubles the window again only while each sample's rate is at least this
    /// many times the highest one before (BBR's startup ends on 1.25 too): a rate that grows
    /// less shows the link, not the window, is what limits it.
    pub startup_growth: f64,
    /// The smallest window a hop before the last is dialled with: OpenSSH's own. Such a hop's
    /// one channel carries the next hop's session, whose own window bounds what is in flight, so
    /// a larger one costs nothing and a smaller one could starve it.
    pub assumed_floor: u32,
    /// The fastest link a hop is assumed to sit behind: 1 Gbit/s, in bytes per second. It sizes
    /// the windows of hops before the last, and the packet size of every hop (`Flow::dial_hop`).
    pub assumed_rate: f64,
    /// The window a drain holds the path's channels to while it measures the path's own round
    /// trip (`flow::adaptive`, "Draining"): four 32 KiB packets, one more than a channel takes
    /// before it is re-opened, so that every channel keeps moving, and under a BDP of any path
    /// whose queue is worth draining (a quarter of one at 10 ms each way and 200 Mbit/s).
    pub drain_window: u32,
}

/// The shared sessions (`sessions`).
#[derive(Debug, Clone)]
pub struct SessionSettings {
    /// First backoff after a failed dial; doubled per further failure up to [`Self::backoff_max`].
    pub backoff_min: Duration,
    /// The cap is what a user waits, at worst, after the network comes back: a link that is down
    /// fails every dial at once (no route), so the backoff reaches its cap within seconds; the
    /// soak measured 28 s of recovery after 30 s of link loss with a 30 s cap (`bench/soak.sh`).
    /// A dead jump host still sees at most one dial per cap, and only while requests keep coming.
    pub backoff_max: Duration,
    /// A session is replaced after this many channels closed by us first: russh keeps each one's
    /// state, ~5 KiB, until the session ends (tunnel.rs, "Who closes"); 2,000 aborted downloads
    /// cost 10 MB. So at most ~5 MB per chain, and one extra handshake per 1,000 aborts.
    pub retire_after: u64,
    /// How long a suspect session (after a sleep, or a channel open that timed out) gets to
    /// answer a keepalive before it is given up.
    pub probe: Duration,
    /// A sleep shorter than this is not worth probing every session for (nor is clock noise).
    pub sleep_jump: Duration,
    /// How long sshd's identification line is waited for after the connect (it times the first
    /// hop's round trip); a server that does not speak first is not waited for longer.
    pub banner_wait: Duration,
    /// How long a failed authentication waits for the session to report the server's reason.
    pub auth_disconnect_wait: Duration,
    /// Below this, a channel message from a nested hop is answered (chain.rs, `Handler::answer`).
    pub small_message: usize,
    /// What a tunnel buffers for a client slower than the SSH link, in bytes (counted in the
    /// packets its session's jump host may send): more than the largest window, so a client
    /// that reads at all never holds up the shared session.
    pub tunnel_buffer: usize,
    /// How long a full tunnel buffer waits for its client before the channel is given up.
    pub stalled_grace: Duration,
    /// How long a closed tunnel whose EOFs have crossed waits for the server's CLOSE (tunnel.rs,
    /// "Who closes"); a server answers within a round trip, so this only bounds a broken one.
    pub close_wait: Duration,
    /// Name lookups of the preflight check at once.
    pub preflight_lookups: usize,
    /// How long the preflight check waits for its lookups in all.
    pub preflight_deadline: Duration,
    /// Jump hosts a preflight finding names before "and N more".
    pub preflight_named: usize,
    /// How long the preflight check waits for the ssh-agent's socket to accept.
    pub agent_connect: Duration,
    /// Bytes a session's writer lets wait in front of the first hop's socket (its transports'
    /// buffers, backlog.rs) before it hands russh more: what a new request's bytes may find
    /// queued ahead of them during an upload (uplink.rs).
    pub uplink_backlog: usize,
    /// Bytes a tunnel hands to its lane of the session's writer before its writes wait: what one
    /// channel may have queued there at a time.
    pub lane_bytes: usize,
    /// How long a channel's closing EOF, once the server has sent its own, waits for the chain's
    /// next channel open to go out with it (uplink.rs, "A teardown goes out with the next
    /// open"). Long enough for the next command of a script or a `kubectl` loop to connect;
    /// meanwhile the closed connection keeps its channel and its task, nothing else.
    pub teardown_hold: Duration,
}

/// Logging in (`login`).
#[derive(Debug, Clone)]
pub struct LoginSettings {
    /// How long a question stays open for a person. sshd gives a whole login `LoginGraceTime`
    /// (120 s unless configured, counted from the connection's start, sshd_config(5)); waiting as
    /// long would mostly end in sshd's disconnect instead of a message that says what to do. 90 s
    /// is time to find a token or open an app, and leaves sshd's own time for its verdict (PAM
    /// waits 2 s or more after a wrong code) and a second question.
    pub answer_wait: Duration,
}

/// The transports sessions run over (`transport`).
#[derive(Debug, Clone)]
pub struct TransportSettings {
    /// Bytes read from the first hop's socket at most per read. russh reads every packet with two
    /// exact reads, each followed by the QUICKACK re-arm; through this buffer one recv and one
    /// re-arm serve up to eight packets. On loopback, 1 GiB against `ssh -D` through the same
    /// sshd: with it 1.04-1.10× and 0.40 s CPU per GiB, without 0.89-0.95× and 0.48-0.52 s;
    /// 64 KiB saved less CPU (`bench/routed.sh`).
    pub read_buffer: usize,
    /// Bytes gathered at most before a write waits for the socket (gather.rs).
    pub gather_limit: usize,
    /// Bytes taken off an outer hop's channel ahead of the nested session: more than the largest
    /// window, so a session that reads at all never holds up the outer loop (carrier.rs).
    pub carrier_buffer: usize,
    /// The end of a `ProxyCommand`'s stderr kept for an error message, in bytes.
    pub stderr_tail: usize,
    /// Unsent bytes the kernel holds of the first hop's socket at most (`TCP_NOTSENT_LOWAT`,
    /// tcp.rs): what a bulk upload can queue there in front of other channels' bytes.
    pub notsent_lowat: u32,
}

impl Default for FlowSettings {
    fn default() -> Self {
        FlowSettings {
            policy: WindowPolicy::Adaptive,
            reopen_after: 3 * 32 * 1024,
            reopen_share: 8,
            packet: 32 * 1024,
            large_packet: 65_535,
            large_packets_above: 4 * 1024 * 1024,
            meter: MeterSettings::default(),
            adaptive: AdaptiveSettings::default(),
        }
    }
}

impl Default for MeterSettings {
    fn default() -> Self {
        MeterSettings {
            gap: Duration::from_millis(100),
            ping_limit: Duration::from_secs(3),
            busy: 64 * 1024,
            quiet_pings: 3,
            drain_step: Duration::from_millis(5),
            drain_limit: 2.0,
        }
    }
}

impl Default for AdaptiveSettings {
    fn default() -> Self {
        AdaptiveSettings {
            gain: 1.25,
            slack: 4.0 * 32.0 * 1024.0,
            floor: 256 * 1024,
            ceiling: 16 * 1024 * 1024,
            min_rtt_span: Duration::from_secs(600),
            rate_samples: 10,
            recent: 2,
            queue_floor: Duration::from_millis(50),
            start: 2 * 1024 * 1024,
            startup_growth: 1.25,
            assumed_floor: 2 * 1024 * 1024,
            assumed_rate: 125_000_000.0,
            drain_window: 128 * 1024,
        }
    }
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(8),
            retire_after: 1000,
            probe: Duration::from_secs(2),
            sleep_jump: Duration::from_secs(3),
            banner_wait: Duration::from_secs(1),
            auth_disconnect_wait: Duration::from_millis(500),
            small_message: 16 * 1024,
            tunnel_buffer: 32 << 20,
            stalled_grace: Duration::from_secs(3),
            close_wait: Duration::from_secs(1),
            preflight_lookups: 16,
            preflight_deadline: Duration::from_secs(5),
            preflight_named: 3,
            agent_connect: Duration::from_secs(2),
            uplink_backlog: 128 * 1024,
            lane_bytes: 64 * 1024,
            teardown_hold: Duration::from_millis(500),
        }
    }
}

impl Default for LoginSettings {
    fn default() -> Self {
        LoginSettings { answer_wait: Duration::from_secs(90) }
    }
}

impl Default for TransportSettings {
    fn default() -> Self {
        TransportSettings {
            read_buffer: 256 * 1024,
            gather_limit: 256 * 1024,
            carrier_buffer: 32 << 20,
            stderr_tail: 2048,
            notsent_lowat: 128 * 1024,
        }
    }
}
