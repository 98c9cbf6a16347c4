//! The cookies of one Passbolt session: every `Set-Cookie` of every answer, redirects included, is
//! kept by name (one server, so domain and path do not matter), and a cookie the server clears is
//! dropped, so it is not sent back.
//!
//! Passbolt (CakePHP 5) clears a cookie the way `Cookie::withExpired()` writes it: a fresh
//! non-empty value with `expires=Thu, 01-Jan-1970 00:00:01 GMT+0000` (CakePHP's
//! `src/Http/Cookie/Cookie.php`, format `D, d-M-Y H:i:s T` of the timestamp 1). That is how
//! `MfaVerifyAjaxErrorController` clears `passbolt_mfa` while it answers the MFA challenge. The
//! trailing `+0000` is outside the HTTP date formats the `cookie` crate (and so reqwest's cookie
//! store) accepts; such a crate ignores the attribute and keeps the stale cookie. RFC 6265's own
//! date algorithm (§5.1.1), implemented here, is lenient on purpose and reads it as 1970.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::header::{HeaderMap, SET_COOKIE};

/// Cookies by name, in name order (the `Cookie` header is then stable, which tests rely on).
#[derive(Default)]
pub struct Jar {
    cookies: BTreeMap<String, String>,
}

impl Jar {
    /// Applies every `Set-Cookie` of `headers` as of `now`.
    pub fn keep(&mut self, headers: &HeaderMap, now: SystemTime) {
        let now = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        for value in headers.get_all(SET_COOKIE) {
            // Passbolt's values are ASCII (hex, UUIDs, session ids); anything else is not its.
            let Ok(text) = value.to_str() else { continue };
            self.apply(text, now);
        }
    }

    fn apply(&mut self, set_cookie: &str, now: i64) {
        let mut parts = set_cookie.split(';');
        let Some((name, value)) = parts.next().and_then(|pair| pair.split_once('=')) else { return };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() {
            return;
        }
        // RFC 6265 §5.3: Max-Age wins over Expires.
        let (mut max_age, mut expires) = (None, None);
        for attribute in parts {
            let (key, val) = attribute.split_once('=').unwrap_or((attribute, ""));
            let (key, val) = (key.trim(), val.trim());
            if key.eq_ignore_ascii_case("max-age") {
                max_age = val.parse::<i64>().ok();
            } else if key.eq_ignore_ascii_case("expires") {
                expires = cookie_date(val);
            }
        }
        let expired = match (max_age, expires) {
            (Some(age), _) => age <= 0,
            (None, Some(at)) => at <= now,
            (None, None) => false,
        };
        // An empty value is what a clearing server sends too; sending it back means nothing.
        if expired || value.is_empty() {
            self.cookies.remove(name);
        } else {
            self.cookies.insert(name.to_owned(), value.to_owned());
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.cookies.get(name).map(String::as_str)
    }

    pub fn contains_any(&self, names: &[&str]) -> bool {
        names.iter().any(|n| self.cookies.contains_key(*n))
    }

    /// The `Cookie` request header, or `None` with no cookie kept.
    pub fn header(&self) -> Option<String> {
        if self.cookies.is_empty() {
            return None;
        }
        Some(self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; "))
    }
}

/// RFC 6265 §5.1.1 "cookie-date": seconds since the epoch, or `None` when the text is not a date.
fn cookie_date(text: &str) -> Option<i64> {
    let delimiter = |c: char| matches!(c, '\t' | ' '..='/' | ';'..='@' | '['..='`' | '{'..='~');
    let (mut time, mut day, mut month, mut year) = (None, None, None, None);
    for token in text.split(delimiter).filter(|t| !t.is_empty()) {
        if time.is_none()
            && let Some(t) = hms(token)
        {
            time = Some(t);
        } else if day.is_none()
            && let Some(d) = leading_digits(token, 1, 2)
        {
            day = Some(d);
        } else if month.is_none()
            && let Some(m) = month_of(token)
        {
            month = Some(m);
        } else if year.is_none()
            && let Some(y) = leading_digits(token, 2, 4)
        {
            year = Some(y);
        }
    }
    let ((hour, minute, second), day, month, mut year) = (time?, day?, month?, year?);
    if (70..=99).contains(&year) {
        year += 1900;
    } else if year <= 69 {
        year += 2000;
    }
    if !(1..=31).contains(&day) || year < 1601 || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

/// `1*2DIGIT ":" 1*2DIGIT ":" 1*2DIGIT ( non-digit *OCTET )`.
fn hms(token: &str) -> Option<(i64, i64, i64)> {
    let mut fields = token.splitn(3, ':');
    let h = all_digits(fields.next()?, 1, 2)?;
    let m = all_digits(fields.next()?, 1, 2)?;
    let s = leading_digits(fields.next()?, 1, 2)?;
    Some((h, m, s))
}

fn all_digits(text: &str, min: usize, max: usize) -> Option<i64> {
    (text.len() >= min && text.len() <= max && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// `min*maxDIGIT ( non-digit *OCTET )`: the digits at the start, then anything not a digit.
fn leading_digits(token: &str, min: usize, max: usize) -> Option<i64> {
    let digits = token.bytes().take_while(u8::is_ascii_digit).count();
    if digits < min || digits > max {
        return None;
    }
    token[..digits].parse().ok()
}

fn month_of(token: &str) -> Option<i64> {
    const MONTHS: [&str; 12] =
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    let prefix = token.get(..3)?.to_ascii_lowercase();
    MONTHS.iter().position(|m| *m == prefix).map(|i| i as i64 + 1)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(SET_COOKIE, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn cookie_dates_follow_rfc_6265() {
        // CakePHP's Cookie::withExpired() (its CookieTest asserts this exact text).
        assert_eq!(cookie_date("Thu, 01-Jan-1970 00:00:01 GMT+0000"), Some(1));
        // RFC 1123, RFC 850 and asctime, as RFC 6265 §5.1.1 must read them.
        assert_eq!(cookie_date("Wed, 21 Oct 2015 07:28:00 GMT"), Some(1_445_412_480));
        assert_eq!(cookie_date("Sunday, 06-Nov-94 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(cookie_date("Sun Nov  6 08:49:37 1994"), Some(784_111_777));
        assert_eq!(cookie_date("Mon, 29 Feb 2028 23:59:59 GMT"), Some(1_835_481_599));
        for bad in [
            "",
            "tomorrow",
            "32 Jan 2020 00:00:00",
            "01 Jan 1600 00:00:00",
            "01 Foo 2020 00:00:00",
            "01 Jan 2020 24:00:00",
        ] {
            assert_eq!(cookie_date(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn cakephp_clearing_a_cookie_deletes_it() {
        let now = UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        let mut jar = Jar::default();
        jar.keep(
            &headers(&[
                "passbolt_mfa=0123abcd; path=/; httponly",
                "csrfToken=abc; path=/vshn/",
                "passbolt_session=s1; path=/vshn; HttpOnly; SameSite=Lax",
            ]),
            now,
        );
        assert_eq!(
            jar.header().as_deref(),
            Some("csrfToken=abc; passbolt_mfa=0123abcd; passbolt_session=s1")
        );
        // MfaVerifyAjaxErrorController's answer: a new UUID as value, expired in 1970.
        jar.keep(
            &headers(&[
                "passbolt_mfa=6f1c2a4e-8a1b-4c2d-9e3f-0a1b2c3d4e5f; expires=Thu, 01-Jan-1970 00:00:01 GMT+0000; path=/; httponly",
            ]),
            now,
        );
        assert_eq!(jar.get("passbolt_mfa"), None);
        assert!(jar.contains_any(&["PHPSESSID", "passbolt_session"]));
        // Max-Age wins over Expires; a future date keeps the cookie; an empty value deletes.
        jar.keep(&headers(&["a=1; Max-Age=3600; expires=Thu, 01-Jan-1970 00:00:01 GMT"]), now);
        jar.keep(&headers(&["b=2; expires=Fri, 01-Jan-2100 00:00:00 GMT"]), now);
        jar.keep(&headers(&["csrfToken=abc; Max-Age=0", "passbolt_session=; path=/vshn"]), now);
        assert_eq!(jar.header().as_deref(), Some("a=1; b=2"));
    }
}
