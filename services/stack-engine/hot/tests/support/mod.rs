//! A ResolveContext with fixed parameters, resources and files.
#![allow(dead_code)]
// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keelson_hot::{EvaluationLimits, HotVersion, ResolveContext, Snippet, TemplateError};
use serde_json::{json, Value};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct Ctx {
    pub params: BTreeMap<String, Value>,
    pub files: BTreeMap<String, String>,
    /// The budget of each resolution (default: the process's).
    pub limits: Option<EvaluationLimits>,
}

impl Ctx {
    pub fn with_params(v: Value) -> Ctx {
        let mut c = Ctx::default();
        if let Value::Object(m) = v {
            c.params = m.into_iter().collect();
        }
        c
    }
}

impl ResolveContext for Ctx {
    fn param(&self, name: &str) -> Option<Value> {
        self.params.get(name).cloned()
    }
    fn get_resource(&self, name: &str) -> Result<Value, TemplateError> {
        Ok(json!(format!("{name}-id")))
    }
    fn get_attr(&self, resource: &str, attribute: &str, path: &[Value]) -> Result<Value, TemplateError> {
        let mut v = json!({"resource": resource, "attr": attribute, "list": ["x", "y"], "map": {"k": "v"}});
        if attribute == "list" || attribute == "map" {
            v = v[attribute].clone();
        } else {
            v = json!(format!("{resource}.{attribute}"));
        }
        for p in path {
            v = match p {
                Value::Number(n) => v[usize::try_from(n.as_u64().unwrap()).unwrap()].clone(),
                Value::String(s) => v[s.as_str()].clone(),
                _ => Value::Null,
            };
        }
        Ok(v)
    }
    fn get_attr_all(&self, resource: &str) -> Result<Value, TemplateError> {
        Ok(json!({"name": resource}))
    }
    fn get_file(&self, name: &str) -> Option<String> {
        self.files.get(name).cloned()
    }
    fn evaluation_limits(&self) -> EvaluationLimits {
        self.limits.unwrap_or_else(EvaluationLimits::installed)
    }
}

pub fn parse(version: &str, v: Value) -> Result<Snippet, TemplateError> {
    Snippet::parse(&v, HotVersion::lookup(version).expect("version"), false, "")
}

/// Parse with `version` and resolve against `ctx`.
pub fn eval(version: &str, v: Value, ctx: &Ctx) -> Result<Value, TemplateError> {
    parse(version, v)?.resolve(ctx)
}

pub fn eval_ok(version: &str, v: Value) -> Value {
    eval(version, v, &Ctx::default()).expect("resolves")
}

pub fn eval_err(version: &str, v: Value) -> String {
    match eval(version, v, &Ctx::default()) {
        Ok(x) => panic!("expected an error, got {x}"),
        Err(e) => e.message,
    }
}
