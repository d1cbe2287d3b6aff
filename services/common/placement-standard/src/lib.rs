//! The standard resource classes (os-resource-classes) and traits
//! (os-traits) that every Placement database holds.
//!
//! A leaf crate of its own, below keelson-db: the schema seeds them into the
//! database, and the gateway, which links no SQL driver, answers a standard
//! class from them once the database has shown it.

use serde::Deserialize;

/// Standard classes keep their position in os-resource-classes as id;
/// custom classes are numbered from here.
pub const MIN_CUSTOM_RESOURCE_CLASS_ID: i64 = 10000;

#[derive(Deserialize)]
struct ClassesFile {
    resource_classes: Vec<StandardClass>,
}

#[derive(Deserialize)]
struct StandardClass {
    id: i64,
    name: String,
}

#[derive(Deserialize)]
struct TraitsFile {
    traits: Vec<String>,
}

/// The standard resource classes as (id, name).
pub fn standard_resource_classes() -> &'static [(i64, String)] {
    static CLASSES: std::sync::OnceLock<Vec<(i64, String)>> = std::sync::OnceLock::new();
    CLASSES.get_or_init(|| {
        serde_json::from_str::<ClassesFile>(include_str!("../data/standard-resource-classes.json"))
            .map(|f| f.resource_classes.into_iter().map(|c| (c.id, c.name)).collect())
            .unwrap_or_default()
    })
}

/// The id of the standard class named exactly `name`.
pub fn standard_resource_class_id(name: &str) -> Option<i64> {
    standard_resource_classes().iter().find(|(_, n)| n == name).map(|(id, _)| *id)
}

/// The standard trait names.
pub fn standard_traits() -> &'static [String] {
    static TRAITS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    TRAITS.get_or_init(|| {
        serde_json::from_str::<TraitsFile>(include_str!("../data/standard-traits.json"))
            .map(|f| f.traits)
            .unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_files_parse() {
        assert_eq!(standard_resource_classes().len(), 21);
        assert_eq!(standard_resource_classes()[0], (0, "VCPU".to_string()));
        assert_eq!(standard_traits().len(), 377);
    }

    #[test]
    fn standard_names_match_exactly() {
        assert_eq!(standard_resource_class_id("VCPU"), Some(0));
        assert_eq!(standard_resource_class_id("MEMORY_MB"), Some(1));
        assert_eq!(standard_resource_class_id("vcpu"), None);
        assert_eq!(standard_resource_class_id("VCPU "), None);
        assert_eq!(standard_resource_class_id("CUSTOM_VCPU"), None);
    }
}
