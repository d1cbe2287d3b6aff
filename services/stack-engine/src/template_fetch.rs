//! Templates fetched from a URL (Heat's `heat/common/urlfetch.py`): the
//! child template of an AWS::CloudFormation::Stack, and a stack request's
//! `template_url`. A tenant chooses the URL, so the fetch is bounded: only
//! http and https, the answer cut off past `[orchestration]
//! max_template_size`, the request and the answer each within `[orchestration]
//! client_timeout`. The texts of the errors are Heat's.
//!
//! The transport is keelson-openstack's client; https servers are verified
//! against the system's CAs, as Heat's `requests.get` does by default.

use std::time::Duration;

use http::Method;
use keelson_openstack::http::HttpClient;
use keelson_openstack::OsError;

use crate::options;

/// Why a template could not be fetched; `Display` is Heat's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The URL's scheme is not http or https (Python `urlparse`'s scheme,
    /// empty when it has none).
    #[error("Invalid URL scheme {0}")]
    InvalidScheme(String),
    /// The answer went past `max_template_size` bytes.
    #[error("Template exceeds maximum allowed size ({0} bytes)")]
    TooLarge(usize),
    /// No answer, an error status, a timeout, or a body that is not text.
    #[error("Failed to retrieve template from {0}")]
    Failed(String),
}

/// The fetcher of one engine process (cheap to clone: one connection pool).
#[derive(Debug, Clone)]
pub struct TemplateFetcher {
    http: HttpClient,
    max_size: usize,
}

impl Default for TemplateFetcher {
    /// The options' defaults.
    fn default() -> Self {
        let timeout = Duration::from_secs(options::CLIENT_TIMEOUT.default_value().unsigned_abs());
        let max_size = keelson_runtime::config::clamp_usize(options::MAX_TEMPLATE_SIZE.default_value());
        TemplateFetcher::new(timeout, max_size)
    }
}

impl TemplateFetcher {
    /// A fetcher whose request and answer each take at most `timeout` and
    /// whose answers hold at most `max_size` bytes.
    pub fn new(timeout: Duration, max_size: usize) -> Self {
        TemplateFetcher { http: HttpClient::new(timeout, 0).with_max_body(max_size), max_size }
    }

    /// The text at `url`.
    pub async fn fetch(&self, url: &str) -> Result<String, FetchError> {
        let (scheme, rest) = split_scheme(url);
        if scheme != "http" && scheme != "https" {
            return Err(FetchError::InvalidScheme(scheme));
        }
        tracing::info!(target: "keelson::stack_engine", url, "fetching a template");
        let failed = || FetchError::Failed(url.to_string());
        // The scheme as urlparse reads it (lower case), before the rest.
        let normalised = format!("{scheme}:{rest}");
        let answer = match self.http.send(Method::GET, &normalised, &[], None).await {
            Ok(answer) => answer,
            Err(OsError::AnswerTooLarge(_)) => return Err(FetchError::TooLarge(self.max_size)),
            Err(e) => {
                tracing::info!(target: "keelson::stack_engine", url, error = %e, "failed to retrieve template");
                return Err(failed());
            }
        };
        if !answer.status.is_success() {
            tracing::info!(target: "keelson::stack_engine", url, status = %answer.status, "failed to retrieve template");
            return Err(failed());
        }
        String::from_utf8(answer.body.to_vec()).map_err(|_| failed())
    }
}

/// Python's `urllib.parse.urlsplit` scheme rule (3.11): leading C0
/// controls and spaces stripped, tabs and newlines removed; the scheme is
/// what precedes the first `:` when it starts with an ASCII letter and
/// holds only letters, digits, `+`, `-` and `.`, lower-cased; otherwise
/// none. Returns the scheme and the rest after the `:`.
fn split_scheme(url: &str) -> (String, String) {
    let cleaned: String =
        url.trim_start_matches(|c: char| c <= ' ').chars().filter(|c| !matches!(c, '\t' | '\r' | '\n')).collect();
    if let Some((head, rest)) = cleaned.split_once(':') {
        let starts_alpha = head.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
        if starts_alpha && head.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) {
            return (head.to_ascii_lowercase(), rest.to_string());
        }
    }
    (String::new(), cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_as_urlparse_reads_them() {
        assert_eq!(split_scheme("HTTP://h/t.yaml"), ("http".into(), "//h/t.yaml".into()));
        assert_eq!(split_scheme("  ftp://h/t"), ("ftp".into(), "//h/t".into()));
        assert_eq!(split_scheme("the.yaml").0, "");
        assert_eq!(split_scheme("1x://h").0, "");
        assert_eq!(split_scheme("ht\ttp://h").0, "http");
    }

    #[tokio::test]
    async fn other_schemes_are_refused_before_any_request() {
        let fetcher = TemplateFetcher::default();
        let e = fetcher.fetch("ftp://example.invalid/t.yaml").await.unwrap_err();
        assert_eq!(e.to_string(), "Invalid URL scheme ftp");
        let e = fetcher.fetch("the.yaml").await.unwrap_err();
        assert_eq!(e.to_string(), "Invalid URL scheme ");
        assert_eq!(FetchError::TooLarge(524288).to_string(), "Template exceeds maximum allowed size (524288 bytes)");
    }
}
