//! The fault wrapper: a panic anywhere below becomes a JSON 500 with the
//! API's error body instead of a dropped connection.

use std::panic::AssertUnwindSafe;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures::FutureExt as _;
use keelson_runtime::RequestContext;

/// How an API renders its 500.
pub type RenderInternal = fn(request_id: &str) -> Response;

pub async fn layer(
    axum::extract::State(render): axum::extract::State<RenderInternal>,
    req: Request,
    next: Next,
) -> Response {
    let request_id = req.extensions().get::<RequestContext>().map(|c| c.request_id.clone()).unwrap_or_default();
    match AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(resp) => resp,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            tracing::error!(target: "keelson::fault", request_id = %request_id, "request handler panicked: {what}");
            render(&request_id)
        }
    }
}
