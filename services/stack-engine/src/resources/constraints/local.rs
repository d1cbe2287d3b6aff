//! The custom constraints Heat checks without a service
//! (`heat/engine/constraint/common_constraints.py`), as pure functions:
//! each answers None for a valid value, else the reason Heat gives after
//! `Error validating value '<value>'` (an empty reason: Heat gives none).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use chrono::{DateTime, FixedOffset, NaiveDate, TimeZone, Utc};
use serde_json::Value;

use crate::resources::properties::{parse_py_int, py_repr};

/// Why a value fails a local constraint; `None` inside: no reason given.
pub(crate) type Refusal = Option<String>;

/// `ip_addr`: an IPv4 (dotted quad, no leading zeros) or IPv6 address
/// (neutron-lib's `validate_ip_address`).
pub(crate) fn ip_addr(value: &Value) -> Result<(), Refusal> {
    let refused = || Err(Some("Invalid IP address".to_string()));
    match value.as_str() {
        Some(text) if ip_address_message(text).is_none() => Ok(()),
        _ => refused(),
    }
}

/// neutron-lib's `validate_ip_address` message for `text`, None when valid.
fn ip_address_message(text: &str) -> Option<String> {
    let invalid = || Some(format!("'{text}' is not a valid IP address"));
    if text.chars().any(char::is_whitespace) {
        return invalid();
    }
    if text.contains(':') {
        return text.parse::<Ipv6Addr>().map_or_else(|_| invalid(), |_| None);
    }
    if text.matches('.').count() != 3 {
        return invalid();
    }
    // netaddr reads IPv4 octets with leading zeros as decimal (ZEROFILL);
    // neutron-lib then refuses any text that is not the canonical form.
    let mut octets = [0u8; 4];
    for (slot, part) in octets.iter_mut().zip(text.split('.')) {
        // ZEROFILL rewrites each octet through Python's `int()`.
        match parse_py_int(part).and_then(|n| u8::try_from(n).ok()) {
            Some(octet) => *slot = octet,
            None => return invalid(),
        }
    }
    let canonical = Ipv4Addr::from(octets).to_string();
    (canonical != text).then(|| format!("'{text}' is not an accepted IP address, '{canonical}' is recommended"))
}

/// `mac_addr`: one of the EUI-48 spellings netaddr's `valid_mac` accepts.
pub(crate) fn mac_addr(value: &Value) -> Result<(), Refusal> {
    let refused = || Err(Some("Invalid MAC address.".to_string()));
    let Some(text) = value.as_str() else { return refused() };
    // Python's `$` also matches before one final newline.
    let text = text.strip_suffix('\n').unwrap_or(text);
    let groups = |sep: char, count: usize, min: usize, max: usize| {
        let parts: Vec<&str> = text.split(sep).collect();
        parts.len() == count
            && parts.iter().all(|p| (min..=max).contains(&p.len()) && p.chars().all(|c| c.is_ascii_hexdigit()))
    };
    let bare = (text.len() == 12 || text.len() == 11) && text.chars().all(|c| c.is_ascii_hexdigit());
    let valid = groups(':', 6, 1, 2)
        || groups('-', 6, 1, 2)
        || groups(':', 3, 1, 4)
        || groups('-', 3, 1, 4)
        || groups('.', 3, 1, 4)
        || groups('-', 2, 5, 6)
        || groups(':', 2, 5, 6)
        || bare;
    if valid {
        Ok(())
    } else {
        refused()
    }
}

/// The classful prefix netaddr gives an IPv4 network by its first octet;
/// Err for an octet out of range.
fn classful_prefix(octet: i64) -> Result<u8, String> {
    match octet {
        0..=127 => Ok(8),
        128..=191 => Ok(16),
        192..=223 => Ok(24),
        224..=239 => Ok(4),
        240..=255 => Ok(32),
        _ => Err(format!("Invalid octet: {octet}!")),
    }
}

/// netaddr's `cidr_abbrev_to_verbose`: `10` is `10.0.0.0/8`, `10.1/16` is
/// `10.1.0.0/16`; anything else unchanged. Err: the one error it lets out
/// (a first octet out of range, without a prefix).
fn cidr_abbrev_to_verbose(text: &str) -> Result<String, String> {
    if text.contains(':') || text.is_empty() {
        return Ok(text.to_string());
    }
    if let Some(i) = parse_py_int(text) {
        return Ok(classful_prefix(i).map(|p| format!("{i}.0.0.0/{p}")).unwrap_or_else(|_| text.to_string()));
    }
    let (part, prefix) = match text.split_once('/') {
        Some((part, prefix)) => match parse_py_int(prefix) {
            Some(p) if (0..=32).contains(&p) => (part, Some(prefix.to_string())),
            _ => return Ok(text.to_string()),
        },
        None => (text, None),
    };
    let mut tokens: Vec<&str> = part.split('.').collect();
    if tokens.len() > 4 {
        return Ok(text.to_string());
    }
    tokens.resize(4, "0");
    let prefix = match prefix {
        Some(p) => p,
        None => match parse_py_int(tokens[0]) {
            None => return Ok(text.to_string()),
            Some(octet) => classful_prefix(octet)?.to_string(),
        },
    };
    Ok(format!("{}/{prefix}", tokens.join(".")))
}

/// An IPv4 or IPv6 address as `inet_pton` reads it.
fn strict_ip(text: &str, v6: bool) -> Option<IpAddr> {
    if v6 {
        text.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
    } else {
        text.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
    }
}

/// The prefix length a netmask (ones then zeros) or a hostmask (zeros
/// then ones) stands for.
fn mask_prefix(mask: IpAddr) -> Option<u32> {
    let (bits, width) = match mask {
        IpAddr::V4(m) => (u128::from(u32::from(m)), 32),
        IpAddr::V6(m) => (u128::from(m), 128),
    };
    let all = if width == 128 { u128::MAX } else { (1u128 << width) - 1 };
    let ones = bits.count_ones();
    let netmask = ones == 0 || bits == all & !((1u128 << (width - ones)) - 1);
    let hostmask = bits == (1u128.checked_shl(ones).unwrap_or(0)).wrapping_sub(1);
    if netmask {
        Some(ones)
    } else if hostmask {
        Some(width - ones)
    } else {
        None
    }
}

/// Why netaddr's `IPNetwork(text)` refuses `text`, as it says it.
#[derive(Debug, PartialEq)]
enum NetworkError {
    /// `invalid IPNetwork <text>`.
    Invalid,
    /// A prefix with a `/` in it: IPAddress's own error escapes.
    SlashInMask,
}

/// netaddr's `IPNetwork(text)`: an IPv4 network, else an IPv6 one; the
/// address and its prefix length.
fn ip_network(text: &str) -> Result<(IpAddr, u32), NetworkError> {
    let (address, prefix) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (text, None),
    };
    for v6 in [false, true] {
        let Some(ip) = strict_ip(address, v6) else { continue };
        let width = if v6 { 128 } else { 32 };
        let length = match prefix {
            None => Some(i64::from(width)),
            Some(p) => match parse_py_int(p) {
                Some(n) => Some(n),
                None if p.contains('/') => return Err(NetworkError::SlashInMask),
                None => strict_ip(p, v6).and_then(mask_prefix).map(i64::from),
            },
        };
        if let Some(n) = length.filter(|n| (0..=i64::from(width)).contains(n)) {
            return Ok((ip, u32::try_from(n).unwrap_or(width)));
        }
    }
    Err(NetworkError::Invalid)
}

/// neutron-lib's `validate_subnet` message for `text`, None when valid:
/// an address with a prefix, an IPv4 one spelt canonically.
fn subnet_message(text: &str) -> Option<String> {
    let refused = Some(format!("'{text}' is not a valid IP subnet"));
    if text.chars().any(char::is_whitespace) || !text.contains('/') {
        return refused;
    }
    match ip_network(text) {
        Ok((IpAddr::V4(ip), prefix)) if format!("{ip}/{prefix}") == text => None,
        Ok((IpAddr::V6(_), _)) => None,
        _ => refused,
    }
}

/// `net_cidr`: a network netaddr reads (abbreviations completed), then
/// neutron-lib's subnet check.
pub(crate) fn net_cidr(value: &Value) -> Result<(), Refusal> {
    let text = py_text(value);
    // netaddr's error text, with Heat's trailing space.
    let refused = |reason: String| Err(Some(format!("Invalid net cidr {reason} ")));
    let verbose = match cidr_abbrev_to_verbose(&text) {
        Ok(v) => v,
        Err(reason) => return refused(reason),
    };
    match ip_network(&verbose) {
        Ok(_) => {}
        Err(NetworkError::Invalid) => return refused(format!("invalid IPNetwork {verbose}")),
        Err(NetworkError::SlashInMask) => {
            return refused(
                "IPAddress() does not support netmasks or subnet prefixes! See documentation for details.".to_string(),
            )
        }
    }
    match subnet_message(&text) {
        None => Ok(()),
        Some(message) => Err(Some(message)),
    }
}

/// `ip_or_cidr`: a subnet when the text has a `/`, else an address.
pub(crate) fn ip_or_cidr(value: &Value) -> Result<(), Refusal> {
    let Some(text) = value.as_str() else {
        return Err(Some(format!("{} is not a valid IP or CIDR", py_text(value))));
    };
    let message = if text.contains('/') { subnet_message(text) } else { ip_address_message(text) };
    match message {
        None => Ok(()),
        Some(m) => Err(Some(m)),
    }
}

/// Heat's longest fully qualified domain name.
const FQDN_MAX_LEN: usize = 255;
/// The longest label of a DNS name.
const DNS_LABEL_MAX_LEN: usize = 63;

/// Heat's `netutils.validate_dns_format`: the reason `text` is not a DNS
/// name, None when it is (or is empty).
fn dns_format_error(text: &str) -> Option<String> {
    if text.is_empty() {
        return None;
    }
    let trimmed = text.strip_suffix('.').unwrap_or(text);
    if trimmed.chars().count() > FQDN_MAX_LEN {
        return Some(format!("'{trimmed}' exceeds the {FQDN_MAX_LEN} character FQDN limit"));
    }
    let names: Vec<&str> = trimmed.split('.').collect();
    for name in &names {
        if name.is_empty() {
            return Some("Encountered an empty component.".to_string());
        }
        if name.starts_with('-') || name.ends_with('-') {
            return Some(format!("Name '{name}' must not start or end with a hyphen."));
        }
        // Python's `$` also matches before one final newline.
        let label = name.strip_suffix('\n').unwrap_or(name);
        let valid_label = (1..=DNS_LABEL_MAX_LEN).contains(&label.chars().count())
            && label.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid_label {
            return Some(format!(
                "Name '{name}' must be 1-{DNS_LABEL_MAX_LEN} characters long, each of which can only be alphanumeric or a hyphen."
            ));
        }
    }
    // RFC 1123: the top level domain of a FQDN is not all digits.
    if let Some(last) = names.last().filter(|_| text.ends_with('.') && names.len() > 1) {
        if last.chars().all(|c| c.is_ascii_digit()) {
            return Some(format!("TLD '{last}' must not be all numeric."));
        }
    }
    None
}

/// `dns_name`.
pub(crate) fn dns_name(value: &Value) -> Result<(), Refusal> {
    let text = py_text(value);
    match dns_format_error(&text) {
        None => Ok(()),
        Some(reason) => Err(Some(format!("'{text}' not in valid format. Reason: {reason}"))),
    }
}

/// `rel_dns_name`: a DNS name without the final dot, short enough to
/// take a domain.
pub(crate) fn rel_dns_name(value: &Value) -> Result<(), Refusal> {
    let text = py_text(value);
    if text.is_empty() {
        return Ok(());
    }
    if text.ends_with('.') {
        return Err(Some(format!("'{text}' is a FQDN. It should be a relative domain name.")));
    }
    let length = text.chars().count();
    if length > FQDN_MAX_LEN - 3 {
        return Err(Some(format!(
            "'{text}' contains '{length}' characters. Adding a domain name will cause it to exceed the maximum length of a FQDN of '{FQDN_MAX_LEN}'."
        )));
    }
    dns_name(value)
}

/// `dns_domain`: a DNS name ending with a dot.
pub(crate) fn dns_domain(value: &Value) -> Result<(), Refusal> {
    let text = py_text(value);
    if text.is_empty() {
        return Ok(());
    }
    dns_name(value)?;
    if !text.ends_with('.') {
        return Err(Some(format!("'{text}' must end with '.'.")));
    }
    Ok(())
}

/// `iso_8601`: what oslo's `parse_isotime` reads (no reason given).
pub(crate) fn iso_8601(value: &Value) -> Result<(), Refusal> {
    match value.as_str().map(parse_isotime) {
        Some(Ok(_)) => Ok(()),
        _ => Err(None),
    }
}

/// `expiration`: an ISO 8601 time still to come.
pub(crate) fn expiration(value: &Value, now: DateTime<Utc>) -> Result<(), Refusal> {
    let text = py_text(value);
    if text.is_empty() {
        return Ok(());
    }
    let reason = match parse_isotime(text.trim()) {
        Ok(at) if at.with_timezone(&Utc) > now => return Ok(()),
        Ok(_) => "Expiration time is out of date.".to_string(),
        Err(e) => e,
    };
    Err(Some(format!("Expiration {text} is invalid: {reason}")))
}

/// The `iso8601` library's `parse_date` (what oslo's `parse_isotime`
/// calls): its grammar, then Python's `datetime` field checks, with their
/// texts. No zone means UTC.
fn parse_isotime(text: &str) -> Result<DateTime<FixedOffset>, String> {
    let unparsable = || format!("Unable to parse date string {}", py_repr(&Value::String(text.to_string())));
    let grammar = regex::Regex::new(concat!(
        r"^(?P<year>[0-9]{4})(((-(?P<monthdash>[0-9]{1,2}))|(?P<month>[0-9]{2}))",
        r"(((-(?P<daydash>[0-9]{1,2}))|(?P<day>[0-9]{2}))",
        r"(((?P<separator>[ T])(?P<hour>[0-9]{2})(:?(?P<minute>[0-9]{2}))?",
        r"(:?(?P<second>[0-9]{1,2})([.,](?P<second_fraction>[0-9]+))?)?",
        r"(?P<timezone>Z|((?P<tz_sign>[-+])(?P<tz_hour>[0-9]{2}):?(?P<tz_minute>[0-9]{2})?))?)?))?)?\n?$"
    ))
    .map_err(|e| e.to_string())?;
    let caps = grammar.captures(text).ok_or_else(unparsable)?;
    // The grammar refuses YYYYMM (a look-ahead upstream): a bare month
    // must be followed by a day.
    if caps.name("month").is_some() && caps.name("day").is_none() && caps.name("daydash").is_none() {
        return Err(unparsable());
    }
    let number = |names: &[&str], default: i64| {
        names.iter().find_map(|n| caps.name(n)).and_then(|m| m.as_str().parse::<i64>().ok()).unwrap_or(default)
    };
    // Python evaluates the zone (an argument) before the datetime checks.
    let offset = match caps.name("timezone").map(|m| m.as_str()) {
        None | Some("Z") => 0,
        Some(_) => {
            let seconds = number(&["tz_hour"], 0) * 3600 + number(&["tz_minute"], 0) * 60;
            let signed = if caps.name("tz_sign").map(|m| m.as_str()) == Some("-") { -seconds } else { seconds };
            if signed.abs() >= 86_400 {
                return Err(format!(
                    "offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not {}.",
                    timedelta_repr(signed)
                ));
            }
            signed
        }
    };
    let (year, month, day) = (number(&["year"], 0), number(&["month", "monthdash"], 1), number(&["day", "daydash"], 1));
    let (hour, minute, second) = (number(&["hour"], 0), number(&["minute"], 0), number(&["second"], 0));
    if year < 1 {
        return Err(format!("year {year} is out of range"));
    }
    if !(1..=12).contains(&month) {
        return Err("month must be in 1..12".to_string());
    }
    // The grammar bounds every field to a few digits: the conversions hold.
    let small = |v: i64| u32::try_from(v).unwrap_or(u32::MAX);
    let date = i32::try_from(year)
        .ok()
        .and_then(|y| NaiveDate::from_ymd_opt(y, small(month), small(day)))
        .ok_or_else(|| "day is out of range for month".to_string())?;
    for (field, v, max) in [("hour", hour, 23), ("minute", minute, 59), ("second", second, 59)] {
        if !(0..=max).contains(&v) {
            return Err(format!("{field} must be in 0..{max}"));
        }
    }
    let naive = date.and_hms_opt(small(hour), small(minute), small(second)).ok_or_else(unparsable)?;
    let zone = i32::try_from(offset).ok().and_then(FixedOffset::east_opt).ok_or_else(unparsable)?;
    zone.from_local_datetime(&naive).single().ok_or_else(unparsable)
}

/// Python's `repr(timedelta(seconds=s))`.
fn timedelta_repr(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    let mut fields = Vec::new();
    if days != 0 {
        fields.push(format!("days={days}"));
    }
    if rest != 0 {
        fields.push(format!("seconds={rest}"));
    }
    format!("datetime.timedelta({})", fields.join(", "))
}

/// Python's `str()` of a value, as Heat formats it into its texts.
fn py_text(value: &Value) -> String {
    crate::resources::properties::py_str(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reason(result: Result<(), Refusal>) -> String {
        result.unwrap_err().unwrap_or_default()
    }

    /// Accepted and refused examples (here and below) checked against
    /// neutron-lib 5.0.1, netaddr 1.3 and Heat 27.0.1's own checks run
    /// under Python.
    #[test]
    fn ip_addresses() {
        for ok in ["1.2.3.4", "::1", "::ffff:1.2.3.4", "FE80::1", "::1.2.3.4", "0.0.0.0"] {
            assert_eq!(ip_addr(&json!(ok)), Ok(()), "{ok}");
        }
        for bad in
            ["01.2.3.4", "1.2.3", "1.2.3.4 ", "fe80::1%eth0", "1.2.3.256", "0x1.2.3.4", "", "1.2.3.4/32", "1::2::3"]
        {
            assert_eq!(reason(ip_addr(&json!(bad))), "Invalid IP address", "{bad}");
        }
        assert_eq!(reason(ip_addr(&json!(5))), "Invalid IP address");
    }

    #[test]
    fn mac_addresses() {
        for ok in [
            "00:11:22:33:44:55",
            "00-11-22-33-44-55",
            "0011.2233.4455",
            "001122334455",
            "0:1:2:3:4:5",
            "aa:BB:cc:dd:ee:ff",
            "0011:2233:4455",
            "001122-334455",
            "00:11:22:33:44:55\n",
        ] {
            assert_eq!(mac_addr(&json!(ok)), Ok(()), "{ok}");
        }
        for bad in ["00:11:22:33:44", "zz:11:22:33:44:55", " 00:11:22:33:44:55", "001:11:22:33:44:55", ""] {
            assert_eq!(reason(mac_addr(&json!(bad))), "Invalid MAC address.", "{bad}");
        }
    }

    #[test]
    fn network_cidrs() {
        for ok in [
            "10.0.0.0/24",
            "10.0.0.1/24",
            "::1/64",
            "fe80::/10",
            "1.2.3.4/0",
            "::ffff:1.2.3.4/120",
            "FE80::/10",
            "::/0",
        ] {
            assert_eq!(net_cidr(&json!(ok)), Ok(()), "{ok}");
        }
        let cases = [
            ("nope", "Invalid net cidr invalid IPNetwork nope "),
            ("10.0.0.0/33", "Invalid net cidr invalid IPNetwork 10.0.0.0/33 "),
            (" 10.0.0.0/24", "Invalid net cidr invalid IPNetwork  10.0.0.0/24 "),
            ("010.0.0.0/8", "Invalid net cidr invalid IPNetwork 010.0.0.0/8 "),
            ("10.0.0.0/", "Invalid net cidr invalid IPNetwork 10.0.0.0/ "),
            ("256.0.0.0/8", "Invalid net cidr invalid IPNetwork 256.0.0.0/8 "),
            ("", "Invalid net cidr invalid IPNetwork  "),
            ("fe80::1%eth0/64", "Invalid net cidr invalid IPNetwork fe80::1%eth0/64 "),
            ("10.0.0.0", "'10.0.0.0' is not a valid IP subnet"),
            ("10/8", "'10/8' is not a valid IP subnet"),
            ("1.2.3/24", "'1.2.3/24' is not a valid IP subnet"),
            ("10.0.0.0/024", "'10.0.0.0/024' is not a valid IP subnet"),
            ("10.0.0.0/255.0.0.0", "'10.0.0.0/255.0.0.0' is not a valid IP subnet"),
            ("10.0.0.0/+8", "'10.0.0.0/+8' is not a valid IP subnet"),
            ("01.2.3.4", "Invalid net cidr invalid IPNetwork 01.2.3.4/8 "),
            ("a/8", "Invalid net cidr invalid IPNetwork a.0.0.0/8 "),
            ("-1.2.3.4", "Invalid net cidr Invalid octet: -1! "),
            (
                "10.0.0.0/8/8",
                "Invalid net cidr IPAddress() does not support netmasks or subnet prefixes! See documentation for details. ",
            ),
            ("10.0.0.0/ 24", "'10.0.0.0/ 24' is not a valid IP subnet"),
            ("1.2.3", "'1.2.3' is not a valid IP subnet"),
        ];
        for (value, expected) in cases {
            assert_eq!(reason(net_cidr(&json!(value))), expected, "{value}");
        }
    }

    #[test]
    fn addresses_or_cidrs() {
        for ok in ["10.0.0.1", "10.0.0.0/8", "::1", "fe80::/64"] {
            assert_eq!(ip_or_cidr(&json!(ok)), Ok(()), "{ok}");
        }
        assert_eq!(reason(ip_or_cidr(&json!("10.0.0"))), "'10.0.0' is not a valid IP address");
        assert_eq!(reason(ip_or_cidr(&json!("10.0.0/8"))), "'10.0.0/8' is not a valid IP subnet");
        assert_eq!(
            reason(ip_or_cidr(&json!("10.0.0.01"))),
            "'10.0.0.01' is not an accepted IP address, '10.0.0.1' is recommended"
        );
    }

    #[test]
    fn dns_names_and_domains() {
        for ok in ["", "host", "a.example.org", "a.example.org.", "x-1.b2"] {
            assert_eq!(dns_name(&json!(ok)), Ok(()), "{ok}");
        }
        let label = "Name 'Host' must be 1-63 characters long, each of which can only be alphanumeric or a hyphen.";
        assert_eq!(reason(dns_name(&json!("Host"))), format!("'Host' not in valid format. Reason: {label}"));
        assert_eq!(
            reason(dns_name(&json!("a..b"))),
            "'a..b' not in valid format. Reason: Encountered an empty component."
        );
        assert_eq!(
            reason(dns_name(&json!("-a.b"))),
            "'-a.b' not in valid format. Reason: Name '-a' must not start or end with a hyphen."
        );
        assert_eq!(
            reason(dns_name(&json!("a.123."))),
            "'a.123.' not in valid format. Reason: TLD '123' must not be all numeric."
        );
        let long = format!("{}.", vec!["a".repeat(63); 5].join("."));
        assert_eq!(
            reason(dns_name(&json!(long))),
            format!("'{long}' not in valid format. Reason: '{}' exceeds the 255 character FQDN limit", &long[..319])
        );
        assert_eq!(dns_domain(&json!("example.org.")), Ok(()));
        assert_eq!(dns_domain(&json!("")), Ok(()));
        assert_eq!(reason(dns_domain(&json!("example.org"))), "'example.org' must end with '.'.");
        assert_eq!(
            reason(dns_domain(&json!("Example.org."))),
            "'Example.org.' not in valid format. Reason: Name 'Example' must be 1-63 characters long, each of which can only be alphanumeric or a hyphen."
        );
        assert_eq!(rel_dns_name(&json!("host")), Ok(()));
        assert_eq!(reason(rel_dns_name(&json!("host."))), "'host.' is a FQDN. It should be a relative domain name.");
        let name = "a".repeat(253);
        assert_eq!(
            reason(rel_dns_name(&json!(name))),
            format!("'{name}' contains '253' characters. Adding a domain name will cause it to exceed the maximum length of a FQDN of '255'.")
        );
    }

    /// Outcomes as the iso8601 library (under Python 3.11) gives them.
    #[test]
    fn iso_8601_times() {
        for ok in
            ["2020", "2020-01", "2020-01-01", "20200101", "2020-01-01T10:00:00Z", "2020-01-01 10:00:00.5Z", "2020-1-5"]
        {
            assert_eq!(iso_8601(&json!(ok)), Ok(()), "{ok}");
        }
        for bad in ["nope", "202001", "2020-1-5T1", "2020-02-30", "0000-01-01", "2020-01-01T24:00"] {
            assert_eq!(iso_8601(&json!(bad)), Err(None), "{bad}");
        }
        let cases = [
            ("2020-02-30", "day is out of range for month"),
            ("2020-13-01", "month must be in 1..12"),
            ("0000-01-01", "year 0 is out of range"),
            ("2020-01-01T24:00", "hour must be in 0..23"),
            ("2020-01-01T23:60", "minute must be in 0..59"),
            ("2020-01-01T23:59:60", "second must be in 0..59"),
            ("202001", "Unable to parse date string '202001'"),
            ("2020-01-01T00:00+25:00", "offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=1, seconds=3600)."),
            ("2020-01-01T00:00-24:00", "offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=-1)."),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_isotime(text).unwrap_err(), expected, "{text}");
        }
        let at = parse_isotime("2020-01-01T10:00:00+02:00").unwrap();
        assert_eq!(at.with_timezone(&Utc).to_rfc3339(), "2020-01-01T08:00:00+00:00");
    }

    #[test]
    fn expirations() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        assert_eq!(expiration(&json!("2030-01-01T00:00:00Z"), now), Ok(()));
        assert_eq!(expiration(&json!(""), now), Ok(()));
        assert_eq!(
            reason(expiration(&json!("2020-01-01T00:00:00Z"), now)),
            "Expiration 2020-01-01T00:00:00Z is invalid: Expiration time is out of date."
        );
        assert_eq!(
            reason(expiration(&json!("soon"), now)),
            "Expiration soon is invalid: Unable to parse date string 'soon'"
        );
    }
}
