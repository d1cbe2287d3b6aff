//! Intrinsic functions: results and upstream error texts.

mod support;
use serde_json::json;
use support::{eval, eval_err, eval_ok, parse, Ctx};

const W: &str = "2021-04-16";

#[test]
fn get_param_with_path() {
    let ctx = Ctx::with_params(json!({"p": {"a": [10, {"b": "deep"}]}, "s": "str", "l": ["x", "y"]}));
    assert_eq!(eval(W, json!({"get_param": "s"}), &ctx).unwrap(), json!("str"));
    assert_eq!(eval(W, json!({"get_param": ["p", "a", 1, "b"]}), &ctx).unwrap(), json!("deep"));
    assert_eq!(eval(W, json!({"get_param": ["l", "1"]}), &ctx).unwrap(), json!("y"));
    assert_eq!(eval(W, json!({"get_param": ["p", "missing"]}), &ctx).unwrap(), json!(""));
    let e = eval(W, json!({"get_param": "nope"}), &ctx).unwrap_err();
    assert_eq!((e.type_name(), e.message.as_str()), ("UserParameterMissing", "The Parameter (nope) was not provided."));
    assert_eq!(
        eval(W, json!({"get_param": ["s", "x"]}), &ctx).unwrap_err().message,
        "\"get_param\" can't traverse path"
    );
}

#[test]
fn get_resource_and_get_attr() {
    assert_eq!(eval_ok(W, json!({"get_resource": "r"})), json!("r-id"));
    assert_eq!(eval_ok(W, json!({"get_attr": ["r", "name"]})), json!("r.name"));
    assert_eq!(eval_ok(W, json!({"get_attr": ["r", "list", 1]})), json!("y"));
    assert_eq!(eval_ok(W, json!({"get_attr": ["r", "map", "k"]})), json!("v"));
    assert_eq!(eval_ok(W, json!({"get_attr": ["r"]})), json!({"name": "r"}));
    assert_eq!(eval_err(W, json!({"get_attr": "r"})), "get_attr: Argument to \"get_attr\" must be a list");
    assert_eq!(
        eval_err("2014-10-16", json!({"get_attr": ["r"]})),
        "get_attr: Arguments to \"get_attr\" must be of the form [resource_name, attribute, (path), ...]"
    );
    let refs =
        parse(W, json!({"a": {"get_attr": ["x", "y"]}, "b": [{"get_resource": "z"}]})).unwrap().referenced_resources();
    assert_eq!(refs.into_iter().collect::<Vec<_>>(), vec!["x".to_string(), "z".to_string()]);
}

#[test]
fn get_file() {
    let mut ctx = Ctx::default();
    ctx.files.insert("f.txt".into(), "content".into());
    assert_eq!(eval(W, json!({"get_file": "f.txt"}), &ctx).unwrap(), json!("content"));
    assert_eq!(
        eval(W, json!({"get_file": "g.txt"}), &ctx).unwrap_err().message,
        "No content found in the \"files\" section for get_file path: g.txt"
    );
}

#[test]
fn list_join_versions() {
    assert_eq!(eval_ok(W, json!({"list_join": [",", ["a", "b"], ["c"]]})), json!("a,b,c"));
    assert_eq!(eval_ok(W, json!({"list_join": [",", ["a", {"k": 1}, [1]]]})), json!("a,{\"k\": 1},[1]"));
    assert_eq!(eval_ok("2013-05-23", json!({"list_join": ["-", ["a", "b"]]})), json!("a-b"));
    assert_eq!(
        eval_err("2013-05-23", json!({"list_join": ["-", ["a"], ["b"]]})),
        "list_join: Incorrect arguments to \"list_join\" should be: \"list_join\" : [ \" \", [ \"str1\", \"str2\"]]"
    );
    assert_eq!(eval_err(W, json!({"list_join": [",", ["a", 1]]})), "Items to join must be string, map or list not 1");
    assert_eq!(eval_err(W, json!({"list_join": [1, ["a"]]})), "\"list_join\" delimiter must be a string");
}

#[test]
fn str_replace_family() {
    let ctx = Ctx::with_params(json!({"n": 3, "m": {"a": 1}}));
    let r = eval(
        W,
        json!({"str_replace": {"template": "len=$L $M", "params": {"$L": {"get_param": "n"}, "$M": {"get_param": "m"}}}}),
        &ctx,
    );
    assert_eq!(r.unwrap(), json!("len=3 {\"a\": 1}"));
    // Longer placeholders first.
    assert_eq!(
        eval_ok(W, json!({"str_replace": {"template": "$ab $a", "params": {"$a": "1", "$ab": "2"}}})),
        json!("2 1")
    );
    assert_eq!(
        eval_err("2015-04-30", json!({"str_replace": {"template": "x", "params": {"x": ["l"]}}})),
        "\"str_replace\" params must be strings or numbers, param x is not valid"
    );
    assert_eq!(
        eval_err(W, json!({"str_replace_strict": {"template": "abc", "params": {"zz": "1", "yy": "2"}}})),
        "The following params were not found in the template: yy,zz"
    );
    assert_eq!(
        eval_err(W, json!({"str_replace_vstrict": {"template": "abc", "params": {"a": ""}}})),
        "str_replace_vstrict has an undefined or empty value for param a, must be a defined non-empty value"
    );
    assert_eq!(eval_err(W, json!({"str_replace": "x"})), "str_replace: Arguments to \"str_replace\" must be a map");
    assert_eq!(
        eval_err(W, json!({"str_replace": {"template": "x"}})),
        "str_replace: '\"str_replace\" syntax should be str_replace:\\n              template: This is var1 template var2\\n              params:\\n                var1: a\\n                var2: string'"
    );
    assert_eq!(
        eval_err(W, json!({"str_replace": {"template": "x", "params": "y"}})),
        "str_replace: \"str_replace\" parameters must be a mapping"
    );
    // A param hidden inside a longer one's occurrence is not found.
    assert_eq!(
        eval_err(W, json!({"str_replace_strict": {"template": "$ab", "params": {"$a": "1", "$ab": "2"}}})),
        "The following params were not found in the template: $a"
    );
    assert_eq!(eval_ok(W, json!({"str_replace_vstrict": {"template": "a", "params": {"a": 0}}})), json!("0"));
    assert_eq!(
        eval_err(W, json!({"str_replace": {"template": 1, "params": {}}})),
        "\"str_replace\" template must be a string"
    );
}

#[test]
fn repeat_lists_maps_and_permutations() {
    assert_eq!(
        eval_ok(W, json!({"repeat": {"for_each": {"%x%": ["a", "b"], "%y%": ["1", "2"]}, "template": "%x%-%y%"}})),
        json!(["a-1", "a-2", "b-1", "b-2"])
    );
    assert_eq!(
        eval_ok(
            W,
            json!({"repeat": {"for_each": {"%x%": ["a", "b"], "%y%": ["1", "2"]}, "template": "%x%-%y%", "permutations": false}})
        ),
        json!(["a-1", "b-2"])
    );
    assert_eq!(
        eval_ok(W, json!({"repeat": {"for_each": {"<%p%>": ["80"]}, "template": {"port": "<%p%>", "k<%p%>": "v"}}})),
        json!([{"port": "80", "k80": "v"}])
    );
    assert_eq!(eval_ok(W, json!({"repeat": {"for_each": {"%k%": {"a": 1}}, "template": "%k%"}})), json!(["a"]));
    assert_eq!(
        eval_err("2016-04-08", json!({"repeat": {"for_each": {"%k%": {"a": 1}}, "template": "%k%"}})),
        "The values of the \"for_each\" argument to \"repeat\" must be lists"
    );
    assert_eq!(
        eval_err(W, json!({"repeat": {"for_each": "x", "template": "y"}})),
        "repeat: The \"for_each\" argument to \"repeat\" must contain a map"
    );
    assert_eq!(
        eval_err(
            W,
            json!({"repeat": {"for_each": {"%a%": [1], "%b%": [1, 2]}, "template": "y", "permutations": false}})
        ),
        "For repeat, the length of for_each values should be equal if no nested loop."
    );
    assert_eq!(
        eval_err(W, json!({"repeat": {"for_each": {"%a%": "s"}, "template": "y"}})),
        "The values of the \"for_each\" argument to \"repeat\" must be lists or maps"
    );
}

#[test]
fn digest_algorithms() {
    assert_eq!(eval_ok(W, json!({"digest": ["md5", "abc"]})), json!("900150983cd24fb0d6963f7d28e17f72"));
    assert_eq!(eval_ok(W, json!({"digest": ["sha1", "abc"]})), json!("a9993e364706816aba3e25717850c26c9cd0d89d"));
    assert_eq!(
        eval_ok(W, json!({"digest": ["sha256", "abc"]})),
        json!("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    );
    for alg in ["sha224", "sha384", "sha512"] {
        assert!(eval_ok(W, json!({"digest": [alg, "abc"]})).is_string());
    }
    assert_eq!(
        eval_err(W, json!({"digest": ["md5"]})),
        "digest: Function \"digest\" usage: [\"<algorithm>\", \"<value>\"]"
    );
    assert!(eval_err(W, json!({"digest": ["foo", "x"]})).contains("Algorithm must be one of"));
    assert_eq!(
        eval_err(W, json!({"digest": "x"})),
        "digest: Argument to function \"digest\" must be a list of strings"
    );
}

#[test]
fn str_split_map_merge_map_replace() {
    assert_eq!(eval_ok(W, json!({"str_split": [",", "a,b,c"]})), json!(["a", "b", "c"]));
    assert_eq!(eval_ok(W, json!({"str_split": [",", "a,b,c", 1]})), json!("b"));
    assert_eq!(
        eval_err(W, json!({"str_split": [",", "a,b", 5]})),
        "Incorrect index to \"str_split\" should be between 0 and 1"
    );
    assert_eq!(eval_ok(W, json!({"map_merge": [{"a": 1, "b": 1}, {"b": 2}, null]})), json!({"a": 1, "b": 2}));
    assert_eq!(eval_err(W, json!({"map_merge": [{"a": 1}, "x"]})), "Incorrect arguments: Items to merge must be maps.");
    assert_eq!(
        eval_ok(W, json!({"map_replace": [{"k1": "v1", "k2": "v2"}, {"keys": {"k1": "K1"}, "values": {"v2": "V2"}}]})),
        json!({"K1": "v1", "k2": "V2"})
    );
    assert_eq!(
        eval_err(W, json!({"map_replace": [{"k1": "v1", "k2": "v2"}, {"keys": {"k1": "k2"}}]})),
        "key replacement k2 collides with a key in the input map"
    );
}

#[test]
fn if_filter_concat_contains_make_url() {
    assert_eq!(eval_ok(W, json!({"if": [true, "a", "b"]})), json!("a"));
    // 2021-04-16: the two-argument form drops the value.
    assert_eq!(eval_ok(W, json!({"x": {"if": [false, "a"]}, "y": [1, {"if": [false, 2]}]})), json!({"y": [1]}));
    assert!(eval_err("2018-08-31", json!({"if": [false, "a"]}))
        .contains("must be of the form: [condition_name, value_if_true, value_if_false]"));
    assert_eq!(eval_ok(W, json!({"filter": [[1, null], [1, 2, null, 3]]})), json!([2, 3]));
    assert_eq!(eval_ok(W, json!({"list_concat": [["a"], ["b", "a"]]})), json!(["a", "b", "a"]));
    // Upstream removes earlier duplicates while iterating.
    assert_eq!(eval_ok(W, json!({"list_concat_unique": [["a"], ["b", "a"]]})), json!(["b", "a"]));
    assert_eq!(eval_ok(W, json!({"list_concat_unique": [["a", "b"], ["a", "c", "b"]]})), json!(["a", "c", "b"]));
    assert_eq!(
        eval_err(W, json!({"list_concat": [["a"], "b"]})),
        "Incorrect arguments: Items to concat must be lists."
    );
    assert_eq!(eval_ok(W, json!({"filter": [null, [1]]})), json!([1]));
    assert_eq!(eval_err(W, json!({"filter": [[1], "x"]})), "\"filter\" only works with lists");
    assert_eq!(eval_ok(W, json!({"contains": ["a", ["a", "b"]]})), json!(true));
    assert_eq!(
        eval_ok(
            W,
            json!({"make_url": {"scheme": "http", "host": "example.com", "port": 8080, "path": "/a b", "query": {"k": "v w"}, "fragment": "f"}})
        ),
        json!("http://example.com:8080/a%20b?k=v+w#f")
    );
    assert_eq!(
        eval_ok(W, json!({"make_url": {"scheme": "https", "host": "::1", "path": "x"}})),
        json!("https://[::1]/x")
    );
    assert_eq!(
        eval_ok(
            W,
            json!({"make_url": {"scheme": "http", "username": "u s", "password": "p", "host": "h", "port": "80"}})
        ),
        json!("http://u%20s:p@h:80")
    );
    assert_eq!(eval_err(W, json!({"make_url": {"port": 70000}})), "Invalid URL port 70000, must be in range 1-65535");
    assert_eq!(eval_err(W, json!({"make_url": {"bogus": 1}})), "make_url: Invalid arguments to \"make_url\": bogus");
}

#[test]
fn version_gating_and_removed_functions() {
    // Not a function in 2013-05-23: a plain map.
    assert_eq!(eval_ok("2013-05-23", json!({"map_merge": [{"a": 1}]})), json!({"map_merge": [{"a": 1}]}));
    let e = parse("2015-10-15", json!({"Fn::Select": [0, ["a"]]})).unwrap_err();
    assert_eq!(e.type_name(), "InvalidTemplateVersion");
    assert_eq!(
        e.message,
        "The template version is invalid: The function Fn::Select is not supported in this version of HOT."
    );
    assert_eq!(eval_ok("2014-10-16", json!({"Fn::Select": [1, ["a", "b"]]})), json!("b"));
    assert_eq!(eval_ok("2013-05-23", json!({"Fn::Join": [",", ["a", "b"]]})), json!("a,b"));
    let e = parse(W, json!({"yaql": {"expression": "1", "data": {}}})).unwrap_err();
    assert_eq!((e.type_name(), e.message.as_str()), ("NotSupported", "yaql is not supported"));
    let e = eval(W, json!({"resource_facade": "metadata"}), &Ctx::default()).unwrap_err();
    assert!(e.message.contains("only valid in nested stacks"));
}

#[test]
fn cfn_functions_resolve_in_cfn_templates() {
    use keelson_hot::Template;
    let t = Template::parse(&json!({"AWSTemplateFormatVersion": "2010-09-09",
        "Mappings": {"M": {"k": {"v": "found"}}},
        "Resources": {"A": {"Type": "X", "Properties": {
            "j": {"Fn::Join": [",", ["a", {"Fn::FindInMap": ["M", "k", "v"]}]]},
            "s": {"Fn::Select": ["1", ["x", "y"]]},
            "sp": {"Fn::Split": [",", "a,b"]},
            "r": {"Fn::Replace": [{"$x": "1"}, "v=$x"]},
            "g": {"Fn::GetAtt": ["A", "name"]},
            "i": {"Fn::If": [true, "t", "f"]}}}}}))
    .unwrap();
    let env = keelson_hot::Environment::default();
    let p = t.validate_parameters(&env, &serde_json::Map::new(), &keelson_hot::PseudoParams::default()).unwrap();
    let a = t.resources(&p).unwrap().remove(0);
    let v = a.properties.resolve(&Ctx::default()).unwrap();
    assert_eq!(v, json!({"j": "a,found", "s": "y", "sp": ["a", "b"], "r": "v=1", "g": "A.name", "i": "t"}));
}
