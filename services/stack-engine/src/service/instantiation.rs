//! The body of `POST /stacks`, `PUT|PATCH /stacks/{n}/{id}`, the previews
//! and `POST /validate`, read with heat-api's `InstantiationData` rules and
//! the engine's `extract_args` (texts from `heat/api/openstack/v1/stacks.py`,
//! `heat/engine/api.py`). A `template_url` is fetched first
//! ([`Orchestration::read_instantiation`]), with the registry's one
//! [`crate::template_fetch::TemplateFetcher`].

use serde_json::{Map, Value};

use super::params::{bad_request, extract_bool, extract_int, python_str, tags_from_body};
use super::{Orchestration, ServiceSettings};
use crate::error::EngineError;

/// The keys that are not "args" (`InstantiationData.PARAMS`).
const DATA_KEYS: &[&str] = &[
    "stack_name",
    "template",
    "template_url",
    "parameters",
    "environment",
    "files",
    "environment_files",
    "files_container",
];

/// A create/update/validate request, parsed and checked.
#[derive(Debug, Clone, Default)]
pub struct Instantiation {
    pub stack_name: Option<String>,
    /// None only for PATCH without a template (reuse the current one).
    pub template: Option<Value>,
    /// The request's environment document (sections as given), without
    /// the body's `parameters`.
    pub environment: Map<String, Value>,
    /// The body's `parameters` (merged over the environment's).
    pub parameters: Map<String, Value>,
    pub files: Map<String, Value>,
    pub environment_files: Vec<String>,
    /// None when absent, null or 0 (the engine's "no new timeout").
    pub timeout_mins: Option<i64>,
    pub disable_rollback: Option<bool>,
    pub tags: Option<Option<Vec<String>>>,
    pub converge: Option<bool>,
    pub clear_parameters: Vec<String>,
    pub adopt_stack_data: Option<Value>,
}

/// What kind of request the body belongs to (which keys are allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Create,
    Update { patch: bool },
    Validate,
}

impl Orchestration {
    /// The request `body`, its `template_url` fetched when it names one
    /// instead of a template (heat-api's `InstantiationData.template`).
    pub(super) async fn read_instantiation(
        &self,
        body: &Value,
        purpose: Purpose,
    ) -> Result<Instantiation, EngineError> {
        let fetched = match template_url(body) {
            Some(url) => Some(
                self.registry
                    .template_fetcher()
                    .fetch(&url)
                    .await
                    .map_err(|e| bad_request(format!("Could not retrieve template: {e}")))?,
            ),
            None => None,
        };
        Instantiation::parse(body, purpose, &self.settings, fetched.as_deref())
    }
}

/// The `template_url` of a body that gives neither adopt data nor a
/// `template` (which win over it, even a null one, as in heat-api).
fn template_url(body: &Value) -> Option<String> {
    let data = body.as_object()?;
    if data.contains_key("adopt_stack_data") || data.contains_key("template") {
        return None;
    }
    data.get("template_url").map(|url| match url {
        Value::String(s) => s.clone(),
        other => python_str(other),
    })
}

impl Instantiation {
    /// `fetched`: the text at the body's `template_url`, already fetched.
    pub fn parse(
        body: &Value,
        purpose: Purpose,
        settings: &ServiceSettings,
        fetched: Option<&str>,
    ) -> Result<Self, EngineError> {
        let Some(data) = body.as_object() else {
            return Err(bad_request("The request body must be a JSON object"));
        };
        let mut out = Instantiation {
            stack_name: match data.get("stack_name") {
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => Some(python_str(other)),
                None => None,
            },
            ..Default::default()
        };
        if purpose == Purpose::Create && out.stack_name.is_none() {
            return Err(bad_request("No stack name specified"));
        }
        out.template = read_template(data, purpose, settings, fetched)?;
        if let Some(adopt) = data.get("adopt_stack_data").map(parse_adopt_data).transpose()? {
            out.adopt_stack_data = Some(Value::Object(adopt));
        }
        out.files = match data.get("files") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(files)) => files.clone(),
            Some(_) => return Err(bad_request("files must be a map of file names to contents")),
        };
        out.environment_files = match data.get("environment_files") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(names)) => names.iter().map(python_str).collect(),
            Some(Value::String(name)) => vec![name.clone()],
            Some(_) => return Err(bad_request("environment_files must be a list of file names")),
        };
        // heat-api ignores the body's environment when environment files
        // are given (the client merged it into them).
        if out.environment_files.is_empty() {
            if let Some(env) = data.get("environment") {
                out.environment = read_environment(env)?;
            }
        }
        out.parameters = match data.get("parameters") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return Err(bad_request("parameters must be a map")),
        };
        if data.contains_key("files_container") {
            return Err(EngineError::not_supported("files_container (Swift) is not supported."));
        }
        out.read_args(data, purpose)?;
        Ok(out)
    }

    fn read_args(&mut self, data: &Map<String, Value>, purpose: Purpose) -> Result<(), EngineError> {
        let args: Map<String, Value> = data
            .iter()
            .filter(|(k, _)| !DATA_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(v) = args.get("timeout_mins").filter(|v| !v.is_null()) {
            let n = extract_int("timeout_mins", v)?;
            self.timeout_mins = (n > 0).then_some(n);
        }
        if let Some(v) = args.get("tags").filter(|v| !v.is_null()) {
            self.tags = Some(tags_from_body(v)?);
        }
        if let Some(v) = args.get("converge") {
            if !matches!(purpose, Purpose::Update { .. }) {
                return Err(bad_request("converge flag only supported in stack update (or update preview) request."));
            }
            self.converge = Some(extract_bool("converge", v)?);
        }
        if let Some(v) = args.get("disable_rollback") {
            self.disable_rollback = Some(extract_bool("disable_rollback", v)?);
        }
        if let Some(v) = args.get("clear_parameters") {
            self.clear_parameters = match v {
                Value::Array(items) => items.iter().map(python_str).collect(),
                Value::String(s) => vec![s.clone()],
                Value::Null => Vec::new(),
                other => vec![python_str(other)],
            };
        }
        Ok(())
    }
}

fn read_template(
    data: &Map<String, Value>,
    purpose: Purpose,
    settings: &ServiceSettings,
    fetched: Option<&str>,
) -> Result<Option<Value>, EngineError> {
    if let Some(adopt) = data.get("adopt_stack_data") {
        if purpose == Purpose::Create && !settings.enable_stack_adopt {
            return Err(EngineError::not_supported("Stack Adopt is not supported."));
        }
        let parsed = parse_adopt_data(adopt)?;
        return match parsed.get("template") {
            Some(t) => {
                check_template_size(t, settings)?;
                Ok(Some(t.clone()))
            }
            None => Err(bad_request("Invalid adopt data: 'template'")),
        };
    }
    let text = match data.get("template") {
        Some(Value::Object(_)) => {
            let t = data.get("template").cloned().unwrap_or(Value::Null);
            check_template_size(&t, settings)?;
            return Ok(Some(t));
        }
        Some(Value::String(text)) => Some(text.clone()),
        Some(Value::Null) => None,
        None => fetched.map(str::to_string),
        Some(other) => Some(other.to_string()),
    };
    let text = match text {
        Some(text) => text,
        None if matches!(purpose, Purpose::Update { patch: true }) => return Ok(None),
        None => return Err(bad_request("No template specified")),
    };
    if text.len() > settings.max_template_size {
        return Err(template_too_large(text.len(), settings));
    }
    match keelson_hot::parse_document(&text) {
        Ok(doc) => Ok(Some(doc)),
        Err(e) => Err(bad_request(format!("Template not in valid format: {}", e.message))),
    }
}

fn check_template_size(template: &Value, settings: &ServiceSettings) -> Result<(), EngineError> {
    // Upstream measures `str(dict)`; the JSON text is a close stand-in.
    let len = template.to_string().len();
    if len > settings.max_template_size {
        return Err(template_too_large(len, settings));
    }
    Ok(())
}

fn template_too_large(len: usize, settings: &ServiceSettings) -> EngineError {
    EngineError::RequestLimitExceeded(format!(
        "Request limit exceeded: Template size ({len} bytes) exceeds maximum allowed size ({} bytes).",
        settings.max_template_size
    ))
}

fn parse_adopt_data(value: &Value) -> Result<Map<String, Value>, EngineError> {
    let parsed = match value {
        Value::String(text) => {
            serde_json::from_str::<Value>(text).map_err(|e| bad_request(format!("Invalid adopt data: {e}")))?
        }
        other => other.clone(),
    };
    match parsed {
        Value::Object(map) => Ok(map),
        _ => Err(bad_request("Invalid adopt data: not a map")),
    }
}

/// The request's environment: an object or YAML/JSON text; only Heat's
/// environment sections are accepted (checked again by `keelson_hot`).
fn read_environment(env: &Value) -> Result<Map<String, Value>, EngineError> {
    let doc = match env {
        Value::Null => return Ok(Map::new()),
        Value::Object(map) => Value::Object(map.clone()),
        Value::String(text) if text.trim().is_empty() => return Ok(Map::new()),
        Value::String(text) => keelson_hot::parse_document(text)
            .map_err(|e| bad_request(format!("Environment not in valid format: {}", e.message)))?,
        other => return Err(bad_request(format!("Environment not in valid format: {}", python_str(other)))),
    };
    match doc {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        _ => {
            Err(bad_request("Environment not in valid format: The environment is not a valid YAML mapping data type."))
        }
    }
}

/// Validates a new stack's name (`stack.py:_validate_stack_name`).
pub fn validate_stack_name(name: &str) -> Result<(), EngineError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first_ok && rest_ok && name.chars().count() <= 255 {
        Ok(())
    } else {
        Err(EngineError::validation(format!(
            "Invalid stack name {name} must contain only alphanumeric or \"_-.\" characters, must start with alpha and must be 255 characters or less."
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings() -> ServiceSettings {
        ServiceSettings::default()
    }

    #[test]
    fn create_needs_name_and_template() {
        let e = Instantiation::parse(&json!({"template": {}}), Purpose::Create, &settings(), None).unwrap_err();
        assert_eq!((e.heat_type(), e.message().as_str()), ("HTTPBadRequest", "No stack name specified"));
        let e = Instantiation::parse(&json!({"stack_name": "s"}), Purpose::Create, &settings(), None).unwrap_err();
        assert_eq!(e.message(), "No template specified");
        let ok =
            Instantiation::parse(&json!({"stack_name": "s", "template": {"a": 1}}), Purpose::Create, &settings(), None)
                .unwrap();
        assert_eq!(ok.template, Some(json!({"a": 1})));
    }

    #[test]
    fn patch_may_omit_the_template() {
        let p = Instantiation::parse(
            &json!({"parameters": {"v": "x"}}),
            Purpose::Update { patch: true },
            &settings(),
            None,
        )
        .unwrap();
        assert!(p.template.is_none());
        assert_eq!(p.parameters.get("v"), Some(&json!("x")));
    }

    #[test]
    fn args_are_checked() {
        let body = json!({"stack_name": "s", "template": {}, "timeout_mins": "x"});
        assert_eq!(
            Instantiation::parse(&body, Purpose::Create, &settings(), None).unwrap_err().message(),
            "Only integer is acceptable by 'timeout_mins'."
        );
        let body = json!({"stack_name": "s", "template": {}, "converge": true});
        assert!(Instantiation::parse(&body, Purpose::Create, &settings(), None).is_err());
        let body = json!({"stack_name": "s", "template": {}, "tags": "a,b", "disable_rollback": false});
        let p = Instantiation::parse(&body, Purpose::Create, &settings(), None).unwrap();
        assert_eq!(p.tags, Some(Some(vec!["a".to_string(), "b".to_string()])));
        assert_eq!(p.disable_rollback, Some(false));
    }

    #[test]
    fn adopt_is_gated() {
        let body = json!({"stack_name": "s", "adopt_stack_data": "{\"template\": {}}"});
        let e = Instantiation::parse(&body, Purpose::Create, &settings(), None).unwrap_err();
        assert_eq!((e.heat_type(), e.message().as_str()), ("NotSupported", "Stack Adopt is not supported."));
    }

    #[test]
    fn stack_names_follow_heat_rule() {
        assert!(validate_stack_name("a-b_c.d1").is_ok());
        let e = validate_stack_name("1abc").unwrap_err();
        assert_eq!(e.heat_type(), "StackValidationFailed");
        assert!(e.message().starts_with("Invalid stack name 1abc must contain only alphanumeric"));
        assert!(validate_stack_name(&"a".repeat(256)).is_err());
    }

    #[test]
    fn template_size_is_limited() {
        let mut s = settings();
        s.max_template_size = 10;
        let body = json!({"stack_name": "s", "template": {"description": "a long description"}});
        let e = Instantiation::parse(&body, Purpose::Create, &s, None).unwrap_err();
        assert_eq!(e.heat_type(), "RequestLimitExceeded");
    }
}
