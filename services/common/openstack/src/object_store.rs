//! Swift's object storage API v1, the calls Heat's OS::Swift::Container,
//! OS::Heat::SwiftSignalHandle and OS::Heat::SwiftSignal make through
//! python-swiftclient, over a [`Session`] and the catalog's
//! `object-store` endpoint (the storage URL, `.../v1/AUTH_<project>`).
//!
//! An error answer carries the text swiftclient's `ClientException`
//! prints (what Heat shows in a status reason): the operation, the URL,
//! the status and reason, the start of Swift's answer and its
//! transaction id. Temp URLs are signed as swiftclient's
//! `generate_temp_url` signs them by default: HMAC-SHA256 of
//! `METHOD\nEXPIRES\nPATH`, hex.

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use http::{Method, StatusCode};
use serde_json::Value;
use sha2::Sha256;

use crate::error::OsError;
use crate::http::{Answer, Payload};
use crate::session::Session;

/// Heat's name of this client: its endpoint type and TLS settings go by it.
pub const CLIENT: &str = "swift";

/// The account metadata header whose value signs temp URLs.
pub const TEMP_URL_KEY: &str = "x-account-meta-temp-url-key";

/// A response's headers, names lower-cased (swiftclient's `resp_header_dict`).
pub type Headers = BTreeMap<String, String>;

/// swiftclient's `quote`: UTF-8 percent-encoded, `/` kept.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Python's `repr` of a `bytes` value.
fn bytes_repr(bytes: &[u8]) -> String {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') { '"' } else { '\'' };
    let mut out = format!("b{quote}");
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            _ if char::from(b) == quote => {
                out.push('\\');
                out.push(quote);
            }
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push(quote);
    out
}

/// The text of swiftclient's `ClientException.from_response(resp, what,
/// body)`: `<what>: <url> <status> <reason>`, Swift's answer (whole up to
/// 60 bytes, else its first 60) and `(txn: <id>)`.
pub fn client_exception_text(what: &str, url: &str, answer: &Answer) -> String {
    let mut text = String::new();
    if let Ok(uri) = url.parse::<http::Uri>() {
        if let Some(scheme) = uri.scheme_str() {
            text.push_str(&format!("{scheme}://"));
        }
        if let Some(host) = uri.host() {
            text.push_str(&host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase());
        }
        if let Some(port) = uri.port_u16() {
            text.push_str(&format!(":{port}"));
        }
        text.push_str(uri.path());
        if let Some(query) = uri.query().filter(|q| !q.is_empty()) {
            text.push_str(&format!("?{query}"));
        }
    }
    let status = answer.status.as_u16();
    text = if text.is_empty() { status.to_string() } else { format!("{text} {status}") };
    if let Some(reason) = answer.status.canonical_reason() {
        text = format!("{text} {reason}");
    }
    let body = &answer.body;
    if !body.is_empty() {
        if body.len() <= 60 {
            text.push_str(&format!("   {}", bytes_repr(body)));
        } else {
            text.push_str(&format!("  [first 60 chars of response] {}", bytes_repr(&body[..60])));
        }
    }
    let txn = ["x-trans-id", "x-openstack-request-id"].into_iter().find_map(|h| answer.header(h));
    match txn {
        Some(id) => format!("{what}: {text} (txn: {id})"),
        None => format!("{what}: {text}"),
    }
}

/// The HMAC-SHA256 signature of a temp URL for `method` on `path` until
/// `expires` (Unix seconds), hex.
pub fn temp_url_signature(path: &str, expires: i64, key: &str, method: &str) -> String {
    let body = format!("{}\n{expires}\n{path}", method.to_ascii_uppercase());
    // HMAC takes a key of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key.as_bytes()) else {
        return String::new();
    };
    mac.update(body.as_bytes());
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// swiftclient's `generate_temp_url(path, expires, key, method,
/// absolute=True)`: `path?temp_url_sig=...&temp_url_expires=...`.
pub fn temp_url_path(path: &str, expires: i64, key: &str, method: &str) -> String {
    let sig = temp_url_signature(path, expires, key, method);
    format!("{path}?temp_url_sig={sig}&temp_url_expires={expires}")
}

/// `scheme://netloc` of `url` (Heat puts a temp URL's path on the storage
/// URL's host).
pub fn origin(url: &str) -> &str {
    let Some(scheme_end) = url.find("://") else { return url };
    let rest = &url[scheme_end + 3..];
    match rest.find(['/', '?', '#']) {
        Some(i) => &url[..scheme_end + 3 + i],
        None => url,
    }
}

/// Swift's object storage API for one account, as one session sees it.
pub struct ObjectStore<'a> {
    session: &'a Session,
    /// The storage URL (`.../v1/AUTH_<project>`), no trailing slash.
    url: String,
}

impl<'a> ObjectStore<'a> {
    /// The `object-store` endpoint of the session's catalog (as its
    /// endpoint choice picks it for `swift`).
    pub async fn connect(session: &'a Session) -> Result<ObjectStore<'a>, OsError> {
        let endpoint = session.client_endpoint(CLIENT, "object-store").await?;
        Ok(ObjectStore::at(session, &endpoint))
    }

    /// A client of the account at storage URL `url`.
    pub fn at(session: &'a Session, url: &str) -> ObjectStore<'a> {
        ObjectStore { session, url: url.trim_end_matches('/').to_string() }
    }

    /// The storage URL (swiftclient's `Connection.url`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One request to `path` under the storage URL; a status outside 2xx
    /// is the error swiftclient raises, worded as it words it (`what`).
    async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Payload<'_>,
        what: &str,
    ) -> Result<Answer, OsError> {
        let url = format!("{}{path}", self.url);
        let answer = self.session.client_answer(CLIENT, method, &url, headers, body).await?;
        if answer.status.is_success() {
            return Ok(answer);
        }
        Err(OsError::of_status(answer.status, client_exception_text(what, &url, &answer)))
    }

    fn container_path(container: &str) -> String {
        format!("/{}", quote(container))
    }

    fn object_path(container: &str, object: &str) -> String {
        format!("/{}/{}", quote(container), quote(object))
    }

    /// `HEAD` the account: its headers.
    pub async fn head_account(&self) -> Result<Headers, OsError> {
        let answer = self.request(Method::HEAD, "", &[], Payload::Empty, "Account HEAD failed").await?;
        Ok(header_dict(&answer))
    }

    /// `POST` the account with `headers` (its metadata).
    pub async fn post_account(&self, headers: &[(&str, &str)]) -> Result<(), OsError> {
        self.request(Method::POST, "", headers, Payload::Empty, "Account POST failed").await.map(drop)
    }

    /// `PUT` a container with `headers`.
    pub async fn put_container(&self, container: &str, headers: &[(&str, &str)]) -> Result<(), OsError> {
        let path = Self::container_path(container);
        self.request(Method::PUT, &path, headers, Payload::Empty, "Container PUT failed").await.map(drop)
    }

    /// `HEAD` a container: its headers.
    pub async fn head_container(&self, container: &str) -> Result<Headers, OsError> {
        let path = Self::container_path(container);
        let answer = self.request(Method::HEAD, &path, &[], Payload::Empty, "Container HEAD failed").await?;
        Ok(header_dict(&answer))
    }

    /// The names of the container's objects: the one page (up to Swift's
    /// listing limit) `GET ?format=json` gives, as swiftclient's
    /// `get_container` without `full_listing`.
    pub async fn list_objects(&self, container: &str) -> Result<Vec<String>, OsError> {
        let path = format!("{}?format=json", Self::container_path(container));
        let answer = self.request(Method::GET, &path, &[], Payload::Empty, "Container GET failed").await?;
        if answer.status == StatusCode::NO_CONTENT || answer.body.is_empty() {
            return Ok(Vec::new());
        }
        let listing = answer.json()?;
        let entries = listing
            .as_array()
            .ok_or_else(|| OsError::InvalidResponse("a container listing that is not a list".into()))?;
        Ok(entries.iter().filter_map(|e| e.get("name").and_then(Value::as_str)).map(str::to_owned).collect())
    }

    /// `DELETE` a container (Swift answers 409 while it holds objects).
    pub async fn delete_container(&self, container: &str) -> Result<(), OsError> {
        let path = Self::container_path(container);
        self.request(Method::DELETE, &path, &[], Payload::Empty, "Container DELETE failed").await.map(drop)
    }

    /// `PUT` an object with `content`.
    pub async fn put_object(&self, container: &str, object: &str, content: &[u8]) -> Result<(), OsError> {
        let path = Self::object_path(container, object);
        self.request(Method::PUT, &path, &[], Payload::Bytes(content), "Object PUT failed").await.map(drop)
    }

    /// `GET` an object: its content.
    pub async fn get_object(&self, container: &str, object: &str) -> Result<bytes::Bytes, OsError> {
        let path = Self::object_path(container, object);
        Ok(self.request(Method::GET, &path, &[], Payload::Empty, "Object GET failed").await?.body)
    }

    /// `DELETE` an object (on a versioned container, the newest older
    /// version takes its place).
    pub async fn delete_object(&self, container: &str, object: &str) -> Result<(), OsError> {
        let path = Self::object_path(container, object);
        self.request(Method::DELETE, &path, &[], Payload::Empty, "Object DELETE failed").await.map(drop)
    }

    /// The account's temp URL key, set to `new_key()` first when the
    /// account has none (Heat's `get_temp_url`).
    pub async fn temp_url_key(&self, new_key: impl FnOnce() -> String) -> Result<String, OsError> {
        if !self.head_account().await?.contains_key(TEMP_URL_KEY) {
            let key = new_key();
            self.post_account(&[(TEMP_URL_KEY, key.as_str())]).await?;
        }
        // Read back: a concurrent writer's key is the one Swift checks.
        self.head_account()
            .await?
            .remove(TEMP_URL_KEY)
            .ok_or_else(|| OsError::InvalidResponse("the account kept no temp URL key".into()))
    }
}

fn header_dict(answer: &Answer) -> Headers {
    answer
        .headers
        .iter()
        .filter_map(|(name, value)| value.to_str().ok().map(|v| (name.as_str().to_ascii_lowercase(), v.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values python-swiftclient 4.11.0 computes:
    /// `generate_temp_url('/v1/AUTH_p1/3f2a/st-handle-abcdefghijkl',
    /// 2147483586, 'secretkey0123456', 'PUT', absolute=True)`.
    #[test]
    fn temp_urls_sign_as_swiftclient() {
        assert_eq!(
            temp_url_path("/v1/AUTH_p1/3f2a/st-handle-abcdefghijkl", 2147483586, "secretkey0123456", "put"),
            "/v1/AUTH_p1/3f2a/st-handle-abcdefghijkl?temp_url_sig=8917c29be6678e9cb50ca7f8db86de78d7ff93a65ad8bd98494db705dd7ef32b&temp_url_expires=2147483586"
        );
        assert_eq!(origin("http://swift:8080/v1/AUTH_p1"), "http://swift:8080");
        assert_eq!(origin("https://swift.example"), "https://swift.example");
    }

    fn answer(status: u16, body: &[u8], txn: Option<&str>) -> Answer {
        let mut headers = http::HeaderMap::new();
        if let Some(txn) = txn {
            headers.insert("x-trans-id", txn.parse().unwrap());
        }
        Answer { status: StatusCode::from_u16(status).unwrap(), headers, body: bytes::Bytes::copy_from_slice(body) }
    }

    /// As python-swiftclient 4.11.0's `str(ClientException(...))` prints.
    #[test]
    fn errors_read_as_swiftclients() {
        let conflict = answer(
            409,
            b"<html><h1>Conflict</h1><p>There was a conflict when trying to complete your request.</p></html>",
            Some("tx1"),
        );
        assert_eq!(
            client_exception_text("Container DELETE failed", "http://Swift.example:8080/v1/AUTH_p1/c", &conflict),
            "Container DELETE failed: http://swift.example:8080/v1/AUTH_p1/c 409 Conflict  [first 60 chars of response] b'<html><h1>Conflict</h1><p>There was a conflict when trying t' (txn: tx1)"
        );
        let odd = answer(404, b"it's \"x\"\n\x01", None);
        assert_eq!(
            client_exception_text("Container GET failed", "http://swift.example/v1/AUTH_p1/c?format=json", &odd),
            "Container GET failed: http://swift.example/v1/AUTH_p1/c?format=json 404 Not Found   b'it\\'s \"x\"\\n\\x01'"
        );
        assert_eq!(bytes_repr(b"it's"), "b\"it's\"");
        assert_eq!(
            client_exception_text("Object GET failed", "http://s/v1/A/c/o", &answer(404, b"", None)),
            "Object GET failed: http://s/v1/A/c/o 404 Not Found"
        );
        assert_eq!(quote("a b/ü"), "a%20b/%C3%BC");
    }
}
