//! Durations as people type them on the command line: `30` (a bare number is seconds), `1s`,
//! `500ms`, `2m`, `1m30s`, `1h`. Every flag that takes a duration parses it here,
//! so they all accept the same forms and refuse the same way.

use std::time::Duration;

/// clap's value parser for a duration flag: a bare number is seconds, anything else needs a unit
/// (humantime's: `ms`, `s`, `m`, `h`, `d`, and combinations such as `1m30s`).
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(text).map_err(|e| {
        format!("{e}; give a number of seconds (30) or a duration with its unit (500ms, 30s, 2m, 1h)")
    })
}

/// [`parse`], within `min..=max` (both said in the error, as people write them).
pub fn within(text: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let d = parse(text)?;
    if d < min || d > max {
        return Err(format!("must be between {} and {}", show(min), show(max)));
    }
    Ok(d)
}

/// A duration as a flag would take it: "30s", "1m 30s", "500ms".
pub fn show(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numbers_are_seconds_and_units_are_taken() {
        assert_eq!(parse("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn nonsense_is_refused_with_the_forms_that_work() {
        let e = parse("soon").unwrap_err();
        assert!(e.contains("500ms, 30s, 2m, 1h"), "{e}");
        assert!(parse("-1").is_err());
        let e = within("2h", Duration::from_secs(1), Duration::from_secs(3600)).unwrap_err();
        assert_eq!(e, "must be between 1s and 1h");
        assert_eq!(
            within("1s", Duration::from_secs(1), Duration::from_secs(3600)),
            Ok(Duration::from_secs(1))
        );
    }
}
