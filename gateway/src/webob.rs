//! webob's error pages, which Placement's WSGI stack answers with when the
//! client's `Accept` prefers HTML or plain text over JSON: the format
//! chosen from `Accept`, and our JSON error body rewritten as that page.
//! Used by the Placement API and by the auth layer's 401 in front of it.

/// How an error body is written, chosen from `Accept` as webob does
/// (requestlog first turns a missing or `*/*` header into JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorFormat {
    Json,
    Html,
    Plain,
}

/// webob's `acceptable_offers(['text/html', 'application/json'])[0]`.
pub fn error_format(accept: Option<&str>) -> ErrorFormat {
    let accept = accept.map(str::trim).unwrap_or("");
    if accept.is_empty() || accept == "*/*" {
        return ErrorFormat::Json;
    }
    // Each range: (type, subtype, q).
    let mut ranges: Vec<(String, String, f32)> = Vec::new();
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let Some((ty, sub)) = media.split_once('/') else { continue };
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").map(str::to_string))
            .next()
            .and_then(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        ranges.push((ty.trim().to_string(), sub.trim().to_string(), q));
    }
    // The q of the most specific range matching an offer.
    let q_for = |ty: &str, sub: &str| -> f32 {
        let mut best: Option<(u8, f32)> = None;
        for (rt, rs, q) in &ranges {
            let specificity = if rt == ty && rs == sub {
                3
            } else if rt == ty && rs == "*" {
                2
            } else if rt == "*" && rs == "*" {
                1
            } else {
                continue;
            };
            if best.is_none_or(|(s, _)| specificity > s) {
                best = Some((specificity, *q));
            }
        }
        best.map(|(_, q)| q).unwrap_or(0.0)
    };
    let html = q_for("text", "html");
    let json = q_for("application", "json");
    if html > 0.0 && html >= json {
        ErrorFormat::Html
    } else if json > 0.0 {
        ErrorFormat::Json
    } else {
        ErrorFormat::Plain
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#x27;")
}

/// Rewrites one of our JSON error bodies as webob's HTML or plain text
/// page: (content type, body). `None` when the body is not an error body.
pub fn reformat(body: &[u8], format: ErrorFormat, accept: &str) -> Option<(&'static str, String)> {
    let doc: serde_json::Value = serde_json::from_slice(body).ok()?;
    let err = doc.get("errors")?.get(0)?;
    let status = err.get("status")?.as_u64()?;
    let title = err.get("title").and_then(|t| t.as_str()).unwrap_or("");
    let detail = err.get("detail").and_then(|d| d.as_str()).unwrap_or("");
    let status_line = format!("{status} {title}");
    // Our JSON names the type JSON where upstream's page names the
    // client's Accept (the version check runs before Accept is looked at).
    let detail = detail.replace("content of type application/json", &format!("content of type {accept}"));
    match format {
        ErrorFormat::Json => None,
        ErrorFormat::Plain => Some(("text/plain; charset=UTF-8", format!("{status_line}\n\n{detail}"))),
        ErrorFormat::Html => {
            // The JSON detail is "explanation\n\n message  "; webob's HTML
            // page puts a <br /> pair between the two.
            let (head, message) = detail.split_once("\n\n").unwrap_or((detail.as_str(), ""));
            let message = html_escape(message.trim_start_matches(' ').trim_end_matches(' '));
            let mut head = html_escape(head).replace("browser (content", "browser\n(content");
            let body = match status {
                // webob's own templates for these three.
                405 | 406 | 415 => {
                    if status == 415 {
                        head = format!("{}\n", head.trim_end());
                    }
                    format!("{head}<br /><br />\n{message}")
                }
                // The trailing lines are webob's (empty) comment slot.
                _ => format!("{head}<br /><br />\n{message}\n\n"),
            };
            let page = format!(
                "<html>\n <head>\n  <title>{status_line}</title>\n </head>\n <body>\n  <h1>{status_line}</h1>\n  {body}\n </body>\n</html>"
            );
            Some(("text/html; charset=UTF-8", page))
        }
    }
}

#[cfg(test)]
mod format_tests {
    use super::*;

    #[test]
    fn accept_picks_the_error_format() {
        assert_eq!(error_format(None), ErrorFormat::Json);
        assert_eq!(error_format(Some("*/*")), ErrorFormat::Json);
        assert_eq!(error_format(Some("application/json")), ErrorFormat::Json);
        assert_eq!(error_format(Some("text/html")), ErrorFormat::Html);
        assert_eq!(error_format(Some("application/json, text/html")), ErrorFormat::Html);
        assert_eq!(error_format(Some("text/html;q=0.5, application/json")), ErrorFormat::Json);
        assert_eq!(error_format(Some("text/plain")), ErrorFormat::Plain);
        assert_eq!(error_format(Some("text/*")), ErrorFormat::Html);
    }

    #[test]
    fn html_page() {
        let body = br#"{"errors":[{"status":404,"title":"Not Found","detail":"The resource could not be found.\n\n nope  "}]}"#;
        let (ct, page) = reformat(body, ErrorFormat::Html, "text/html").unwrap();
        assert!(ct.starts_with("text/html"));
        assert!(page.contains("<h1>404 Not Found</h1>"));
        assert!(page.contains("The resource could not be found.<br /><br />\nnope\n"));
    }
}
