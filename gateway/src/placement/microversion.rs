//! Placement microversions: `OpenStack-API-Version: placement X.Y`.

use std::fmt;

/// The oldest and newest microversion keelson serves.
pub const MIN: Microversion = Microversion(1, 0);
pub const MAX: Microversion = Microversion(1, 39);

/// A negotiated microversion. Ordered, so handlers compare with `>=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Microversion(pub u16, pub u16);

impl Microversion {
    /// Whether this version is at least `major.minor`.
    pub fn at_least(self, major: u16, minor: u16) -> bool {
        self >= Microversion(major, minor)
    }
}

impl fmt::Display for Microversion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// Why the requested version cannot be served.
#[derive(Debug, PartialEq)]
pub enum VersionError {
    /// 400: the header does not parse.
    Malformed(String),
    /// 406: a version outside MIN..=MAX.
    Unacceptable(String),
}

/// Reads the placement version from the `OpenStack-API-Version` header
/// values (several services may be named, comma separated, in one or more
/// headers). No placement entry means the minimum version.
pub fn negotiate<'a>(headers: impl Iterator<Item = &'a str>) -> Result<Microversion, VersionError> {
    let mut requested: Option<&str> = None;
    for value in headers {
        for item in value.split(',') {
            let item = item.trim();
            let mut parts = item.split_whitespace();
            if parts.next().is_some_and(|s| s.eq_ignore_ascii_case("placement")) {
                requested = Some(parts.next().unwrap_or(""));
            }
        }
    }
    let Some(text) = requested else { return Ok(MIN) };
    if text.eq_ignore_ascii_case("latest") {
        return Ok(MAX);
    }
    let version = parse(text)?;
    if version < MIN || version > MAX {
        return Err(VersionError::Unacceptable(format!("Unacceptable version header: {text}")));
    }
    Ok(version)
}

fn parse(text: &str) -> Result<Microversion, VersionError> {
    let malformed = |why: String| VersionError::Malformed(format!("invalid version string: {text}; {why}"));
    let (major, minor) = text.split_once('.').ok_or_else(|| malformed(format!("not enough values to unpack (expected 2, got 1)")))?;
    if minor.contains('.') {
        return Err(malformed("too many values to unpack (expected 2)".into()));
    }
    let num = |s: &str| -> Result<u16, VersionError> {
        s.trim().parse::<u16>().map_err(|_| malformed(format!("invalid literal for int() with base 10: '{s}'")))
    };
    Ok(Microversion(num(major)?, num(minor)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        assert_eq!(negotiate([].into_iter()), Ok(MIN));
        assert_eq!(negotiate(["placement 1.14"].into_iter()), Ok(Microversion(1, 14)));
        assert_eq!(negotiate(["compute 2.1, placement latest"].into_iter()), Ok(MAX));
        assert_eq!(negotiate(["compute 2.60"].into_iter()), Ok(MIN));
        assert!(matches!(negotiate(["placement 2.0"].into_iter()), Err(VersionError::Unacceptable(_))));
        assert!(matches!(negotiate(["placement 1.40"].into_iter()), Err(VersionError::Unacceptable(_))));
        assert_eq!(
            negotiate(["placement 1.a"].into_iter()),
            Err(VersionError::Malformed("invalid version string: 1.a; invalid literal for int() with base 10: 'a'".into()))
        );
        assert!(Microversion(1, 10) > Microversion(1, 9));
    }
}
