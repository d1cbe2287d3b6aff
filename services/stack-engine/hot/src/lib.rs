//! Heat Orchestration Templates (HOT): the template language of OpenStack
//! Heat, independent of any engine or transport.
//!
//! Modules: `document` (YAML/JSON text), `environment`, `versions` (version
//! and function tables), `snippet` (parsed values + intrinsic functions),
//! `parameters` (schema, constraints, values), `template` (sections,
//! resources, outputs, conditions, references).

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

pub use document::parse_document;
pub use environment::{Environment, RegistryTarget};
pub use error::TemplateError;
pub use parameters::{ParamSchema, ParamType, ParamValues, PseudoParams};
pub use snippet::{ResolveContext, Snippet};
pub use template::{OutputDefn, ResourceDefn, Template};
pub use versions::{template_functions, template_versions, HotVersion};
