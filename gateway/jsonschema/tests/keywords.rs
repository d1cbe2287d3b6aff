//! One test per keyword and message variant, with the exact text Python
//! jsonschema 4.26 produces (each expectation was checked against it).

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keelson_jsonschema::{placement, CompileError, PathElement, Validator};
use serde_json::{json, Value};

/// The message of the error `jsonschema.validate` would raise.
fn message(schema: Value, instance: Value) -> String {
    let validator = Validator::new(&schema).expect("schema compiles");
    match validator.validate(&instance) {
        Err(e) => e.message().to_owned(),
        Ok(()) => panic!("{instance} unexpectedly valid under {schema}"),
    }
}

/// The full `str(exc)`.
fn text(schema: Value, instance: Value) -> String {
    let validator = Validator::new(&schema).expect("schema compiles");
    match validator.validate(&instance) {
        Err(e) => e.to_string(),
        Ok(()) => panic!("{instance} unexpectedly valid under {schema}"),
    }
}

fn valid(schema: Value, instance: Value) -> bool {
    Validator::new(&schema).expect("schema compiles").is_valid(&instance)
}

#[test]
fn type_single() {
    assert_eq!(message(json!({"type": "integer"}), json!("abc")), "'abc' is not of type 'integer'");
}

#[test]
fn type_list_joins_names() {
    assert_eq!(message(json!({"type": ["integer", "null"]}), json!("x")), "'x' is not of type 'integer', 'null'");
    assert_eq!(message(json!({"type": ["string"]}), json!(null)), "None is not of type 'string'");
}

#[test]
fn type_integer_accepts_integral_float_but_not_bool() {
    assert!(valid(json!({"type": "integer"}), json!(1.0)));
    assert_eq!(message(json!({"type": "integer"}), json!(1.5)), "1.5 is not of type 'integer'");
    assert_eq!(message(json!({"type": "integer"}), json!(true)), "True is not of type 'integer'");
    assert_eq!(message(json!({"type": "number"}), json!(false)), "False is not of type 'number'");
}

#[test]
fn enum_lists_choices_as_python_list() {
    assert_eq!(
        message(json!({"enum": ["none", "isolate"]}), json!("bogus")),
        "'bogus' is not one of ['none', 'isolate']"
    );
    assert_eq!(message(json!({"enum": [1, 2.5, null, true]}), json!(3)), "3 is not one of [1, 2.5, None, True]");
    assert!(valid(json!({"enum": [1]}), json!(1.0)));
    assert_eq!(message(json!({"enum": [1]}), json!(true)), "True is not one of [1]");
}

#[test]
fn const_reports_expected_value() {
    assert_eq!(message(json!({"const": {"a": [1, 2]}}), json!({"a": [1, 3]})), "{'a': [1, 2]} was expected");
}

#[test]
fn required_property() {
    assert_eq!(message(json!({"required": ["name"]}), json!({})), "'name' is a required property");
    // Several missing: the first in schema order is reported.
    assert_eq!(message(json!({"required": ["b", "a", "c"]}), json!({"a": 1})), "'b' is a required property");
    assert!(valid(json!({"required": ["a"]}), json!("not an object")));
}

#[test]
fn additional_properties_singular() {
    assert_eq!(
        message(json!({"properties": {"a": {}}, "additionalProperties": false}), json!({"a": 1, "foo": 2})),
        "Additional properties are not allowed ('foo' was unexpected)"
    );
}

#[test]
fn additional_properties_plural_sorted() {
    assert_eq!(
        message(
            json!({"properties": {"a": {}}, "additionalProperties": false}),
            json!({"zeta": 1, "a": 1, "beta": 2, "Alpha": 3})
        ),
        "Additional properties are not allowed ('Alpha', 'beta', 'zeta' were unexpected)"
    );
}

#[test]
fn additional_properties_next_to_pattern_properties() {
    assert_eq!(
        message(json!({"patternProperties": {"^b": {}, "^a": {}}, "additionalProperties": false}), json!({"c": 1})),
        "'c' does not match any of the regexes: '^a', '^b'"
    );
    assert_eq!(
        message(
            json!({"patternProperties": {"^x$": {}}, "additionalProperties": false}),
            json!({"d": 1, "c": 2, "x": 3})
        ),
        "'c', 'd' do not match any of the regexes: '^x$'"
    );
}

#[test]
fn additional_properties_schema_descends() {
    let schema = json!({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}});
    assert_eq!(message(schema, json!({"a": "x", "b": "y"})), "'y' is not of type 'integer'");
}

#[test]
fn pattern_properties_and_python_dollar() {
    let schema = json!({"patternProperties": {"^[A-Z]+$": {"type": "integer"}}, "additionalProperties": false});
    // Python's `$` matches before a trailing newline, so 'VCPU\n' is covered.
    assert_eq!(
        message(schema, json!({"VCPU\n": 1, "vcpu": 2})),
        "'vcpu' does not match any of the regexes: '^[A-Z]+$'"
    );
}

#[test]
fn min_properties_variants() {
    assert_eq!(message(json!({"minProperties": 1}), json!({})), "{} should be non-empty");
    assert_eq!(message(json!({"minProperties": 2}), json!({"a": 1})), "{'a': 1} does not have enough properties");
}

#[test]
fn max_properties_variants() {
    assert_eq!(message(json!({"maxProperties": 0}), json!({"a": 1})), "{'a': 1} is expected to be empty");
    assert_eq!(
        message(json!({"maxProperties": 1}), json!({"a": 1, "b": 2})),
        "{'a': 1, 'b': 2} has too many properties"
    );
}

#[test]
fn property_names() {
    assert_eq!(message(json!({"propertyNames": {"maxLength": 2}}), json!({"ab": 1, "abc": 2})), "'abc' is too long");
}

#[test]
fn dependent_required_and_schemas() {
    assert_eq!(
        message(json!({"dependentRequired": {"a": ["b", "c"]}}), json!({"a": 1, "c": 1})),
        "'b' is a dependency of 'a'"
    );
    assert_eq!(
        message(json!({"dependentSchemas": {"a": {"required": ["z"]}}}), json!({"a": 1})),
        "'z' is a required property"
    );
}

#[test]
fn items_schema_and_false() {
    assert_eq!(message(json!({"items": {"type": "string"}}), json!(["a", 1, "b", 2])), "2 is not of type 'string'");
    assert_eq!(
        message(json!({"prefixItems": [{}], "items": false}), json!([1, 2])),
        "Expected at most 1 item but found 1 extra: 2"
    );
    assert_eq!(
        message(json!({"prefixItems": [{}, {}], "items": false}), json!([1, 2, 3, 4])),
        "Expected at most 2 items but found 2 extra: [3, 4]"
    );
}

#[test]
fn items_array_form_is_positional() {
    let validator = Validator::new(&json!({"items": [{"type": "string"}, {"type": "integer"}]})).expect("compiles");
    let err = validator.validate(&json!(["a", "b", 3])).expect_err("invalid");
    assert_eq!(err.message(), "'b' is not of type 'integer'");
    assert_eq!(err.path(), &[PathElement::Index(1)]);
    assert!(validator.is_valid(&json!(["a", 1, "anything"])));
}

#[test]
fn contains_variants() {
    assert_eq!(
        message(json!({"contains": {"type": "string"}}), json!([1, 2])),
        "[1, 2] does not contain items matching the given schema"
    );
    assert_eq!(
        message(json!({"contains": {"type": "string"}, "minContains": 2}), json!(["a", 1])),
        "Too few items match the given schema (expected at least 2 but only 1 matched)"
    );
    assert_eq!(
        message(json!({"contains": {"type": "string"}, "maxContains": 1}), json!(["a", "b"])),
        "Too many items match the given schema (expected at most 1)"
    );
}

#[test]
fn min_items_variants() {
    assert_eq!(message(json!({"minItems": 1}), json!([])), "[] should be non-empty");
    assert_eq!(message(json!({"minItems": 3}), json!([1, 2])), "[1, 2] is too short");
}

#[test]
fn max_items_variants() {
    assert_eq!(message(json!({"maxItems": 0}), json!([1])), "[1] is expected to be empty");
    assert_eq!(message(json!({"maxItems": 1}), json!([1, 2])), "[1, 2] is too long");
}

#[test]
fn unique_items() {
    assert_eq!(
        message(json!({"uniqueItems": true}), json!(["a", "b", "a"])),
        "['a', 'b', 'a'] has non-unique elements"
    );
    assert_eq!(message(json!({"uniqueItems": true}), json!([1, 1.0])), "[1, 1.0] has non-unique elements");
    assert!(valid(json!({"uniqueItems": true}), json!([1, true, [1], [true]])));
    assert!(!valid(json!({"uniqueItems": true}), json!([{"a": 1, "b": 2}, {"b": 2, "a": 1}])));
}

#[test]
fn pattern_is_a_search() {
    assert_eq!(
        message(json!({"pattern": "^[A-Z0-9_]+$"}), json!("instance")),
        "'instance' does not match '^[A-Z0-9_]+$'"
    );
    assert!(valid(json!({"pattern": "b"}), json!("abc")));
    assert!(valid(json!({"pattern": "^[A-Z]+$"}), json!("ABC\n")));
    assert!(valid(json!({"pattern": "^a$"}), json!(5)));
}

#[test]
fn min_length_variants() {
    assert_eq!(message(json!({"minLength": 1}), json!("")), "'' should be non-empty");
    assert_eq!(message(json!({"minLength": 3}), json!("ab")), "'ab' is too short");
    assert_eq!(message(json!({"minLength": 3}), json!("é中")), "'é中' is too short");
}

#[test]
fn max_length_variants() {
    assert_eq!(message(json!({"maxLength": 0}), json!("a")), "'a' is expected to be empty");
    assert_eq!(message(json!({"maxLength": 2}), json!("abc")), "'abc' is too long");
    assert!(valid(json!({"maxLength": 2}), json!("é中")));
}

#[test]
fn format_uuid_like_placement() {
    assert_eq!(message(json!({"format": "uuid"}), json!("harry")), "'harry' is not a 'uuid'");
    assert_eq!(message(json!({"format": "uuid"}), json!(5)), "5 is not a 'uuid'");
    for ok in [
        "f918801a-5e54-4bee-9095-09a9d0c786b8",
        "f918801a5e544bee909509a9d0c786b8",
        "{f918801a-5e54-4bee-9095-09a9d0c786b8}",
        "urn:uuid:f918801a-5e54-4bee-9095-09a9d0c786b8",
        "F918801A-5E54-4BEE-9095-09A9D0C786B8",
    ] {
        assert!(valid(json!({"format": "uuid"}), json!(ok)), "{ok}");
    }
    assert!(valid(json!({"format": "no-such-format"}), json!("anything")));
}

#[test]
fn minimum_and_maximum() {
    assert_eq!(message(json!({"minimum": 1}), json!(0)), "0 is less than the minimum of 1");
    assert_eq!(message(json!({"minimum": 1.5}), json!(1)), "1 is less than the minimum of 1.5");
    assert_eq!(
        message(json!({"maximum": 2147483647}), json!(2147483648u64)),
        "2147483648 is greater than the maximum of 2147483647"
    );
    assert_eq!(
        message(json!({"maximum": 3.40282e38}), json!(3.40282e39)),
        "3.40282e+39 is greater than the maximum of 3.40282e+38"
    );
    assert_eq!(message(json!({"maximum": 1e-05}), json!(1.5e-05)), "1.5e-05 is greater than the maximum of 1e-05");
}

#[test]
fn exclusive_bounds_numeric_and_draft4_boolean() {
    assert_eq!(message(json!({"exclusiveMinimum": 1}), json!(1)), "1 is less than or equal to the minimum of 1");
    assert_eq!(message(json!({"exclusiveMaximum": 1}), json!(1.0)), "1.0 is greater than or equal to the maximum of 1");
    // Draft 4 spelling: a boolean modifier on minimum/maximum, reported as them.
    let validator = Validator::new(&json!({"minimum": 1, "exclusiveMinimum": true})).expect("compiles");
    let err = validator.validate(&json!(1)).expect_err("invalid");
    assert_eq!(err.message(), "1 is less than or equal to the minimum of 1");
    assert_eq!(err.keyword(), Some("minimum"));
    assert_eq!(
        message(json!({"maximum": 5, "exclusiveMaximum": true}), json!(5)),
        "5 is greater than or equal to the maximum of 5"
    );
    assert!(valid(json!({"minimum": 1, "exclusiveMinimum": false}), json!(1)));
}

#[test]
fn multiple_of() {
    assert_eq!(message(json!({"multipleOf": 2}), json!(7)), "7 is not a multiple of 2");
    assert_eq!(message(json!({"multipleOf": 0.5}), json!(1.25)), "1.25 is not a multiple of 0.5");
    assert!(valid(json!({"multipleOf": 0.5}), json!(1.5)));
    assert_eq!(message(json!({"multipleOf": 2}), json!(3.0)), "3.0 is not a multiple of 2");
}

#[test]
fn all_of() {
    assert_eq!(message(json!({"allOf": [{"type": "string"}, {"minLength": 5}]}), json!("abc")), "'abc' is too short");
}

#[test]
fn any_of_descends_to_the_subschema_of_the_right_type() {
    let schema = json!({"anyOf": [{"type": "string", "format": "uuid"}, {"type": "null"}]});
    assert_eq!(
        text(schema, json!("abc")),
        "'abc' is not a 'uuid'\n\nFailed validating 'format' in schema[0]:\n    {'type': 'string', 'format': 'uuid'}\n\nOn instance:\n    'abc'"
    );
}

#[test]
fn any_of_reports_itself_when_sub_errors_tie() {
    assert_eq!(
        message(json!({"anyOf": [{"type": "string"}, {"type": "null"}]}), json!(5)),
        "5 is not valid under any of the given schemas"
    );
}

#[test]
fn one_of_variants() {
    assert_eq!(
        message(json!({"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 3}]}), json!(1)),
        "1 is less than the minimum of 3"
    );
    assert_eq!(
        message(json!({"oneOf": [{"type": "integer"}, {"minimum": 0}, {"maximum": 9}]}), json!(5)),
        "5 is valid under each of {'minimum': 0}, {'maximum': 9}, {'type': 'integer'}"
    );
}

#[test]
fn not_quotes_the_schema() {
    assert_eq!(
        message(json!({"not": {"type": "string"}}), json!("x")),
        "'x' should not be valid under {'type': 'string'}"
    );
    assert_eq!(
        message(json!({"not": {"enum": [true, null, 1.0]}}), json!(null)),
        "None should not be valid under {'enum': [True, None, 1.0]}"
    );
}

#[test]
fn if_then_else() {
    assert_eq!(message(json!({"if": {"type": "string"}, "then": {"minLength": 3}}), json!("ab")), "'ab' is too short");
    let schema = json!({"if": {"type": "string"}, "then": {"minLength": 3}, "else": {"minimum": 3}});
    let err = Validator::new(&schema).expect("compiles").validate(&json!(1)).expect_err("invalid");
    assert_eq!(err.message(), "1 is less than the minimum of 3");
    assert_eq!(err.schema_path(), &[PathElement::from("else"), PathElement::from("minimum")]);
}

#[test]
fn refs_to_definitions() {
    let schema = json!({
        "definitions": {"pos": {"type": "integer", "minimum": 1}},
        "properties": {"a": {"$ref": "#/definitions/pos"}}
    });
    assert_eq!(
        text(schema, json!({"a": 0})),
        "0 is less than the minimum of 1\n\nFailed validating 'minimum' in schema['properties']['a']:\n    {'type': 'integer', 'minimum': 1}\n\nOn instance['a']:\n    0"
    );
    let recursive = json!({"type": "object", "properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}}});
    assert_eq!(message(recursive, json!({"next": {"next": {"v": "x"}}})), "'x' is not of type 'integer'");
}

#[test]
fn false_and_true_schemas() {
    assert_eq!(
        text(json!({"properties": {"a": false}}), json!({"a": 1})),
        "False schema does not allow 1\n\nFailed validating None in schema:\n    False\n\nOn instance:\n    1"
    );
    assert!(valid(json!(true), json!({"anything": [1]})));
    assert_eq!(message(json!(false), json!(null)), "False schema does not allow None");
}

#[test]
fn unknown_keywords_and_schema_uri_are_ignored() {
    assert_eq!(
        message(json!({"$schema": "http://json-schema.org/draft-04/schema#", "foo": 1, "type": "string"}), json!(1)),
        "1 is not of type 'string'"
    );
}

#[test]
fn best_match_prefers_shallow_errors() {
    let schema = json!({"properties": {"a": {"properties": {"b": {"type": "string"}}}}, "required": ["z"]});
    assert_eq!(message(schema, json!({"a": {"b": 1}})), "'z' is a required property");
}

#[test]
fn best_match_prefers_the_greater_sibling_path() {
    let schema = json!({"properties": {"a": {"type": "string"}, "b": {"type": "string"}}});
    assert_eq!(message(schema, json!({"a": 1, "b": 2})), "2 is not of type 'string'");
}

#[test]
fn best_match_keeps_the_first_of_equals() {
    assert_eq!(message(json!({"type": "string", "format": "uuid"}), json!(7)), "7 is not of type 'string'");
    assert_eq!(message(json!({"minLength": 5, "pattern": "^x"}), json!("abc")), "'abc' is too short");
}

#[test]
fn iter_errors_lists_every_top_level_error_in_order() {
    let validator = Validator::new(&json!({"type": "string", "minLength": 5, "pattern": "^x"})).expect("compiles");
    let messages: Vec<String> = validator.iter_errors(&json!("abc")).iter().map(|e| e.message().to_owned()).collect();
    assert_eq!(messages, ["'abc' is too short", "'abc' does not match '^x'"]);
}

#[test]
fn verbose_text_pretty_prints_schema_and_instance() {
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 200}, "uuid": {"type": "string", "format": "uuid"}},
        "required": ["name"],
        "additionalProperties": false
    });
    assert_eq!(
        text(schema, json!({"uuid": "f918801a-5e54-4bee-9095-09a9d0c786b8"})),
        "'name' is a required property\n\nFailed validating 'required' in schema:\n    {'type': 'object',\n     \
'properties': {'name': {'type': 'string', 'maxLength': 200},\n                    \
'uuid': {'type': 'string', 'format': 'uuid'}},\n     'required': ['name'],\n     \
'additionalProperties': False}\n\nOn instance:\n    {'uuid': 'f918801a-5e54-4bee-9095-09a9d0c786b8'}"
    );
}

#[test]
fn repr_of_awkward_strings() {
    assert_eq!(message(json!({"type": "integer"}), json!("it's")), "\"it's\" is not of type 'integer'");
    assert_eq!(
        message(json!({"type": "integer"}), json!("a\\b\n\t\r\u{7}\u{7f}\u{a0}\u{200b} é 中 😀")),
        "'a\\\\b\\n\\t\\r\\x07\\x7f\\xa0\\u200b é 中 😀' is not of type 'integer'"
    );
}

#[test]
fn paths_and_json_path() {
    let schema = placement::placement_schema("allocation.ALLOCATION_SCHEMA").expect("known schema");
    let instance = json!({"allocations": [{"resource_provider": {"uuid": "f918801a-5e54-4bee-9095-09a9d0c786b8"}, "resources": {"DISK_GB": 0}}]});
    let err = schema.validate(&instance).expect_err("invalid");
    assert_eq!(err.json_path(), "$.allocations[0].resources.DISK_GB");
    assert_eq!(err.instance(), &json!(0));
    assert_eq!(err.schema(), &json!({"type": "integer", "minimum": 1}));
    let steps: Vec<String> = err.schema_path().iter().map(ToString::to_string).collect();
    assert_eq!(
        steps,
        [
            "properties",
            "allocations",
            "items",
            "properties",
            "resources",
            "patternProperties",
            "^[A-Z0-9_]+$",
            "minimum"
        ]
    );
}

#[test]
fn placement_wraps_messages_like_util_py() {
    let rc = placement::placement_schema("resource_class.POST_RC_SCHEMA_V1_2").expect("known schema");
    let err = rc.validate(&json!({"name": "FOO"})).expect_err("invalid");
    assert!(placement::body_error_text(&err).starts_with("JSON does not validate: 'FOO' does not match '^CUSTOM_[A-Z0-9_]+$'\n\nFailed validating 'pattern' in schema['properties']['name']:"));
    let usages = placement::placement_schema("usage.GET_USAGES_SCHEMA_1_9").expect("known schema");
    let query = placement::query_instance([("project_id", "")]);
    let err = usages.validate(&query).expect_err("invalid");
    assert!(placement::query_error_text(&err).starts_with("Invalid query string parameters: '' should be non-empty"));
}

#[test]
fn compile_errors_are_typed_and_readable() {
    let err = Validator::new(&json!({"properties": {"a": {"minLength": "x"}}})).expect_err("bad schema");
    assert!(matches!(err, CompileError::InvalidKeyword { .. }));
    assert_eq!(
        err.to_string(),
        "invalid value for 'minLength' at #/properties/a/minLength: expected a non-negative integer"
    );
    let err = Validator::new(&json!({"$ref": "#/definitions/nope"})).expect_err("bad schema");
    assert_eq!(err.to_string(), "unresolvable $ref \"#/definitions/nope\" at #/$ref");
}
