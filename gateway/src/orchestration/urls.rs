//! URLs as heat-api writes them: the request's base (`scheme://host` and
//! the proxy's prefix, as oslo's HTTPProxyToWSGI sets them), percent
//! coding as Python's `urllib.parse`, query strings, the canonical stack
//! URL and the engine's path-relative links made absolute.

use http::HeaderMap;

/// `scheme://host[/prefix]` of the request, honouring `X-Forwarded-Proto`,
/// `X-Forwarded-Host` and `X-Forwarded-Prefix`.
pub fn base_url(headers: &HeaderMap) -> String {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty());
    let scheme = header("x-forwarded-proto").and_then(|v| v.split(',').next()).map(str::trim).unwrap_or("http");
    let host = header("x-forwarded-host")
        .and_then(|v| v.split(',').next())
        .map(str::trim)
        .or_else(|| header("host"))
        .unwrap_or("localhost");
    let prefix = header("x-forwarded-prefix").map(|p| p.trim_end_matches('/')).unwrap_or("");
    let prefix = if prefix.is_empty() || prefix.starts_with('/') { prefix.to_string() } else { format!("/{prefix}") };
    format!("{scheme}://{host}{prefix}")
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'~')
}

/// `urllib.parse.quote(s, safe)`.
pub fn quote(s: &str, safe: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if is_unreserved(b) || safe.as_bytes().contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `urllib.parse.quote_plus(s)`: as a query component.
fn quote_plus(s: &str) -> String {
    quote(s, " ").replace(' ', "+")
}

/// Percent-decoding; `plus_is_space` for query components. Invalid
/// escapes are kept as they are, invalid UTF-8 is replaced (as WSGI's
/// latin-1 round trip would garble it anyway).
pub fn unquote(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if plus_is_space && b == b'+' { b' ' } else { b });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The query string's pairs, decoded, in order (repeated keys repeated).
/// Blank values are kept, as webob's `req.params`.
pub fn query_pairs(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (unquote(k, true), unquote(v, true))
        })
        .collect()
}

/// `urllib.parse.urlencode(pairs, doseq=True)`.
pub fn urlencode(pairs: &[(String, String)]) -> String {
    pairs.iter().map(|(k, v)| format!("{}={}", quote_plus(k), quote_plus(v))).collect::<Vec<_>>().join("&")
}

/// The canonical URL of a stack (`HeatIdentifier.url_path()` under
/// `<base>/v1/`), with the identity's own sub-path.
pub fn stack_url(base: &str, tenant: &str, stack_name: &str, stack_id: &str, path: &str) -> String {
    let path = if !path.is_empty() && !path.starts_with('/') { format!("/{path}") } else { path.to_string() };
    format!(
        "{base}/v1/{}/stacks/{}/{}{}",
        quote(tenant, ""),
        quote(stack_name, ""),
        quote(stack_id, ""),
        quote(&path, "/")
    )
}

/// A stack identity parsed from Heat's ARN form
/// `arn:openstack:heat::{tenant}:stacks/{name}/{id}[/path]`
/// (`HeatIdentifier.from_arn`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArnIdentity {
    pub tenant: String,
    pub stack_name: String,
    pub stack_id: String,
    pub path: String,
}

pub fn parse_arn(arn: &str) -> Option<ArnIdentity> {
    let fields: Vec<&str> = arn.split(':').collect();
    if fields.len() < 6 || !fields[0].eq_ignore_ascii_case("arn") || fields[1] != "openstack" || fields[2] != "heat" {
        return None;
    }
    let fragment = fields[5..].join(":");
    let rest = fragment.strip_prefix("stacks/")?;
    let (name, rest) = rest.split_once('/')?;
    let (id, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if name.is_empty() || id.is_empty() {
        return None;
    }
    let stack_name = unquote(name, false);
    // HeatIdentifier refuses a name with a slash.
    if stack_name.contains('/') {
        return None;
    }
    Some(ArnIdentity {
        tenant: unquote(fields[4], false),
        stack_name,
        stack_id: unquote(id, false),
        path: unquote(path, false),
    })
}

/// Prefixes `base` to every path-relative `links[*].href` of an engine
/// document, at any depth.
pub fn absolutize_links(doc: &mut serde_json::Value, base: &str) {
    match doc {
        serde_json::Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if key == "links" {
                    if let serde_json::Value::Array(links) = value {
                        for link in links.iter_mut() {
                            if let Some(serde_json::Value::String(href)) = link.get_mut("href") {
                                if href.starts_with('/') {
                                    *href = format!("{base}{href}");
                                }
                            }
                        }
                    }
                }
                absolutize_links(value, base);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| absolutize_links(v, base)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_honours_the_proxy() {
        let mut h = HeaderMap::new();
        h.insert("host", "10.0.0.1:8004".parse().unwrap());
        assert_eq!(base_url(&h), "http://10.0.0.1:8004");
        h.insert("x-forwarded-proto", "https".parse().unwrap());
        h.insert("x-forwarded-host", "heat.example.com".parse().unwrap());
        h.insert("x-forwarded-prefix", "/orchestration/".parse().unwrap());
        assert_eq!(base_url(&h), "https://heat.example.com/orchestration");
    }

    #[test]
    fn quoting_and_queries() {
        assert_eq!(quote("a b/c", ""), "a%20b%2Fc");
        assert_eq!(quote("/x y", "/"), "/x%20y");
        let pairs = query_pairs("sort_keys=name&sort_keys=status&q=a+b%2Bc&flag");
        assert_eq!(pairs[1], ("sort_keys".to_string(), "status".to_string()));
        assert_eq!(pairs[2].1, "a b+c");
        assert_eq!(pairs[3], ("flag".to_string(), String::new()));
        assert_eq!(urlencode(&pairs), "sort_keys=name&sort_keys=status&q=a+b%2Bc&flag=");
        assert_eq!(unquote("100%", false), "100%");
    }

    #[test]
    fn arn_identities() {
        let a = parse_arn("arn:openstack:heat::admin:stacks/s/1234/resources").unwrap();
        assert_eq!(
            (a.tenant.as_str(), a.stack_name.as_str(), a.stack_id.as_str(), a.path.as_str()),
            ("admin", "s", "1234", "/resources")
        );
        assert!(parse_arn("arn:openstack:nova::admin:stacks/s/1").is_none());
        assert!(parse_arn("arn:openstack:heat::admin:stacks/s").is_none());
        assert_eq!(stack_url("http://h", "t", "a b", "1", "/resources"), "http://h/v1/t/stacks/a%20b/1/resources");
    }

    #[test]
    fn links_are_made_absolute_at_any_depth() {
        let mut doc = serde_json::json!({"stacks": [{"id": "1", "links": [{"href": "/v1/t/stacks/s/1", "rel": "self"}]}],
            "links": [{"href": "http://already/abs", "rel": "next"}]});
        absolutize_links(&mut doc, "http://h:8004");
        assert_eq!(doc["stacks"][0]["links"][0]["href"], "http://h:8004/v1/t/stacks/s/1");
        assert_eq!(doc["links"][0]["href"], "http://already/abs");
    }
}
