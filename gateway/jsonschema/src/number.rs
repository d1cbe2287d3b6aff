//! Python numeric semantics for JSON numbers.
//!
//! Python compares `int` and `float` exactly (no rounding of the int to a
//! float), treats `1 == 1.0`, and jsonschema's draft 2020-12 type checker
//! calls `1.0` an integer. These helpers give serde_json numbers the same
//! behaviour so `minimum`, `enum`, `uniqueItems` and `type` agree with
//! Placement.

use std::cmp::Ordering;

use serde_json::{Number, Value};

/// A JSON number as Python sees it after `json.loads`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum PyNum {
    Int(i128),
    Float(f64),
}

impl PyNum {
    pub(crate) fn from_number(n: &Number) -> PyNum {
        if let Some(u) = n.as_u64() {
            PyNum::Int(i128::from(u))
        } else if let Some(i) = n.as_i64() {
            PyNum::Int(i128::from(i))
        } else {
            PyNum::Float(n.as_f64().unwrap_or(f64::NAN))
        }
    }

    pub(crate) fn from_value(v: &Value) -> Option<PyNum> {
        match v {
            Value::Number(n) => Some(PyNum::from_number(n)),
            _ => None,
        }
    }

    /// `int(x) == x` for floats; always true for ints.
    pub(crate) fn is_integral(self) -> bool {
        match self {
            PyNum::Int(_) => true,
            PyNum::Float(f) => f.is_finite() && f.fract() == 0.0,
        }
    }

    pub(crate) fn as_f64(self) -> f64 {
        match self {
            PyNum::Int(i) => i as f64,
            PyNum::Float(f) => f,
        }
    }

    /// Exact comparison, as Python does between any two numbers. `None` only
    /// when a NaN is involved (JSON cannot produce one).
    pub(crate) fn py_cmp(self, other: PyNum) -> Option<Ordering> {
        match (self, other) {
            (PyNum::Int(a), PyNum::Int(b)) => Some(a.cmp(&b)),
            (PyNum::Float(a), PyNum::Float(b)) => a.partial_cmp(&b),
            (PyNum::Int(a), PyNum::Float(b)) => cmp_int_float(a, b),
            (PyNum::Float(a), PyNum::Int(b)) => cmp_int_float(b, a).map(Ordering::reverse),
        }
    }

    pub(crate) fn py_eq(self, other: PyNum) -> bool {
        self.py_cmp(other) == Some(Ordering::Equal)
    }

    /// Python's `x % y` is non-zero (jsonschema's integer `multipleOf` test).
    pub(crate) fn has_remainder(self, divisor: PyNum) -> bool {
        match (self, divisor) {
            (PyNum::Int(a), PyNum::Int(b)) => b != 0 && a % b != 0,
            (a, b) => {
                let (a, b) = (a.as_f64(), b.as_f64());
                let r = a % b;
                r != 0.0
            }
        }
    }
}

/// Compare an integer with a float without rounding the integer.
fn cmp_int_float(i: i128, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    // 2^127 bounds the i128 range; floats beyond it dominate every i128.
    const LIMIT: f64 = 1.7014118346046923e38;
    if f >= LIMIT {
        return Some(Ordering::Less);
    }
    if f < -LIMIT {
        return Some(Ordering::Greater);
    }
    let whole = f.trunc();
    // Exact: `whole` has no fraction and lies within ±2^127 (checked above).
    #[allow(clippy::cast_possible_truncation)]
    let whole_int = whole as i128;
    match i.cmp(&whole_int) {
        Ordering::Equal => {
            let frac = f - whole;
            Some(if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            })
        }
        other => Some(other),
    }
}

/// A hashable canonical form of a JSON value under jsonschema's `equal`:
/// `1 == 1.0`, booleans never equal numbers, object key order ignored.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Canonical {
    Null,
    Bool(bool),
    Int(i128),
    Float(u64),
    Str(String),
    Array(Vec<Canonical>),
    Object(Vec<(String, Canonical)>),
}

impl Canonical {
    pub(crate) fn of(value: &Value) -> Canonical {
        match value {
            Value::Null => Canonical::Null,
            Value::Bool(b) => Canonical::Bool(*b),
            Value::Number(n) => match PyNum::from_number(n) {
                PyNum::Int(i) => Canonical::Int(i),
                PyNum::Float(f) => {
                    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1.7014118346046923e38 {
                        // Exact: a whole number within ±2^127.
                        #[allow(clippy::cast_possible_truncation)]
                        let whole = f as i128;
                        Canonical::Int(whole)
                    } else {
                        Canonical::Float(f.to_bits())
                    }
                }
            },
            Value::String(s) => Canonical::Str(s.clone()),
            Value::Array(items) => Canonical::Array(items.iter().map(Canonical::of).collect()),
            Value::Object(map) => {
                let mut entries: Vec<(String, Canonical)> =
                    map.iter().map(|(k, v)| (k.clone(), Canonical::of(v))).collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                Canonical::Object(entries)
            }
        }
    }
}

/// jsonschema's `equal(one, two)` (used by `enum` and `const`).
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => PyNum::from_number(x).py_eq(PyNum::from_number(y)),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// jsonschema's `uniq`: no two elements are `equal`.
pub(crate) fn all_unique(items: &[Value]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    items.iter().all(|item| seen.insert(Canonical::of(item)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exact_int_float_comparison() {
        let big = PyNum::Int(9_007_199_254_740_993);
        let f = PyNum::Float(9_007_199_254_740_992.0);
        assert_eq!(big.py_cmp(f), Some(Ordering::Greater));
        assert!(PyNum::Int(1).py_eq(PyNum::Float(1.0)));
        assert_eq!(PyNum::Int(0).py_cmp(PyNum::Float(0.5)), Some(Ordering::Less));
        assert_eq!(PyNum::Int(-1).py_cmp(PyNum::Float(-0.5)), Some(Ordering::Less));
        assert_eq!(PyNum::Float(3.40282e39).py_cmp(PyNum::Float(3.40282e38)), Some(Ordering::Greater));
        assert_eq!(PyNum::Int(2_147_483_648).py_cmp(PyNum::Int(2_147_483_647)), Some(Ordering::Greater));
    }

    #[test]
    fn equality_follows_jsonschema() {
        assert!(json_equal(&json!(1), &json!(1.0)));
        assert!(!json_equal(&json!(true), &json!(1)));
        assert!(json_equal(&json!({"a": [1, 2]}), &json!({"a": [1.0, 2]})));
        assert!(!all_unique(&[json!(1), json!(1.0)]));
        assert!(all_unique(&[json!(1), json!(true), json!("1")]));
        assert!(!all_unique(&[json!({"a": 1, "b": 2}), json!({"b": 2, "a": 1})]));
    }
}
