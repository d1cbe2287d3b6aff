//! keelson-pyfmt against what CPython printed for the same inputs
//! (tests/data/cases.json, written by tests/gen_cases.py).

use serde_json::Value;

fn cases() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cases.json");
    match std::fs::read_to_string(path).map(|text| serde_json::from_str(&text)) {
        Ok(Ok(cases)) => cases,
        other => panic!("{path}: {other:?}"),
    }
}

fn list<'a>(cases: &'a Value, key: &str) -> &'a [Value] {
    match cases[key].as_array() {
        Some(items) if !items.is_empty() => items,
        _ => panic!("{key}: no cases"),
    }
}

#[test]
fn repr_of_strings() {
    let cases = cases();
    for case in list(&cases, "repr_str") {
        let (input, want) = (case[0].as_str().unwrap(), case[1].as_str().unwrap());
        assert_eq!(keelson_pyfmt::repr_str(input), want, "repr({input:?})");
    }
}

#[test]
fn repr_str_dumps_truthiness_of_values() {
    let cases = cases();
    for case in list(&cases, "values") {
        let text = case["json"].as_str().unwrap();
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(keelson_pyfmt::repr(&value), case["repr"], "repr of {text}");
        assert_eq!(keelson_pyfmt::str_of(&value), case["str"], "str of {text}");
        assert_eq!(keelson_pyfmt::truthy(&value), case["truthy"], "bool of {text}");
        assert_eq!(keelson_pyfmt::json_dumps(&value, false), case["dumps"], "json.dumps of {text}");
        assert_eq!(keelson_pyfmt::json_dumps(&value, true), case["dumps_sorted"], "sorted json.dumps of {text}");
    }
}

#[test]
fn floats() {
    let cases = cases();
    for case in list(&cases, "floats") {
        let f = f64::from_bits(case[0].as_u64().unwrap());
        assert_eq!(keelson_pyfmt::float_repr(f), case[1], "repr({f:?})");
        assert_eq!(keelson_pyfmt::json_float(f), case[2], "json.dumps({f:?})");
    }
    for case in list(&cases, "int_or_float") {
        let f = f64::from_bits(case[0].as_u64().unwrap());
        assert_eq!(keelson_pyfmt::int_or_float_repr(f), case[1], "{f:?}");
    }
}

#[test]
fn loads_errors() {
    let cases = cases();
    for case in list(&cases, "loads_errors") {
        let text = case[0].as_str().unwrap();
        let err = serde_json::from_str::<Value>(text).unwrap_err();
        assert_eq!(keelson_pyfmt::json_loads_error(text, &err), case[1], "json.loads({text:?})");
    }
}

#[test]
fn printable_table_matches_isprintable() {
    let cases = cases();
    for case in list(&cases, "printable_probe") {
        let c = char::from_u32(u32::try_from(case[0].as_u64().unwrap()).unwrap()).unwrap();
        assert_eq!(keelson_pyfmt::is_printable(c), case[1], "isprintable(U+{:04X})", u32::from(c));
    }
}
