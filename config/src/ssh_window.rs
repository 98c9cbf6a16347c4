//! `ssh_window`, the rule that sizes the SSH receive windows of a jump host's sessions
//! ([`SshWindow`]), and how its value is written.

use crate::defaults::SSH_WINDOW_BYTES;

/// `ssh_window`: which rule sizes the SSH receive windows of a jump host's sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SshWindow {
    /// `adaptive` (the default): the window follows what the path is measured to carry.
    Adaptive,
    /// `openssh`, or a size such as `4M`: every channel gets that window, as `ssh` gives every
    /// channel OpenSSH's 2 MiB (`openssh`).
    Fixed(u32),
}

impl SshWindow {
    /// OpenSSH's own channel window (`CHAN_TCP_WINDOW_DEFAULT`, channels.h).
    pub const OPENSSH: SshWindow = SshWindow::Fixed(2 << 20);

    /// `adaptive`, `openssh`, or a size: bytes, or a number with K or M (powers of 1024).
    pub fn parse(value: &str) -> Option<SshWindow> {
        match value.trim().to_ascii_lowercase().as_str() {
            "adaptive" => Some(SshWindow::Adaptive),
            "openssh" => Some(SshWindow::OPENSSH),
            size => {
                let (digits, shift) = match size.strip_suffix(['k', 'm']) {
                    Some(digits) if size.ends_with('k') => (digits, 10),
                    Some(digits) => (digits, 20),
                    None => (size, 0),
                };
                let bytes = digits.parse::<u64>().ok()?.checked_mul(1 << shift)?;
                let bytes =
                    u32::try_from(bytes).ok().filter(|b| SSH_WINDOW_BYTES.contains(&u64::from(*b)))?;
                Some(SshWindow::Fixed(bytes))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_window_is_adaptive_openssh_or_a_size_within_the_engine_s_bounds() {
        assert_eq!(SshWindow::parse("adaptive"), Some(SshWindow::Adaptive));
        assert_eq!(SshWindow::parse("OpenSSH"), Some(SshWindow::Fixed(2 << 20)));
        assert_eq!(SshWindow::parse("4M"), Some(SshWindow::Fixed(4 << 20)));
        assert_eq!(SshWindow::parse("768K"), Some(SshWindow::Fixed(768 << 10)));
        assert_eq!(SshWindow::parse("1048576"), Some(SshWindow::Fixed(1 << 20)));
        for bad in ["", "fast", "128K", "32M", "4G", "-1M", "99999999999999999999M"] {
            assert_eq!(SshWindow::parse(bad), None, "{bad:?}");
        }
    }
}
