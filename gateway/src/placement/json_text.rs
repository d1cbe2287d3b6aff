//! JSON text written straight as bytes, for answers large enough that
//! building a `serde_json::Value` tree first (an allocation per string,
//! object and array) costs more than the rest of the request. The bytes are
//! those `serde_json::to_string` writes for the same values: compact, the
//! same escapes.

/// JSON text being written. Everything written is either ASCII
/// punctuation, digits or whole escaped strings, so it stays UTF-8 without a
/// check per piece (checking each integer's digits was a tenth of a large
/// allocation candidates rendering), and a response body takes the bytes as
/// they are.
pub struct JsonText(Vec<u8>);

impl JsonText {
    pub fn with_capacity(bytes: usize) -> Self {
        JsonText(Vec::with_capacity(bytes))
    }

    /// Appends one byte of punctuation.
    pub fn byte(&mut self, b: u8) {
        self.0.push(b);
    }

    /// Appends text that is already JSON (punctuation, keys, or a string
    /// [`quoted`] before).
    pub fn raw(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }

    /// Appends `s` as a JSON string.
    pub fn string(&mut self, s: &str) {
        self.0.push(b'"');
        self.escaped(s);
        self.0.push(b'"');
    }

    /// Appends `s` escaped for a JSON string, without quotes: a string
    /// written in pieces escapes the same as written whole.
    pub fn escaped(&mut self, s: &str) {
        let bytes = s.as_bytes();
        // Names and uuids almost never need escaping: one pass without
        // branches (the compiler vectorizes it), then one copy.
        if !bytes.iter().fold(false, |any, &b| any | (b < 0x20) | (b == b'"') | (b == b'\\')) {
            self.0.extend_from_slice(bytes);
            return;
        }
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let escape: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x08 => b"\\b",
                0x0c => b"\\f",
                0..=0x1f => b"",
                _ => continue,
            };
            self.0.extend_from_slice(&bytes[start..i]);
            if escape.is_empty() {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                self.0.extend_from_slice(b"\\u00");
                self.0.push(HEX[usize::from(b >> 4)]);
                self.0.push(HEX[usize::from(b & 0xf)]);
            } else {
                self.0.extend_from_slice(escape);
            }
            start = i + 1;
        }
        self.0.extend_from_slice(&bytes[start..]);
    }

    /// Appends an integer without `write!`'s formatting machinery, which is
    /// several times slower for the ~100,000 integers of a large answer.
    pub fn int(&mut self, n: i64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = n.unsigned_abs();
        loop {
            at -= 1;
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        if n < 0 {
            self.0.push(b'-');
        }
        self.0.extend_from_slice(&digits[at..]);
    }

    /// Where the text ends now: what is written from here on can be
    /// [`JsonText::repeat`]ed.
    pub fn mark(&self) -> usize {
        self.0.len()
    }

    /// Appends again the text written from mark `from` to mark `to`.
    pub fn repeat(&mut self, from: usize, to: usize) {
        self.0.extend_from_within(from..to);
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

/// `s` as a JSON string (quotes included), to be written many times with
/// [`JsonText::raw`].
pub fn quoted(s: &str) -> String {
    let mut out = JsonText::with_capacity(s.len() + 2);
    out.string(s);
    // Only whole UTF-8 characters and ASCII escapes were written.
    String::from_utf8(out.0).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        for n in [0, 7, -7, 10, 1_048_576, i64::MAX, i64::MIN] {
            let mut out = JsonText::with_capacity(0);
            out.int(n);
            assert_eq!(out.into_bytes(), n.to_string().into_bytes());
        }
    }

    #[test]
    fn strings_as_serde_json_writes_them() {
        let all_controls: String = (0u8..0x20).map(char::from).collect();
        for s in ["", "plain", "a\"b\\c\n", "\u{7f}é/✓ \u{1F600}", all_controls.as_str(), "\\\"\\"] {
            let mut out = JsonText::with_capacity(0);
            out.string(s);
            assert_eq!(out.into_bytes(), serde_json::Value::from(s).to_string().into_bytes(), "{s:?}");
            assert_eq!(quoted(s), serde_json::Value::from(s).to_string());
        }
    }
}
