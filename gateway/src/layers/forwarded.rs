//! `X-Forwarded-Proto`/`-Host`/`-Prefix`/`-For` from a trusted proxy, as
//! oslo.middleware's HTTPProxyToWSGI: links and logs use what the client
//! saw.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

/// What the proxy told us about the original request.
#[derive(Debug, Clone, Default)]
pub struct Forwarded {
    /// Path prefix the API is mounted under (`X-Forwarded-Prefix`), used in
    /// every link the API returns.
    pub prefix: String,
    /// The client address (`X-Forwarded-For`'s first entry).
    pub client: Option<String>,
}

pub async fn layer(mut req: Request, next: Next) -> Response {
    let forwarded = {
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        Forwarded {
            prefix: header("x-forwarded-prefix").map(|p| p.trim_end_matches('/').to_string()).unwrap_or_default(),
            client: header("x-forwarded-for").and_then(|v| v.split(',').next().map(|s| s.trim().to_string())),
        }
    };
    req.extensions_mut().insert(forwarded);
    next.run(req).await
}
