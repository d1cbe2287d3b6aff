//! Every template function runs under the resolution's budget: over the
//! limit it is refused (RequestLimitExceeded naming the function) before
//! it builds its result; at the limit it answers as usual.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
use keelson_hot::EvaluationLimits;
use serde_json::{json, Value};
use support::{eval, Ctx};

const W: &str = "2021-04-16";

fn within(max_bytes: usize, max_items: usize) -> Ctx {
    Ctx { limits: Some(EvaluationLimits { max_bytes, max_items }), ..Ctx::default() }
}

fn refused(ctx: &Ctx, template: Value) -> String {
    match eval(W, template, ctx) {
        Ok(v) => panic!("expected a refusal, got {} bytes", v.to_string().len()),
        Err(e) => {
            assert_eq!(e.type_name(), "RequestLimitExceeded", "{}", e.message);
            e.message
        }
    }
}

/// The smallest byte limit (items unbounded) that `template` resolves
/// within: one byte less is refused, naming `function`. Answers the limit
/// and the value.
fn byte_threshold(function: &str, template: Value) -> (usize, Value) {
    let (limit, value) = byte_threshold_loose(function, template);
    // The budget does not overcount a result wildly.
    let json_len = value.to_string().len();
    assert!(limit <= 2 * json_len + 64, "{function}: threshold {limit} for {json_len} bytes");
    (limit, value)
}

/// As [`byte_threshold`], for a function whose scratch may be larger
/// than its result (the copy list_concat_unique deduplicates).
fn byte_threshold_loose(function: &str, template: Value) -> (usize, Value) {
    let ok = |limit: usize| eval(W, template.clone(), &within(limit, usize::MAX / 4));
    let (mut lo, mut hi) = (1usize, 1usize << 30);
    assert!(ok(hi).is_ok(), "{:?}", ok(hi));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ok(mid).is_ok() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let message = refused(&within(lo - 1, usize::MAX / 4), template.clone());
    assert!(message.starts_with(&format!("Request limit exceeded: {function}: ")), "{message}");
    let value = ok(lo).expect("resolves at the threshold");
    // The budget bounds the result (its JSON size).
    let json_len = value.to_string().len();
    assert!(lo >= json_len, "{function}: threshold {lo} for {json_len} bytes");
    (lo, value)
}

#[test]
fn the_reported_repeat_bomb_is_refused_before_it_is_expanded() {
    // Two lists of 3,000 items crossed: 9·10^6 results (the issue's
    // reproducer) under the default limits.
    let list: Vec<Value> = (0..3000).map(|i| json!(format!("v{i}"))).collect();
    let bomb = json!({"repeat": {"template": "<%a%-%b%>", "for_each": {"%a%": list.clone(), "%b%": list}}});
    let e = eval(W, bomb, &Ctx::default()).unwrap_err();
    assert_eq!(e.type_name(), "RequestLimitExceeded");
    assert_eq!(
        e.message,
        "Request limit exceeded: repeat: the values produced would reach 9000000 items, which exceeds the limit of 262144 items per evaluation"
    );
}

#[test]
fn repeat_items_are_counted_before_the_cross_product() {
    let list = |n: usize| Value::Array((0..n).map(|i| json!(i)).collect());
    let bomb = |n: usize| json!({"repeat": {"template": "x", "for_each": {"%a%": list(n), "%b%": list(n)}}});
    // 10 x 10 = 100 items: accepted within 100 items, refused within 99.
    let at = eval(W, bomb(10), &within(1 << 20, 100)).unwrap();
    assert_eq!(at.as_array().map(Vec::len), Some(100));
    assert_eq!(
        refused(&within(1 << 20, 99), bomb(10)),
        "Request limit exceeded: repeat: the values produced would reach 100 items, which exceeds the limit of 99 items per evaluation"
    );
    // A map template counts its entries too (one per copy, plus the copy).
    let maps = json!({"repeat": {"template": {"k": "%a%"}, "for_each": {"%a%": list(10)}}});
    assert!(eval(W, maps.clone(), &within(1 << 20, 20)).is_ok());
    assert!(refused(&within(1 << 20, 19), maps).contains("20 items"));
}

#[test]
fn repeat_bytes_are_counted_as_each_copy_is_made() {
    let big = "x".repeat(1000);
    let t = json!({"repeat": {"template": format!("{big}%a%"), "for_each": {"%a%": ["1", "2", "3", "4"]}}});
    let (_, v) = byte_threshold("repeat", t);
    assert_eq!(v.as_array().map(Vec::len), Some(4));
    // Growth by replacement is counted before the text is replaced.
    let grow = json!({"repeat": {"template": "%a%%a%%a%%a%", "for_each": {"%a%": [big.clone()]}}});
    byte_threshold("repeat", grow);
}

#[test]
fn nested_repeat_is_bounded() {
    let list: Vec<Value> = (0..200).map(|i| json!(i)).collect();
    let inner = json!({"repeat": {"template": "%b%", "for_each": {"%b%": list.clone()}}});
    let outer = json!({"repeat": {"template": [inner], "for_each": {"%a%": list.clone(), "%c%": list}}});
    let e = refused(&Ctx::default(), outer);
    assert!(e.starts_with("Request limit exceeded: repeat: "), "{e}");
}

#[test]
fn list_join_length_is_known_before_the_text_is_built() {
    let t = json!({"list_join": [",", ["abc", "defg", "hi"], ["jk"]]});
    let (_, v) = byte_threshold("list_join", t);
    assert_eq!(v, json!("abc,defg,hi,jk"));
    // Joining a huge repeat: the repeat is refused first.
    let list: Vec<Value> = (0..1000).map(|i| json!(i)).collect();
    let huge = json!({"list_join": ["", {"repeat": {"template": "0123456789", "for_each": {"%a%": list.clone(), "%b%": list}}}]});
    let e = refused(&Ctx::default(), huge);
    assert!(e.starts_with("Request limit exceeded: repeat: "), "{e}");
    // A long delimiter multiplies: counted too.
    let delim = json!({"list_join": ["-".repeat(5000), ["a", "b", "c", "d", "e", "f", "g", "h"]]});
    byte_threshold("list_join", delim);
}

#[test]
fn str_replace_amplification_is_refused() {
    // Each of 2,000 one-byte placeholders becomes 1,000 bytes: 2·10^6
    // bytes from a 3 KB template.
    let t = json!({"str_replace": {"template": "x".repeat(2000), "params": {"x": "y".repeat(1000)}}});
    let e = refused(&Ctx::default(), t);
    assert_eq!(
        e,
        "Request limit exceeded: str_replace: the values produced would reach 2000002 bytes, which exceeds the limit of 1048576 bytes per evaluation"
    );
    for f in ["str_replace", "str_replace_strict", "str_replace_vstrict"] {
        let t = json!({f: {"template": "a $x b $x", "params": {"$x": "12345"}}});
        let (_, v) = byte_threshold(f, t);
        assert_eq!(v, json!("a 12345 b 12345"));
    }
}

#[test]
fn map_merge_and_map_replace_are_bounded() {
    let m: serde_json::Map<String, Value> = (0..50).map(|i| (format!("k{i}"), json!("v".repeat(20)))).collect();
    let merge = json!({"map_merge": [m.clone(), {"extra": 1}]});
    let (_, v) = byte_threshold("map_merge", merge);
    assert_eq!(v.as_object().map(|o| o.len()), Some(51));
    let replace = json!({"map_replace": [m, {"keys": {"k1": "K1"}, "values": {"v": "w"}}]});
    let (_, v) = byte_threshold("map_replace", replace);
    assert_eq!(v["K1"], json!("v".repeat(20)));
    // Replacement values are counted as what they are, not what they replace.
    let grow = json!({"map_replace": [{"a": "s", "b": "s"}, {"values": {"s": "z".repeat(500)}}]});
    let (limit, _) = byte_threshold("map_replace", grow);
    assert!(limit > 1000);
}

#[test]
fn list_concat_and_unique_are_bounded_and_unique_keeps_last_occurrences() {
    let l: Vec<Value> = (0..100).map(|i| json!(i % 10)).collect();
    let (_, v) = byte_threshold("list_concat", json!({"list_concat": [l.clone(), ["a"]]}));
    assert_eq!(v.as_array().map(Vec::len), Some(101));
    let (_, v) = byte_threshold_loose(
        "list_concat_unique",
        json!({"list_concat_unique": [l, [3, {"b": 1, "a": 2}], [{"a": 2, "b": 1}]]}),
    );
    assert_eq!(v, json!([0, 1, 2, 4, 5, 6, 7, 8, 9, 3, {"a": 2, "b": 1}]));
    // Many items are compared by hash, not pair by pair.
    let many: Vec<Value> = (0..100_000).map(|i| json!(i)).collect();
    let v = eval(W, json!({"list_concat_unique": [many.clone(), many]}), &within(1 << 24, 1 << 20)).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(100_000));
}

#[test]
fn str_split_counts_its_parts_first() {
    let t = json!({"str_split": [",", "a,b,,c"]});
    let (_, v) = byte_threshold("str_split", t);
    assert_eq!(v, json!(["a", "b", "", "c"]));
    let many = json!({"str_split": [",", ",".repeat(10_000)]});
    let e = refused(&within(1 << 20, 10_000), many.clone());
    assert!(e.contains("10001 items, which exceeds the limit of 10000 items"), "{e}");
    assert!(eval(W, many, &within(1 << 20, 10_001)).is_ok());
}

#[test]
fn digest_of_a_huge_string_is_refused_where_the_string_is_built() {
    let list: Vec<Value> = (0..2000).map(|i| json!(i)).collect();
    let huge = json!({"digest": ["sha512", {"list_join": ["", {"repeat": {"template": "0123456789", "for_each": {"%a%": list}}}, [{"str_replace": {"template": "x".repeat(3000), "params": {"x": "y".repeat(400)}}}]]}]});
    let e = refused(&Ctx::default(), huge);
    assert!(e.starts_with("Request limit exceeded: str_replace: "), "{e}");
    // A digest's own result is small and counted like any other.
    let (_, v) = byte_threshold("digest", json!({"digest": ["md5", "abc"]}));
    assert_eq!(v, json!("900150983cd24fb0d6963f7d28e17f72"));
}

#[test]
fn copies_of_parameters_files_and_attributes_are_held_against_the_budget() {
    let mut ctx = Ctx::with_params(json!({"big": "p".repeat(100_000)}));
    ctx.files.insert("f".into(), "f".repeat(100_000));
    // Eleven copies of a 100 KB parameter exceed 1 MiB held at once.
    let copies = |f: Value| Value::Array(std::iter::repeat_n(f, 11).collect());
    let e = eval(W, copies(json!({"get_param": "big"})), &ctx).unwrap_err();
    assert!(e.message.starts_with("Request limit exceeded: get_param: "), "{}", e.message);
    let e = eval(W, copies(json!({"get_file": "f"})), &ctx).unwrap_err();
    assert!(e.message.starts_with("Request limit exceeded: get_file: "), "{}", e.message);
    // Ten fit.
    let ten = Value::Array(std::iter::repeat_n(json!({"get_param": "big"}), 10).collect());
    assert_eq!(eval(W, ten, &ctx).unwrap().as_array().map(Vec::len), Some(10));
    // get_attr results count like any other.
    let attrs = Value::Array(std::iter::repeat_n(json!({"get_attr": ["r", "list"]}), 10).collect());
    assert!(eval(W, attrs.clone(), &within(1 << 20, 20)).is_ok());
    let e = eval(W, attrs, &within(1 << 20, 19)).unwrap_err();
    assert!(e.message.starts_with("Request limit exceeded: get_attr: "), "{}", e.message);
}

#[test]
fn what_a_function_consumes_is_released() {
    // Arguments dropped by a function do not stay held: the join of each
    // repeat is small, so many of them fit where their repeats together
    // would not.
    let list: Vec<Value> = (0..1000).map(|i| json!(i)).collect();
    let joined = json!({"list_join": [",", {"repeat": {"template": "a", "for_each": {"%a%": list}}}]});
    let many = Value::Array(std::iter::repeat_n(joined, 20).collect());
    let v = eval(W, many, &within(1 << 20, 1500)).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(20));
}

#[test]
fn total_production_is_bounded() {
    // Each digest holds little, but the 40 repeats and joins under them
    // produce 40 x 92 KB > 16 x 128 KB.
    let list: Vec<Value> = (0..4000).map(|i| json!(i)).collect();
    let joined = json!({"list_join": ["", {"repeat": {"template": "0123456789", "for_each": {"%a%": list}}}]});
    let ctx = within(128 * 1024, 1 << 20);
    let v = eval(W, joined.clone(), &ctx).unwrap();
    assert_eq!(v.as_str().map(str::len), Some(40_000));
    let many =
        json!({"list_join": ["", Value::Array(std::iter::repeat_n(json!({"digest": ["md5", joined]}), 40).collect())]});
    let e = refused(&ctx, many);
    assert!(e.contains("bytes in total, which exceeds the limit of 2097152 bytes in total per evaluation"), "{e}");
}

#[test]
fn cfn_functions_share_the_budget() {
    use keelson_hot::Template;
    let list: Vec<Value> = (0..3000).map(|i| json!(format!("item{i}"))).collect();
    let props = |p: Value| {
        let t = Template::parse(
            &json!({"AWSTemplateFormatVersion": "2010-09-09", "Resources": {"A": {"Type": "X", "Properties": p}}}),
        )
        .unwrap();
        let env = keelson_hot::Environment::default();
        let params =
            t.validate_parameters(&env, &serde_json::Map::new(), &keelson_hot::PseudoParams::default()).unwrap();
        t.resources(&params).unwrap().remove(0).properties
    };
    let ctx = within(20_000, 10_000);
    let join = props(json!({"j": {"Fn::Join": ["-".repeat(10), list.clone()]}}));
    let e = join.resolve(&ctx).unwrap_err();
    assert!(e.message.starts_with("Request limit exceeded: Fn::Join: "), "{}", e.message);
    let small = props(json!({"j": {"Fn::Join": [",", ["a", "b"]]}}));
    assert_eq!(small.resolve(&ctx).unwrap(), json!({"j": "a,b"}));
    let replace = props(json!({"r": {"Fn::Replace": [{"$": "y".repeat(100)}, "$".repeat(300)]}}));
    let e = replace.resolve(&ctx).unwrap_err();
    assert_eq!(
        e.message,
        "Request limit exceeded: Fn::Replace: the values produced would reach 30002 bytes, which exceeds the limit of 20000 bytes per evaluation"
    );
    let split = props(json!({"s": {"Fn::Split": [",", ",".repeat(10_000)]}}));
    let e = split.resolve(&ctx).unwrap_err();
    assert!(
        e.message.starts_with("Request limit exceeded: Fn::Split: the values produced would reach 10001 items"),
        "{}",
        e.message
    );
}
