//! [`Fixed`]: one window for every session and channel of a path, whatever the path carries, as
//! `ssh` gives every channel OpenSSH's 2 MiB (`WindowPolicy::Fixed`, `WindowPolicy::OPENSSH`).
//! Nothing is measured, so no ping is sent. `bench/shaped.sh` measures fixed windows of several
//! sizes beside the adaptive rule on the same path (`PIN_WINDOWS`).

use std::time::Duration;

use crate::flow::rule::{Drain, WindowRule};

#[derive(Debug)]
pub(crate) struct Fixed {
    window: u32,
}

impl Fixed {
    pub(crate) fn new(window: u32) -> Self {
        Fixed { window }
    }
}

impl WindowRule for Fixed {
    fn dial(&mut self, _: Duration, _: Option<Duration>, _: bool) -> u32 {
        self.window
    }

    fn reach(&self, _: Option<Duration>) -> u32 {
        self.window
    }

    fn window(&self) -> Option<u32> {
        Some(self.window)
    }

    fn measures(&self) -> bool {
        false
    }

    fn quiet(&mut self, _: Duration, _: Duration, _: bool) {}

    fn begin(&mut self, _: Duration) -> bool {
        false
    }

    fn sample(&mut self, _: Duration, _: Duration, _: u64) -> Option<u32> {
        None
    }

    fn drain(&mut self, _: Duration) -> Option<Drain> {
        None
    }

    fn drained(&mut self, _: Duration, _: Option<Duration>) {}

    #[cfg(test)]
    fn min_rtt(&self) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dial_and_every_channel_get_the_one_window_and_nothing_is_measured() {
        let mut fixed = Fixed::new(2 << 20);
        assert_eq!(fixed.dial(Duration::ZERO, Some(Duration::from_millis(50)), true), 2 << 20);
        assert_eq!(fixed.dial(Duration::ZERO, None, false), 2 << 20);
        assert_eq!(fixed.window(), Some(2 << 20));
        assert!(!fixed.measures());
        assert!(!fixed.begin(Duration::ZERO), "a measuring task would stop at once");
        assert_eq!(fixed.sample(Duration::ZERO, Duration::from_secs(2), 1 << 30), None);
        assert_eq!(fixed.window(), Some(2 << 20), "a queue changes nothing");
        assert_eq!(fixed.drain(Duration::ZERO), None, "a fixed window is never drained");
    }
}
