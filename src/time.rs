//! Time as the worker reads and says it: file times as the contract prints them (RFC 3339 in
//! UTC, e.g. `2026-05-04T20:22:41.123456789+00:00`), and the deadline of a call on the bus.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a call on the bus may run before it is answered `D122`: inside the SDK's default
/// caller timeout (30 s) with room for the answer's way back.
pub const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(25);

/// Sets the call deadline in milliseconds (`0` turns it off), for callers whose own timeouts
/// are shorter than the SDK's default (and for tests).
pub const CALL_DEADLINE_ENV: &str = "III_DIRECTORY_CALL_DEADLINE_MS";

/// The call deadline (`None`: off), read once: the worker's watchdog cuts calls at it, and a
/// download waits no longer than it for its turn to fetch.
pub fn call_deadline() -> Option<Duration> {
    static DEADLINE: OnceLock<Option<Duration>> = OnceLock::new();
    *DEADLINE.get_or_init(|| env_interval(CALL_DEADLINE_ENV, DEFAULT_CALL_DEADLINE))
}

/// An interval in milliseconds from the environment variable `name`: `default` when it is
/// unset or not a number, `None` (off) when it is `0`.
pub fn env_interval(name: &str, default: Duration) -> Option<Duration> {
    match env_millis(name) {
        Some(0) => None,
        Some(ms) => Some(Duration::from_millis(ms)),
        None => Some(default),
    }
}

/// A whole number of milliseconds from the environment variable `name` (spaces around it
/// allowed); `None` when it is unset or not such a number.
pub fn env_millis(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// A file time as seconds and nanoseconds since the Unix epoch (negative seconds before it).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Stamp {
    pub secs: i64,
    pub nanos: u32,
}

impl Stamp {
    pub fn from_system(time: SystemTime) -> Stamp {
        match time.duration_since(UNIX_EPOCH) {
            Ok(d) => Stamp {
                secs: d.as_secs() as i64,
                nanos: d.subsec_nanos(),
            },
            Err(e) => {
                let d = e.duration();
                // Before the epoch: borrow a second so that nanos stays positive.
                let (secs, nanos) = if d.subsec_nanos() == 0 {
                    (-(d.as_secs() as i64), 0)
                } else {
                    (-(d.as_secs() as i64) - 1, 1_000_000_000 - d.subsec_nanos())
                };
                Stamp { secs, nanos }
            }
        }
    }

    /// This time less a duration.
    pub fn minus(self, d: Duration) -> Stamp {
        let total =
            i128::from(self.secs) * 1_000_000_000 + i128::from(self.nanos) - d.as_nanos() as i128;
        Stamp {
            secs: total.div_euclid(1_000_000_000) as i64,
            nanos: total.rem_euclid(1_000_000_000) as u32,
        }
    }

    pub fn now() -> Stamp {
        Stamp::from_system(SystemTime::now())
    }

    /// RFC 3339 with the `+00:00` offset; the fraction is left out when zero and otherwise
    /// printed with 3, 6 or 9 digits, whichever is the shortest exact form.
    pub fn rfc3339(self) -> String {
        let days = self.secs.div_euclid(86_400);
        let rem = self.secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
        let fraction = match self.nanos {
            0 => String::new(),
            n if n % 1_000_000 == 0 => format!(".{:03}", n / 1_000_000),
            n if n % 1_000 == 0 => format!(".{:06}", n / 1_000),
            n => format!(".{n:09}"),
        };
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}{fraction}+00:00")
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_the_contract() {
        let s = Stamp {
            secs: 1_777_926_161,
            nanos: 123_456_789,
        };
        assert_eq!(s.rfc3339(), "2026-05-04T20:22:41.123456789+00:00");
        assert_eq!(
            Stamp { secs: 0, nanos: 0 }.rfc3339(),
            "1970-01-01T00:00:00+00:00"
        );
        assert_eq!(
            Stamp {
                secs: 951_782_400,
                nanos: 5_000_000
            }
            .rfc3339(),
            "2000-02-29T00:00:00.005+00:00"
        );
        assert_eq!(
            Stamp { secs: -1, nanos: 0 }.rfc3339(),
            "1969-12-31T23:59:59+00:00"
        );
        assert_eq!(
            Stamp {
                secs: 1,
                nanos: 1_000
            }
            .rfc3339(),
            "1970-01-01T00:00:01.000001+00:00"
        );
    }
}
