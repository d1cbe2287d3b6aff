//! What the Placement listener answers itself ([`crate::listener`]): the
//! refusals hyper would make with an empty body, as Placement's JSON error.
//!
//! Each detail is webob's explanation of the status, a blank line, then
//! what was wrong ([`Refusal::message`]), the way Placement's error bodies
//! read; a non-integer `Content-Length` keeps upstream's own text, which
//! clients read.

use axum::response::Response;
use http::HeaderValue;

use super::error::{detail_text, render_with_detail};
use crate::listener::{Refusal, Refusals};

/// Placement's words for the listener's refusals.
pub struct PlacementRefusals;

/// webob's explanation of the statuses Placement's error table lacks.
fn explanation(status: u16) -> &'static str {
    match status {
        408 => "The server has waited too long for the request to be sent by the client.",
        414 => "The request URI was too long for this server.",
        431 => "The request header fields were too large",
        _ => "The server could not comply with the request since it is either malformed or otherwise incorrect.",
    }
}

impl Refusals for PlacementRefusals {
    fn render(&self, refusal: &Refusal, request_id: &str) -> Response {
        let status = refusal.status();
        let detail = match refusal {
            Refusal::BadContentLength | Refusal::Malformed(_) => detail_text(400, &refusal.message()),
            _ => format!("{}\n\n {}  ", explanation(status), refusal.message()),
        };
        let mut resp = render_with_detail(status, "", detail, None, request_id, None);
        resp.headers_mut().insert("openstack-api-version", HeaderValue::from_static("placement 1.0"));
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_content_length_keeps_upstreams_text() {
        let resp = PlacementRefusals.render(&Refusal::BadContentLength, "req-1");
        assert_eq!(resp.status(), 400);
        let body = axum::body::to_bytes(resp.into_body(), 4096).await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["errors"][0]["detail"], detail_text(400, "content-length header must be an integer"));
        assert_eq!(v["errors"][0]["request_id"], "req-1");
        assert_eq!(v["errors"][0]["title"], "Bad Request");
    }
}
