//! How much a path's sessions let the far side send: the receive window and the packet size a
//! session is dialled with, the window its channels are re-opened to as it goes, and the
//! measurements that decide it.
//!
//! # The seam
//! The sessions see one type per jump host, [`Flow`]: they ask it what a session is dialled with
//! ([`Flow::dial_hop`]: window, largest packet, when a window is re-opened) and what a channel is
//! re-opened to now ([`Flow::window`], which the last hop's russh handler answers at every window
//! adjust: vendor/README.md, change 2), and they feed it ([`Flow::kick`] when data arrives,
//! [`Flow::follow`] with each new session to ping). Which rule decides the window is one setting,
//! `FlowSettings::policy`: the [`WindowRule`] trait has two implementations, the adaptive rule
//! that follows the path (`adaptive`) and OpenSSH's fixed window (`fixed`), as quinn keeps its
//! congestion controllers behind one `congestion::Controller` trait.
//!
//! Owns: the rules, measuring a path while its channels carry data (`meter`), and the packet
//! size and the buffers counted in it (`packets`).

mod adaptive;
mod fixed;
mod meter;
pub(crate) mod packets;
mod rule;
#[cfg(test)]
mod sim;

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

pub(crate) use crate::flow::meter::{Moved, Probe};

use crate::flow::meter::Meter;
use crate::flow::rule::WindowRule;
use crate::settings::{FlowSettings, WindowPolicy};

/// What a session is dialled with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dial {
    /// Its receive window (`client::Config::window_size`).
    pub window: u32,
    /// The largest data packet its jump host may send (`client::Config::maximum_packet_size`;
    /// russh opens every channel of the session with it).
    pub largest_packet: u32,
    /// When its channels' windows are re-opened (`client::Config::window_reopen`).
    pub reopen: russh::WindowReopen,
}

/// One jump host's flow control (see "The seam").
pub(crate) struct Flow {
    settings: Arc<FlowSettings>,
    rule: Arc<Mutex<Box<dyn WindowRule>>>,
    meter: Arc<Meter>,
    /// The zero of the rule's clock.
    born: Instant,
}

impl fmt::Debug for Flow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flow").field("rule", &*lock(&self.rule)).finish_non_exhaustive()
    }
}

/// The rule is plain data: a panic elsewhere leaves nothing half-written that matters.
fn lock(rule: &Mutex<Box<dyn WindowRule>>) -> std::sync::MutexGuard<'_, Box<dyn WindowRule>> {
    rule.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Flow {
    /// A path with `settings`' policy; `moved` reads the bytes its channels have received so far
    /// (the direction a receive window paces).
    pub(crate) fn new(settings: Arc<FlowSettings>, moved: Moved) -> Self {
        let rule: Box<dyn WindowRule> = match settings.policy {
            WindowPolicy::Adaptive => {
                Box::new(crate::flow::adaptive::Adaptive::new(settings.adaptive.clone()))
            }
            WindowPolicy::Fixed(window) => Box::new(crate::flow::fixed::Fixed::new(window)),
        };
        let rule = Arc::new(Mutex::new(rule));
        let born = Instant::now();
        let meter = Arc::new(Meter::new(settings.meter.clone(), rule.clone(), born, moved));
        Flow { settings, rule, meter, born }
    }

    /// [`Flow::dial_hop`] of a hop whose transport took as long as its answer.
    #[cfg(test)]
    pub(crate) fn dial(&self, rtt: Option<Duration>, last: bool) -> Dial {
        self.dial_hop(rtt, rtt, last)
    }

    /// What a session of a hop is dialled with (`last`: the chain's last hop): `rtt` is how long
    /// it took to answer, `transport` how long its transport alone took (a TCP connect, a
    /// channel open; `None` for both: unknown, a `ProxyCommand`). The packet size follows the
    /// transport's round trip, which no sshd's start-up lengthens (a loaded machine made a
    /// loopback hop's first byte take 30 ms, and a loopback hop got a far hop's packets).
    pub(crate) fn dial_hop(&self, rtt: Option<Duration>, transport: Option<Duration>, last: bool) -> Dial {
        let mut rule = lock(&self.rule);
        let window = rule.dial(self.born.elapsed(), rtt, last);
        let largest_packet = self.largest_packet(rule.reach(transport));
        Dial { window, largest_packet, reopen: self.reopen() }
    }

    /// The window the path's channels should be re-opened to now.
    pub(crate) fn window(&self) -> Option<u32> {
        lock(&self.rule).window()
    }

    /// Data arrived on one of the path's channels: measuring starts, if the rule measures and
    /// enough has arrived since it last ended (`meter`).
    pub(crate) fn kick(&self) {
        self.meter.kick();
    }

    /// Makes `session` the one the path is measured on (its newest), and pings it quietly now.
    pub(crate) fn follow(&self, session: Weak<dyn Probe>) {
        self.meter.follow(session);
    }

    /// The packet size a session whose window may come to `window` lets its jump host send:
    /// large packets only above `large_packets_above`, a far hop or one behind a `ProxyCommand`, where a backlog
    /// in an sshd's channel buffer can grow to what the window lets in (docs/ssh-engine.md, "At
    /// 1 Gbit/s"); OpenSSH's 32 KiB below it, which costs both ends least CPU per byte.
    fn largest_packet(&self, window: u32) -> u32 {
        let s = &self.settings;
        if window > s.large_packets_above { s.large_packet } else { s.packet }
    }

    /// OpenSSH's re-open rule, with a share of a large window instead (`FlowSettings`).
    fn reopen(&self) -> russh::WindowReopen {
        russh::WindowReopen::Early {
            at_least: self.settings.reopen_after,
            divisor: self.settings.reopen_share,
        }
    }

    /// The lowest round trip the rule holds, for tests.
    #[cfg(test)]
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        lock(&self.rule).min_rtt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(policy: WindowPolicy) -> Flow {
        Flow::new(Arc::new(FlowSettings { policy, ..FlowSettings::default() }), Box::new(|| 0))
    }

    #[test]
    fn only_a_session_dialled_with_more_than_twice_openssh_s_window_gets_large_packets() {
        let adaptive = flow(WindowPolicy::Adaptive);
        let near = adaptive.dial(Some(Duration::from_micros(200)), false);
        assert_eq!((near.window, near.largest_packet), (2 << 20, 32 * 1024), "loopback: OpenSSH's");
        let slow_start = adaptive.dial(Some(Duration::from_millis(13)), false);
        assert!(slow_start.window > 2 << 20, "{slow_start:?}");
        assert_eq!(slow_start.largest_packet, 32 * 1024, "a near hop whose sshd took 13 ms to answer");
        let far = adaptive.dial(Some(Duration::from_millis(50)), false);
        assert_eq!(far.largest_packet, 65_535, "{far:?}");
        assert_eq!(adaptive.dial(None, false).largest_packet, 65_535, "behind a ProxyCommand");
        let slow_sshd =
            adaptive.dial_hop(Some(Duration::from_millis(30)), Some(Duration::from_micros(90)), false);
        assert_eq!(slow_sshd.largest_packet, 32 * 1024, "a loopback hop whose sshd took 30 ms to answer");
        let s = FlowSettings::default();
        assert_eq!(adaptive.largest_packet(s.large_packets_above), 32 * 1024);
        assert_eq!(adaptive.largest_packet(s.large_packets_above + 1), 65_535);
    }

    #[test]
    fn the_policy_is_one_setting_and_the_reopen_rule_is_the_same_for_both() {
        let fixed = flow(WindowPolicy::OPENSSH);
        let dial = fixed.dial(Some(Duration::from_millis(50)), true);
        assert_eq!(dial.window, 2 << 20, "OpenSSH's window whatever the round trip");
        assert_eq!(fixed.window(), Some(2 << 20));
        let adaptive = flow(WindowPolicy::Adaptive);
        assert_eq!(adaptive.window(), None, "no rule before the last hop's dial");
        let last = adaptive.dial(Some(Duration::from_millis(50)), true);
        assert_eq!(last.window, 2 << 20, "the path's start");
        assert_eq!(last.largest_packet, 65_535, "a far last hop's window may grow past 4 MiB");
        assert_eq!(adaptive.window(), Some(2 << 20), "the last hop's dial made the path's rule");
        assert_eq!(dial.reopen, adaptive.dial(None, false).reopen);
        assert_eq!(dial.reopen, russh::WindowReopen::Early { at_least: 96 * 1024, divisor: 8 });
    }
}
