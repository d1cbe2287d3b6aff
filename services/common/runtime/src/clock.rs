//! The one clock for stored timestamps. It lives here, not beside the
//! database layer, because the gateway stamps `Last-Modified` with the same
//! clock and links no SQL driver.

use chrono::{NaiveDateTime, Timelike as _};

/// The current time as the schema stores it: naive UTC, as oslo.db does.
pub fn now() -> NaiveDateTime {
    let now = chrono::Utc::now().naive_utc();
    // Whole seconds: MySQL DATETIME has no fraction, and the same value
    // must read back the same on every backend.
    now.with_nanosecond(0).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_has_whole_seconds() {
        assert_eq!(now().nanosecond(), 0);
    }
}
