//! Duration strings: `"1s"`, `"250ms"`, `"2m"`, `"1.5h"`: the one duration
//! grammar of the project, for policy files, the `MPIT_TUNER_*` variables and
//! the command line alike (docs/guide.md#durations).

use std::time::Duration;

/// What the duration grammar expects, at the start of each message.
const EXPECTED: &str =
    "expected a duration: a number and a unit (ns, us, ms, s, m or min, h), such as \"1s\", \"250ms\" or \"2m\"";

/// Why a string is not a duration; its message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number where one was expected (or a malformed one).
    #[error("{EXPECTED}, found {0:?}", EXPECTED = EXPECTED)]
    NotANumber(String),
    /// A number other than 0 without a unit.
    #[error("{EXPECTED}, found {text:?} which has no unit (write \"{number}s\" for seconds)", EXPECTED = EXPECTED)]
    NoUnit {
        /// The whole text.
        text: String,
        /// Its number.
        number: String,
    },
    /// A unit not in the grammar.
    #[error("{EXPECTED}, found unknown unit {0:?}", EXPECTED = EXPECTED)]
    UnknownUnit(String),
    /// More than 10^9 seconds.
    #[error("duration {0:?} is too long")]
    TooLong(String),
}

/// Parses a duration string: a non-negative decimal number followed by a
/// unit, `ns`, `us` (or `µs`), `ms`, `s` (or `sec`), `m` (or `min`) or `h`,
/// spaces around and between them allowed. A bare number is refused (is
/// `10` seconds or milliseconds?), except `0`, which is zero in any unit.
///
/// On failure, a [`DurationError`] whose message says what was expected.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(policies::parse_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert_eq!(policies::parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
/// assert_eq!(policies::parse_duration("2m"), Ok(Duration::from_secs(120)));
/// assert_eq!(policies::parse_duration("10ns"), Ok(Duration::from_nanos(10)));
/// assert_eq!(policies::parse_duration("0"), Ok(Duration::ZERO));
/// assert!(policies::parse_duration("10").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let unit = unit.trim_start();
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(DurationError::NotANumber(text.into()));
    }
    let Ok(value) = number.parse::<f64>() else {
        return Err(DurationError::NotANumber(text.into()));
    };
    let scale = match unit {
        "" if value == 0.0 => 0.0,
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "" => {
            return Err(DurationError::NoUnit {
                text: text.into(),
                number: number.into(),
            })
        }
        other => return Err(DurationError::UnknownUnit(other.into())),
    };
    let secs = value * scale;
    if !secs.is_finite() || secs > 1e9 {
        return Err(DurationError::TooLong(text.into()));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration(" 100 ms "), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("10ns"), Ok(Duration::from_nanos(10)));
        assert_eq!(parse_duration("1.5µs"), Ok(Duration::from_nanos(1500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0.0"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects() {
        for bad in [
            "",
            "s",
            "1",
            "0.5",
            "1x",
            "5parsecs",
            "-1s",
            "1.s",
            ".5s",
            "1..2s",
            "1e3s",
            "99999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_duration("5")
            .unwrap_err()
            .to_string()
            .contains("write \"5s\""));
    }
}
