//! Heat Orchestration Templates (HOT): the template language of OpenStack
//! Heat, independent of any engine or transport.
//!
//! Modules: `document` (YAML/JSON text), `environment`, `versions` (version
//! and function tables), `snippet` (parsed values), `functions` (the
//! intrinsic functions), `conditions`, `parameters` (schema, constraints,
//! values), `template` (HOT sections, resources, outputs, references) and
//! `cfn` (the CFN template format), `budget` (what one resolution may
//! produce). Values inside upstream texts are formatted as Python would by
//! keelson-pyfmt.
//!
//! Typical use: `parse_document` the texts, `Environment::from_value` +
//! `merge`, `Template::parse`, `validate_parameters`, then `resources` /
//! `outputs` (conditions applied) and `check_references`; the engine
//! resolves each `Snippet` with its own `ResolveContext`.

mod budget;
mod cfn;
mod conditions;
mod document;
mod environment;
mod error;
mod functions;
mod parameters;
mod snippet;
mod template;
mod versions;

pub use budget::EvaluationLimits;
pub use document::parse_document;
pub use environment::{is_template_reference, Environment, RegistryTarget, Resolution};
pub use error::{TemplateError, TemplateErrorKind};
pub use parameters::{Constraint, ConstraintKind, ParamSchema, ParamType, ParamValues, PseudoParams};
pub use snippet::{ResolveContext, Snippet};
pub use template::{OutputDefn, ResourceDefn, Template};
pub use versions::{template_functions, template_versions, HotVersion};
