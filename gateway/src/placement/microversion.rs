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
            // microversion-parse's `split(None, 1)`: a service name, then
            // the rest; a lone name is no entry.
            if let Some((service, version)) = item.trim().split_once(char::is_whitespace) {
                if service.eq_ignore_ascii_case("placement") {
                    requested = Some(version.trim());
                }
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
    // Python's `Version(*(int(v) for v in text.split('.', 1)))`: each part
    // is converted in order before the count is checked.
    let (major, minor) = match text.split_once('.') {
        Some((major, minor)) => (major, Some(minor)),
        None => (text, None),
    };
    let num = |s: &str| -> Result<u16, VersionError> {
        s.trim()
            .parse::<u16>()
            .map_err(|_| malformed(format!("invalid literal for int() with base 10: {}", keelson_pyfmt::repr_str(s))))
    };
    let major = num(major)?;
    let Some(minor) = minor else {
        return Err(malformed("Version.__new__() missing 1 required positional argument: 'minor'".into()));
    };
    Ok(Microversion(major, num(minor)?))
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
            Err(VersionError::Malformed(
                "invalid version string: 1.a; invalid literal for int() with base 10: 'a'".into()
            ))
        );
        assert_eq!(
            negotiate(["placement pony"].into_iter()),
            Err(VersionError::Malformed(
                "invalid version string: pony; invalid literal for int() with base 10: 'pony'".into()
            ))
        );
        assert_eq!(
            negotiate(["placement 1.2.3"].into_iter()),
            Err(VersionError::Malformed(
                "invalid version string: 1.2.3; invalid literal for int() with base 10: '2.3'".into()
            ))
        );
        assert!(
            matches!(negotiate(["placement 1"].into_iter()), Err(VersionError::Malformed(m)) if m.ends_with("'minor'"))
        );
        assert_eq!(negotiate(["placement"].into_iter()), Ok(MIN));
        assert!(Microversion(1, 10) > Microversion(1, 9));
    }
}
