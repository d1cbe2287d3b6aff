//! AWS signature version 2, as Keystone's `POST /v3/ec2tokens` checks it
//! (keystoneclient's `Ec2Signer`): HMAC-SHA256 over the verb, the host
//! (with its port), the path and the sorted, re-encoded query, base64
//! encoded. Heat signs its pre-signed signal URLs this way with a stack
//! user's EC2 secret; heat-api-cfn passes what it received to Keystone.

use std::collections::BTreeMap;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Percent-encodes everything but RFC 3986's unreserved characters
/// (Python's `urllib.parse.quote(s, safe='-_~')`, and `safe=''` for keys:
/// the same set).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The sorted, encoded query that is signed.
pub fn canonical_query(params: &BTreeMap<String, String>) -> String {
    params.iter().map(|(k, v)| format!("{}={}", quote(k), quote(v))).collect::<Vec<_>>().join("&")
}

/// The version 2 signature of a request: `params` without `Signature`
/// (`SignatureMethod` is signed as HmacSHA256, as keystoneclient forces it).
pub fn signature_v2(secret: &str, verb: &str, host: &str, path: &str, params: &BTreeMap<String, String>) -> String {
    let mut params = params.clone();
    params.remove("Signature");
    params.insert("SignatureMethod".into(), "HmacSHA256".into());
    let text = format!("{verb}\n{host}\n{path}\n{}", canonical_query(&params));
    // HMAC takes keys of any length: this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(text.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Heat's pre-signed URL (`SignalResponder._get_ec2_signed_url`): `base`
/// (`scheme://host:port/v1/waitcondition` or `…/v1/signal`, lower-cased)
/// followed by the quoted ARN, with `AWSAccessKeyId`, `SignatureMethod`,
/// `SignatureVersion`, `Timestamp` (unless `timestamp` is None: a URL that
/// never expires) and `Signature`. The signature covers the unquoted path,
/// which is what the API receives after WSGI decoding.
pub fn presigned_url(base: &str, verb: &str, arn: &str, access: &str, secret: &str, timestamp: Option<&str>) -> String {
    let base = base.to_lowercase();
    let (host, base_path) = split_url(&base);
    let mut params = BTreeMap::new();
    params.insert("SignatureMethod".to_string(), "HmacSHA256".to_string());
    params.insert("SignatureVersion".to_string(), "2".to_string());
    params.insert("AWSAccessKeyId".to_string(), access.to_string());
    if let Some(t) = timestamp {
        params.insert("Timestamp".to_string(), t.to_string());
    }
    let unquoted_path = format!("{base_path}/{arn}");
    let signature = signature_v2(secret, verb, host, &unquoted_path, &params);
    params.insert("Signature".to_string(), signature);
    // urlencode's quote_plus: a space would be '+'; none of these values
    // holds one.
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{}={}", quote(k), quote(v))).collect();
    format!("{base}/{}?{}", quote(arn), query.join("&"))
}

/// (`host[:port]`, path) of an absolute URL.
fn split_url(url: &str) -> (&str, &str) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What keystoneclient's `Ec2Signer(secret).generate(...)` answers for
    /// the same requests (computed with python-keystoneclient 6.0.0).
    #[test]
    fn keystoneclient_v2_vector() {
        let mut params = BTreeMap::new();
        params.insert("SignatureVersion".to_string(), "2".to_string());
        params.insert("SignatureMethod".to_string(), "HmacSHA256".to_string());
        let sig = signature_v2("secret", "GET", "127.0.0.1:8773", "/v1/", &params);
        assert_eq!(sig, "iOD1Bw0z9RZe3GP7DYY4T1gFFb/ytVn1IJTabwwOl3U=");
    }

    #[test]
    fn presigned_urls() {
        let url = presigned_url(
            "http://Host:8000/v1/waitcondition",
            "PUT",
            "arn:openstack:heat::p:stacks/s/1/resources/h",
            "AK",
            "SK",
            Some("2026-01-01T00:00:00Z"),
        );
        let (base, query) = url.split_once('?').unwrap();
        assert_eq!(
            base,
            "http://host:8000/v1/waitcondition/arn%3Aopenstack%3Aheat%3A%3Ap%3Astacks%2Fs%2F1%2Fresources%2Fh"
        );
        assert!(query.starts_with("AWSAccessKeyId=AK&Signature="), "{query}");
        assert!(query.ends_with("&SignatureMethod=HmacSHA256&SignatureVersion=2&Timestamp=2026-01-01T00%3A00%3A00Z"));
        // What Keystone recomputes from what the API received.
        let mut params: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in [
            ("AWSAccessKeyId", "AK"),
            ("SignatureVersion", "2"),
            ("SignatureMethod", "HmacSHA256"),
            ("Timestamp", "2026-01-01T00:00:00Z"),
        ] {
            params.insert(k.into(), v.into());
        }
        let expected = signature_v2(
            "SK",
            "PUT",
            "host:8000",
            "/v1/waitcondition/arn:openstack:heat::p:stacks/s/1/resources/h",
            &params,
        );
        assert_eq!(expected, "MHoXj5MDpt1v1MVavqNzDdJG8jwnUKznmZipggY3kY4=");
        assert!(query.contains(&format!("Signature={}", quote(&expected))));
        let never = presigned_url("http://h/v1/signal", "POST", "arn", "AK", "SK", None);
        assert!(!never.contains("Timestamp"));
    }
}
