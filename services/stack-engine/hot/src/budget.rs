//! The budget every resolution of a snippet runs under, so that no
//! template function can allocate without bound (a `repeat` crossing two
//! lists of 3,000 items asks for 9·10^6 results).
//!
//! Upstream Heat bounds only what a client sends (`max_template_size`,
//! `max_json_body_size`); the values a function builds from them are not
//! bounded there. keelson derives the bound from the same two options: the
//! values template functions hold at once while one value (a resource's
//! properties, an output, a policy) is resolved may reach at most
//! `max_json_body_size` bytes (their JSON size: nothing resolved can be
//! larger than a request could carry) and `max_template_size / 2` items
//! (list elements and map entries: as many as a template of that size can
//! write literally, two bytes per `0,`), and all they produce in total at
//! most [`TOTAL_FACTOR`] times `max_json_body_size` bytes (a bound on the
//! work, as intermediate values are dropped). Each function checks the
//! size of its result before building it.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::{TemplateError, TemplateErrorKind};

/// All values produced during one resolution, summed, may reach this many
/// times the bytes it may hold at once.
pub const TOTAL_FACTOR: usize = 16;

/// Heat's defaults of `max_json_body_size` and `max_template_size`.
const DEFAULT_MAX_JSON_BODY_SIZE: usize = 1_048_576;
const DEFAULT_MAX_TEMPLATE_SIZE: usize = 524_288;

/// The process's limits, set once by the engine from its configuration
/// ([`EvaluationLimits::install`]); 0 = not set (Heat's defaults).
static INSTALLED_BYTES: AtomicUsize = AtomicUsize::new(0);
static INSTALLED_ITEMS: AtomicUsize = AtomicUsize::new(0);

/// What one resolution may hold and produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvaluationLimits {
    /// The JSON size of the values held at once, in bytes.
    pub max_bytes: usize,
    /// List elements and map entries held at once.
    pub max_items: usize,
}

impl Default for EvaluationLimits {
    fn default() -> Self {
        Self::from_heat_limits(DEFAULT_MAX_JSON_BODY_SIZE, DEFAULT_MAX_TEMPLATE_SIZE)
    }
}

impl EvaluationLimits {
    /// The limits derived from Heat's `max_json_body_size` and
    /// `max_template_size` (see the module's documentation).
    pub fn from_heat_limits(max_json_body_size: usize, max_template_size: usize) -> Self {
        EvaluationLimits { max_bytes: max_json_body_size.max(1), max_items: (max_template_size / 2).max(1) }
    }

    /// Makes these the limits of every later resolution in this process
    /// whose context does not choose its own.
    pub fn install(self) {
        INSTALLED_BYTES.store(self.max_bytes, Ordering::Relaxed);
        INSTALLED_ITEMS.store(self.max_items, Ordering::Relaxed);
    }

    /// The installed limits, else Heat's defaults.
    pub fn installed() -> Self {
        let d = Self::default();
        let or_default = |v: usize, default: usize| if v == 0 { default } else { v };
        EvaluationLimits {
            max_bytes: or_default(INSTALLED_BYTES.load(Ordering::Relaxed), d.max_bytes),
            max_items: or_default(INSTALLED_ITEMS.load(Ordering::Relaxed), d.max_items),
        }
    }

    fn max_total_bytes(&self) -> usize {
        self.max_bytes.saturating_mul(TOTAL_FACTOR)
    }
}

/// The size of a value as the budget counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Size {
    pub bytes: usize,
    pub items: usize,
}

impl Size {
    pub fn new(bytes: usize, items: usize) -> Size {
        Size { bytes, items }
    }

    pub fn plus(self, other: Size) -> Size {
        Size { bytes: self.bytes.saturating_add(other.bytes), items: self.items.saturating_add(other.items) }
    }

    pub fn times(self, n: usize) -> Size {
        Size { bytes: self.bytes.saturating_mul(n), items: self.items.saturating_mul(n) }
    }

    /// `v`'s JSON size (numbers counted by their digits, escapes not) and
    /// its items, at every depth.
    pub fn of(v: &Value) -> Size {
        match v {
            Value::Null => Size::new(4, 0),
            Value::Bool(b) => Size::new(if *b { 4 } else { 5 }, 0),
            Value::Number(n) => Size::new(number_len(n), 0),
            Value::String(s) => Size::of_str(s),
            Value::Array(items) => {
                items.iter().fold(Size::new(2, items.len()), |acc, item| acc.plus(Size::of(item)).plus(Size::new(1, 0)))
            }
            Value::Object(m) => m.iter().fold(Size::new(2, m.len()), |acc, (k, item)| {
                acc.plus(Size::of_str(k)).plus(Size::of(item)).plus(Size::new(2, 0))
            }),
        }
    }

    pub fn of_str(s: &str) -> Size {
        Size::new(s.len().saturating_add(2), 0)
    }
}

fn number_len(n: &serde_json::Number) -> usize {
    let digits = |mut v: u64| {
        let mut len = 1;
        while v >= 10 {
            v /= 10;
            len += 1;
        }
        len
    };
    match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => digits(u),
        (None, Some(i)) => digits(i.unsigned_abs()) + 1,
        // A float: at most 24 characters as serde_json writes it.
        (None, None) => 24,
    }
}

/// What one resolution has used so far.
pub(crate) struct Budget {
    limits: EvaluationLimits,
    held: Cell<Size>,
    total_bytes: Cell<usize>,
}

/// The budget's state before a function ran ([`Budget::mark`]).
#[derive(Clone, Copy)]
pub(crate) struct Mark(Size);

impl Budget {
    pub fn new(limits: EvaluationLimits) -> Budget {
        Budget { limits, held: Cell::new(Size::default()), total_bytes: Cell::new(0) }
    }

    pub fn mark(&self) -> Mark {
        Mark(self.held.get())
    }

    /// Function `name` is about to build `size` more: refused when the
    /// values held would then exceed a limit.
    pub fn reserve(&self, name: &str, size: Size) -> Result<(), TemplateError> {
        let held = self.held.get().plus(size);
        self.check(name, held)?;
        self.held.set(held);
        Ok(())
    }

    /// Function `name` produced `value` and dropped its arguments and any
    /// scratch it reserved since `mark`: the values held are those of
    /// `mark` and `value`.
    pub fn settle(&self, name: &str, mark: Mark, value: &Value) -> Result<(), TemplateError> {
        let size = Size::of(value);
        let held = mark.0.plus(size);
        self.check(name, held)?;
        let total = self.total_bytes.get().saturating_add(size.bytes);
        if total > self.limits.max_total_bytes() {
            return Err(limit_exceeded(name, total, self.limits.max_total_bytes(), "bytes in total"));
        }
        self.total_bytes.set(total);
        self.held.set(held);
        Ok(())
    }

    fn check(&self, name: &str, held: Size) -> Result<(), TemplateError> {
        if held.items > self.limits.max_items {
            return Err(limit_exceeded(name, held.items, self.limits.max_items, "items"));
        }
        if held.bytes > self.limits.max_bytes {
            return Err(limit_exceeded(name, held.bytes, self.limits.max_bytes, "bytes"));
        }
        Ok(())
    }
}

/// Heat's RequestLimitExceeded, naming the function.
fn limit_exceeded(name: &str, reached: usize, limit: usize, unit: &str) -> TemplateError {
    TemplateError::new(
        TemplateErrorKind::RequestLimitExceeded,
        format!(
            "Request limit exceeded: {name}: the values produced would reach {reached} {unit}, which exceeds the limit of {limit} {unit} per evaluation"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_are_json_sizes_and_items_at_every_depth() {
        assert_eq!(Size::of(&json!("abc")), Size::new(5, 0));
        assert_eq!(Size::of(&json!([1, 22, -3])), Size::new(2 + 2 + 3 + 3, 3));
        assert_eq!(Size::of(&json!({"k": [null]})), Size::new(2 + 3 + 2 + (2 + 4 + 1), 2));
        assert_eq!(Size::of(&json!(1.5)), Size::new(24, 0));
    }

    #[test]
    fn limits_derive_from_heat_options() {
        let l = EvaluationLimits::from_heat_limits(1_048_576, 524_288);
        assert_eq!((l.max_bytes, l.max_items), (1_048_576, 262_144));
        assert_eq!(EvaluationLimits::default(), l);
    }

    #[test]
    fn held_values_are_released_when_a_function_settles() {
        let b = Budget::new(EvaluationLimits { max_bytes: 100, max_items: 10 });
        let m = b.mark();
        b.reserve("f", Size::new(90, 9)).unwrap();
        let e = b.reserve("f", Size::new(11, 0)).unwrap_err();
        assert_eq!(e.type_name(), "RequestLimitExceeded");
        assert_eq!(
            e.message,
            "Request limit exceeded: f: the values produced would reach 101 bytes, which exceeds the limit of 100 bytes per evaluation"
        );
        b.settle("f", m, &json!("x")).unwrap();
        b.reserve("g", Size::new(90, 10)).unwrap();
        let e = b.reserve("g", Size::new(0, 1)).unwrap_err();
        assert!(e.message.contains("11 items, which exceeds the limit of 10 items"), "{}", e.message);
    }

    #[test]
    fn total_production_is_bounded_too() {
        let b = Budget::new(EvaluationLimits { max_bytes: 10, max_items: 10 });
        let m = b.mark();
        for _ in 0..TOTAL_FACTOR * 10 / 5 {
            b.settle("f", m, &json!("abc")).unwrap();
        }
        let e = b.settle("f", m, &json!("abc")).unwrap_err();
        assert!(e.message.ends_with("exceeds the limit of 160 bytes in total per evaluation"), "{}", e.message);
    }
}
