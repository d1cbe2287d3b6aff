//! The page's files, built into the binary: it works offline and loads
//! nothing from another origin (a test below reads every file for one).

use std::sync::OnceLock;

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use keelson_runtime::ApiError;
use sha2::Digest as _;

use super::{console_route, ConsoleReq};
use crate::routes::Route;

/// One file of the page.
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:literal) => {
        Asset { name: $name, content_type: $type, body: include_bytes!(concat!("assets/", $name)) }
    };
}

/// Every file the page is made of.
pub const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("console.css", "text/css; charset=utf-8"),
    asset!("icon.svg", "image/svg+xml"),
    asset!("api.js", "text/javascript; charset=utf-8"),
    asset!("svg.js", "text/javascript; charset=utf-8"),
    asset!("console.js", "text/javascript; charset=utf-8"),
    asset!("fleet.js", "text/javascript; charset=utf-8"),
    asset!("explain.js", "text/javascript; charset=utf-8"),
    asset!("stacks.js", "text/javascript; charset=utf-8"),
    asset!("controller.js", "text/javascript; charset=utf-8"),
    asset!("metrics.js", "text/javascript; charset=utf-8"),
];

pub fn routes() -> Vec<Route<super::Handler>> {
    vec![
        console_route!(GET "/keelson/console" => to_page),
        console_route!(GET "/keelson/console/" => index),
        console_route!(GET "/keelson/console/{name}" => file),
    ]
}

/// Each file's entity tag (its content's digest), computed once.
fn etags() -> &'static [String] {
    static ETAGS: OnceLock<Vec<String>> = OnceLock::new();
    ETAGS.get_or_init(|| {
        ASSETS.iter().map(|a| format!("\"{}\"", hex::encode(&sha2::Sha256::digest(a.body)[..12]))).collect()
    })
}

/// `/keelson/console` → `/keelson/console/`, so the page's relative links
/// resolve under it (relative, so a proxy's prefix is kept).
async fn to_page(_req: ConsoleReq) -> Result<Response, ApiError> {
    let mut resp = StatusCode::MOVED_PERMANENTLY.into_response();
    resp.headers_mut().insert(http::header::LOCATION, HeaderValue::from_static("console/"));
    Ok(resp)
}

async fn index(req: ConsoleReq) -> Result<Response, ApiError> {
    serve(&req, "index.html")
}

async fn file(req: ConsoleReq) -> Result<Response, ApiError> {
    let name = req.params.get("name").cloned().unwrap_or_default();
    serve(&req, &name)
}

fn serve(req: &ConsoleReq, name: &str) -> Result<Response, ApiError> {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        return Err(ApiError::new(404, "", ""));
    };
    let (asset, etag) = (&ASSETS[i], &etags()[i]);
    let fresh = req
        .headers
        .get(http::header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut resp = if fresh { StatusCode::NOT_MODIFIED.into_response() } else { asset.body.into_response() };
    let headers = resp.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    if let Ok(v) = HeaderValue::from_str(etag) {
        headers.insert(http::header::ETAG, v);
    }
    // Revalidated on every load: a new binary serves new files at once.
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page must work offline: no file names another origin, not even
    /// in a comment (`http://www.w3.org/2000/svg` is a namespace name,
    /// never fetched).
    #[test]
    fn no_asset_names_another_origin() {
        let re = regex::Regex::new(r#"(?i)(https?:|wss?:|ftp:)?//[a-z0-9.-]+\.[a-z]{2,}"#).unwrap();
        for asset in ASSETS {
            let text = std::str::from_utf8(asset.body).unwrap();
            for m in re.find_iter(text) {
                assert_eq!(m.as_str(), "http://www.w3.org", "{} names another origin: {}", asset.name, m.as_str());
            }
            for word in ["@import", "cdn", "googleapis", "unpkg", "jsdelivr"] {
                assert!(!text.to_lowercase().contains(word), "{} mentions {word}", asset.name);
            }
        }
    }

    /// What the page asks for is here, and nothing here is unused.
    #[test]
    fn every_reference_resolves() {
        let re = regex::Regex::new(r##"(?:src|href)="([^"#:]+)"|from '\./([^']+)'"##).unwrap();
        let mut used = std::collections::BTreeSet::from(["index.html"]);
        for asset in ASSETS {
            let text = std::str::from_utf8(asset.body).unwrap();
            for c in re.captures_iter(text) {
                let name = c.get(1).or_else(|| c.get(2)).unwrap().as_str();
                let found = ASSETS.iter().find(|a| a.name == name);
                assert!(found.is_some(), "{} refers to {name}, which is not built in", asset.name);
                used.insert(found.unwrap().name);
            }
        }
        let unused: Vec<&str> = ASSETS.iter().map(|a| a.name).filter(|n| !used.contains(n)).collect();
        assert!(unused.is_empty(), "unused: {unused:?}");
    }

    /// Nothing the Content-Security-Policy would refuse: no inline script
    /// or style, no `eval`.
    #[test]
    fn nothing_inline() {
        let inline = regex::Regex::new(r"<script(?:\s[^>]*)?>\s*[^<\s]").unwrap();
        for asset in ASSETS {
            let text = std::str::from_utf8(asset.body).unwrap();
            for word in [" style=", "<style", " onclick=", " onload=", "javascript:", "eval(", "new Function"] {
                assert!(!text.contains(word), "{} has {word:?}", asset.name);
            }
            if asset.name.ends_with(".html") {
                assert!(!inline.is_match(text), "{} has an inline script", asset.name);
            }
        }
    }
}
