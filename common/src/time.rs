//! Wall-clock times as people and logs read them, without a date library: Unix seconds as
//! RFC 3339 in UTC.

/// The last second RFC 3339's four-digit years can write: 9999-12-31T23:59:59Z.
pub const LAST_RFC3339: u64 = 253_402_300_799;

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, Howard Hinnant's algorithm). Times
/// past the year 9999 (an OpenSSH certificate's "forever" is `u64::MAX`) print as `forever`.
pub fn rfc3339(secs: u64) -> String {
    if secs > LAST_RFC3339 {
        return "forever".to_owned();
    }
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_767_225_600), "2026-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400 + 3661), "2000-02-29T01:01:01Z");
        assert_eq!(rfc3339(253_402_300_799), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339(u64::MAX), "forever");
    }
}
