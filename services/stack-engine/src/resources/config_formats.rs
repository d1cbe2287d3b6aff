//! The documents OS::Heat::CloudConfig and OS::Heat::MultipartMime store:
//! a `#cloud-config` YAML text, and a MIME multipart message laid out as
//! Python's `email` package writes one (cloud-init reads either).

use base64::Engine as _;
use serde_json::Value;

/// `data` as cloud-init's `#cloud-config` document: block-style YAML with
/// mapping keys sorted, as PyYAML dumps them.
pub fn cloud_config_text(data: &Value) -> Result<String, String> {
    Ok(format!("#cloud-config\n{}", keelson_yaml::to_block_string(&sorted(data))))
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// One entry of a MultipartMime's `parts`, its content already resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MimePart {
    pub content: String,
    /// The content is itself a multipart message whose parts are appended.
    pub multipart: bool,
    pub subtype: String,
    pub filename: String,
}

/// A text part of the message being built.
struct TextPart {
    body: String,
    subtype: String,
    filename: String,
}

/// The parts as one `multipart/mixed` message.
pub fn multipart_message(parts: &[MimePart]) -> String {
    let mut texts = Vec::new();
    for part in parts {
        if part.multipart {
            texts.extend(split_multipart(&part.content));
        } else {
            texts.push(TextPart {
                body: part.content.clone(),
                subtype: part.subtype.clone(),
                filename: part.filename.clone(),
            });
        }
    }
    // Python's boundary: 15 '=', a 19-digit random number, '=='.
    let boundary = format!("{}{:019}==", "=".repeat(15), rand::random::<u64>() % 10_000_000_000_000_000_000);
    let mut out = format!("Content-Type: multipart/mixed; boundary=\"{boundary}\"\nMIME-Version: 1.0\n\n");
    for t in &texts {
        out.push_str(&format!("--{boundary}\n{}", text_part(t)));
    }
    out.push_str(&format!("--{boundary}--\n"));
    out
}

/// A `text/<subtype>` part. Without a subtype, a filename's stem is used
/// (upstream's choice), else `plain`; non-ASCII text goes as base64 UTF-8.
fn text_part(t: &TextPart) -> String {
    let stem = t.filename.rsplit_once('.').filter(|(s, _)| !s.is_empty()).map_or(t.filename.as_str(), |(s, _)| s);
    let subtype = if !t.subtype.is_empty() {
        t.subtype.as_str()
    } else if !stem.is_empty() {
        stem
    } else {
        "plain"
    };
    let (charset, encoding, body) = if t.body.is_ascii() {
        ("us-ascii", "7bit", t.body.clone())
    } else {
        let encoded = base64::engine::general_purpose::STANDARD.encode(t.body.as_bytes());
        let lines: Vec<&str> = encoded.as_bytes().chunks(76).filter_map(|c| std::str::from_utf8(c).ok()).collect();
        ("utf-8", "base64", lines.join("\n") + "\n")
    };
    let mut head = format!("Content-Type: text/{subtype}; charset=\"{charset}\"\nMIME-Version: 1.0\nContent-Transfer-Encoding: {encoding}\n");
    if !t.filename.is_empty() {
        head.push_str(&format!("Content-Disposition: attachment; filename=\"{}\"\n", t.filename));
    }
    // The newline ending a part belongs to the next delimiter.
    format!("{head}\n{body}\n")
}

/// The parts of a multipart message (none when `message` is not one),
/// each with its undecoded body, its subtype and its filename.
fn split_multipart(message: &str) -> Vec<TextPart> {
    let message = message.replace("\r\n", "\n");
    let (headers, body) = split_headers(&message);
    let content_type = header(&headers, "content-type").unwrap_or_default();
    if !content_type.trim_start().to_ascii_lowercase().starts_with("multipart/") {
        return Vec::new();
    }
    let Some(boundary) = parameter(&content_type, "boundary") else { return Vec::new() };
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    // Text before the first delimiter is the preamble; after `--` the epilogue.
    for chunk in body.split(&delimiter).skip(1) {
        if chunk.starts_with("--") {
            break;
        }
        let chunk = chunk.strip_prefix('\n').unwrap_or(chunk);
        // The newline before a delimiter belongs to the delimiter.
        let chunk = chunk.strip_suffix('\n').unwrap_or(chunk);
        let (part_headers, part_body) = split_headers(chunk);
        let part_type = header(&part_headers, "content-type").unwrap_or_else(|| "text/plain".into());
        let subtype = part_type
            .split(';')
            .next()
            .and_then(|t| t.split_once('/'))
            .map(|(_, s)| s.trim().to_ascii_lowercase())
            .unwrap_or_else(|| "plain".into());
        let filename =
            header(&part_headers, "content-disposition").and_then(|d| parameter(&d, "filename")).unwrap_or_default();
        parts.push(TextPart { body: part_body.to_string(), subtype, filename });
    }
    parts
}

/// Header lines (continuations unfolded) and the body after the blank line.
fn split_headers(text: &str) -> (Vec<(String, String)>, &str) {
    let (head, body) = match text.find("\n\n") {
        Some(i) => (&text[..i], &text[i + 2..]),
        None => (text, ""),
    };
    let mut headers: Vec<(String, String)> = Vec::new();
    for line in head.lines() {
        if line.starts_with([' ', '\t']) {
            if let Some((_, v)) = headers.last_mut() {
                v.push(' ');
                v.push_str(line.trim());
            }
        } else if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    (headers, body)
}

fn header(headers: &[(String, String)], name: &str) -> Option<String> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

/// A `; name=value` parameter of a header, unquoted.
fn parameter(value: &str, name: &str) -> Option<String> {
    value.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().trim_matches('"').to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cloud_config_is_sorted_block_yaml_after_the_marker() {
        let text = cloud_config_text(&json!({"write_files": [{"path": "/a", "content": "x"}], "package_update": true}))
            .unwrap();
        assert_eq!(text, "#cloud-config\npackage_update: true\nwrite_files:\n- content: x\n  path: /a\n");
    }

    fn boundary_of(message: &str) -> String {
        parameter(message.lines().next().unwrap(), "boundary").unwrap()
    }

    #[test]
    fn text_parts_take_subtype_filename_and_charset() {
        let message = multipart_message(&[
            MimePart {
                content: "#!/bin/sh\necho hi".into(),
                subtype: "x-shellscript".into(),
                filename: "run.sh".into(),
                ..Default::default()
            },
            MimePart { content: "#cloud-config\n".into(), filename: "cloud.cfg".into(), ..Default::default() },
            MimePart { content: "é".into(), ..Default::default() },
        ]);
        let b = boundary_of(&message);
        assert_eq!(b.len(), 15 + 19 + 2);
        assert_eq!(
            message,
            format!(
                "Content-Type: multipart/mixed; boundary=\"{b}\"\nMIME-Version: 1.0\n\n\
                 --{b}\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\nMIME-Version: 1.0\nContent-Transfer-Encoding: 7bit\nContent-Disposition: attachment; filename=\"run.sh\"\n\n#!/bin/sh\necho hi\n\
                 --{b}\nContent-Type: text/cloud; charset=\"us-ascii\"\nMIME-Version: 1.0\nContent-Transfer-Encoding: 7bit\nContent-Disposition: attachment; filename=\"cloud.cfg\"\n\n#cloud-config\n\n\
                 --{b}\nContent-Type: text/plain; charset=\"utf-8\"\nMIME-Version: 1.0\nContent-Transfer-Encoding: base64\n\nw6k=\n\n\
                 --{b}--\n"
            )
        );
    }

    #[test]
    fn a_multipart_part_contributes_its_own_parts() {
        let inner = multipart_message(&[
            MimePart {
                content: "one".into(),
                subtype: "x-shellscript".into(),
                filename: "a.sh".into(),
                ..Default::default()
            },
            MimePart { content: "two".into(), ..Default::default() },
        ]);
        let parts = split_multipart(&inner);
        let summary: Vec<(&str, &str, &str)> =
            parts.iter().map(|p| (p.body.as_str(), p.subtype.as_str(), p.filename.as_str())).collect();
        assert_eq!(summary, vec![("one", "x-shellscript", "a.sh"), ("two", "plain", "")]);
        let outer = multipart_message(&[MimePart { content: inner, multipart: true, ..Default::default() }]);
        assert_eq!(split_multipart(&outer).len(), 2);
        // Plain text given as multipart adds nothing, as upstream.
        assert!(split_multipart("just text").is_empty());
    }
}
