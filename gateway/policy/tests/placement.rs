//! Placement's 38 defaults against the personas of the upstream gabbi
//! RBAC tests (gabbits/*-secure-rbac.yaml, *-legacy-rbac.yaml, *-policy.yaml).

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keelson_policy::{
    placement_defaults, ContextValues, Credentials, Denied, Enforcer, EnforcerConfig, PolicyFile, Target,
};
use serde_json::{json, Value};

/// A gabbi persona: `X-Roles`, `X-Project-Id` and `OpenStack-System-Scope`
/// as placement's noauth2 middleware turns them into a request context.
#[derive(Clone, Copy, Debug)]
struct Persona {
    name: &'static str,
    roles: &'static [&'static str],
    project: Option<&'static str>,
    system: bool,
}

const P: &str = "project-id";
const P_ALT: &str = "project-id-alt";

const PERSONAS: &[Persona] = &[
    Persona { name: "admin", roles: &["admin"], project: Some("admin_project_id"), system: false },
    Persona { name: "service", roles: &["service"], project: Some("service_project_id"), system: false },
    Persona { name: "system_admin", roles: &["admin", "member", "reader"], project: None, system: true },
    Persona { name: "system_reader", roles: &["reader"], project: None, system: true },
    Persona { name: "project_admin", roles: &["admin", "member", "reader"], project: Some(P), system: false },
    Persona { name: "project_member", roles: &["member", "reader"], project: Some(P), system: false },
    Persona { name: "project_reader", roles: &["reader"], project: Some(P), system: false },
    Persona { name: "alt_project_admin", roles: &["admin", "member", "reader"], project: Some(P_ALT), system: false },
    Persona { name: "alt_project_member", roles: &["member", "reader"], project: Some(P_ALT), system: false },
    Persona { name: "alt_project_reader", roles: &["reader"], project: Some(P_ALT), system: false },
    Persona { name: "no_roles", roles: &[], project: Some(P), system: false },
];

fn persona(name: &str) -> Persona {
    *PERSONAS.iter().find(|p| p.name == name).expect("known persona")
}

impl Persona {
    fn creds(&self) -> Credentials {
        Credentials::from_context(&ContextValues {
            user_id: Some("user".into()),
            project_id: self.project.map(str::to_owned),
            system_scope: self.system.then(|| "all".to_owned()),
            roles: self.roles.iter().map(|r| (*r).to_owned()).collect(),
            ..ContextValues::default()
        })
    }

    fn has(&self, role: &str) -> bool {
        self.roles.contains(&role)
    }
}

fn enforcer(enforce_new_defaults: bool) -> Enforcer {
    let config = EnforcerConfig { enforce_new_defaults, ..EnforcerConfig::default() };
    Enforcer::placement(config, PolicyFile::empty()).expect("placement enforcer")
}

/// The target Placement passes: `{project_id: P}` for GET /usages?project_id=P,
/// the context's own project/user everywhere else.
fn target_for(rule: &str, creds: &Credentials) -> Target {
    if rule == "placement:usages" {
        json!({"project_id": P}).as_object().cloned().unwrap_or_default()
    } else {
        creds.default_target()
    }
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Outcome {
    Allowed,
    Denied,
    WrongScope,
}

fn outcome(result: Result<(), Denied>) -> Outcome {
    match result {
        Ok(()) => Outcome::Allowed,
        Err(Denied::NotAuthorized { .. }) => Outcome::Denied,
        Err(Denied::InvalidScope { .. }) => Outcome::WrongScope,
        Err(other) => panic!("unexpected {other}"),
    }
}

/// What the check strings in policies.json say, worked out by hand.
///
/// `project_id:%(project_id)s` compares Python `str()`s, so a system token
/// (project None) against a target project of None compares "None" with
/// "None" and matches, exactly as in oslo.
fn expected(rule: &keelson_policy::RuleDefault, who: Persona, target: &Target, legacy: bool) -> Outcome {
    if rule.scope_types.iter().any(|s| s == "project") && who.system {
        return Outcome::WrongScope;
    }
    let admin = who.has("admin");
    let service = who.has("service");
    let target_project = match target.get("project_id") {
        Some(Value::String(s)) => s.as_str(),
        _ => "None",
    };
    let project_reader = who.has("reader") && who.project.unwrap_or("None") == target_project;
    let allowed = match rule.check_str.as_str() {
        "role:admin" => admin,
        // Deprecated default `role:admin` is OR-ed in when not enforcing new defaults.
        "role:service" | "rule:service_api" => service || (legacy && admin),
        "role:admin or role:service" | "rule:admin_or_service_api" => admin || service,
        "role:reader and project_id:%(project_id)s" => project_reader || (legacy && admin),
        "role:admin or rule:project_reader_api or role:service" | "rule:admin_or_project_reader_or_service_api" => {
            admin || service || project_reader
        }
        other => panic!("no hand-derived expectation for {other}"),
    };
    if allowed {
        Outcome::Allowed
    } else {
        Outcome::Denied
    }
}

#[test]
fn table_of_all_defaults() {
    let defaults = placement_defaults();
    assert_eq!(defaults.len(), 38);
    for legacy in [false, true] {
        let e = enforcer(!legacy);
        for rule in &defaults {
            for who in PERSONAS {
                let creds = who.creds();
                let target = target_for(&rule.name, &creds);
                let got = outcome(e.authorize(&rule.name, &target, &creds));
                let want = expected(rule, *who, &target, legacy);
                assert_eq!(got, want, "{} as {} (legacy={legacy})", rule.name, who.name);
            }
        }
    }
}

#[test]
fn brief_examples() {
    let e = enforcer(true);
    let rule = "placement:resource_providers:list";
    let check = |who: &str| {
        let creds = persona(who).creds();
        outcome(e.authorize(rule, &creds.default_target(), &creds))
    };
    assert_eq!(check("project_admin"), Outcome::Allowed);
    assert_eq!(check("project_member"), Outcome::Denied);
    assert_eq!(check("service"), Outcome::Allowed);
    assert_eq!(check("project_reader"), Outcome::Denied);
    assert_eq!(check("system_reader"), Outcome::WrongScope);
    assert_eq!(check("system_admin"), Outcome::WrongScope);
}

/// One gabbi test: (persona, rule, allowed?) under a fixture.
fn gabbi(enforce_new_defaults: bool, cases: &[(&str, &str, bool)]) {
    let e = enforcer(enforce_new_defaults);
    for (who, rule, allowed) in cases {
        let creds = persona(who).creds();
        let result = e.authorize(rule, &target_for(rule, &creds), &creds);
        assert_eq!(result.is_ok(), *allowed, "{who} on {rule}: {result:?}");
        if let Err(denied) = result {
            assert!(denied.is_forbidden(), "{who} on {rule} must be a 403");
        }
    }
}

#[test]
fn resource_provider_secure_rbac() {
    gabbi(
        true,
        &[
            ("admin", "placement:resource_providers:list", true),
            ("service", "placement:resource_providers:list", true),
            ("system_admin", "placement:resource_providers:list", false),
            ("system_reader", "placement:resource_providers:list", false),
            ("project_admin", "placement:resource_providers:list", true),
            ("project_member", "placement:resource_providers:list", false),
            ("project_reader", "placement:resource_providers:list", false),
            ("service", "placement:resource_providers:create", true),
            ("system_admin", "placement:resource_providers:create", false),
            ("project_member", "placement:resource_providers:create", false),
        ],
    );
}

#[test]
fn usage_secure_rbac() {
    gabbi(
        true,
        &[
            ("project_admin", "placement:resource_providers:usages", true),
            ("project_member", "placement:resource_providers:usages", false),
            ("system_admin", "placement:resource_providers:usages", false),
            ("project_admin", "placement:usages", true),
            ("project_member", "placement:usages", true),
            ("project_reader", "placement:usages", true),
            ("alt_project_member", "placement:usages", false),
            ("alt_project_reader", "placement:usages", false),
            ("alt_project_admin", "placement:usages", true),
            ("admin", "placement:usages", true),
            ("service", "placement:usages", true),
            ("system_reader", "placement:usages", false),
            ("system_admin", "placement:usages", false),
        ],
    );
}

#[test]
fn reshaper_secure_and_legacy_rbac() {
    let secure = [
        ("project_reader", false),
        ("project_member", false),
        ("project_admin", false),
        ("system_reader", false),
        ("system_admin", false),
        ("admin", false),
        ("service", true),
    ];
    let cases: Vec<_> = secure.iter().map(|(w, a)| (*w, "placement:reshaper:reshape", *a)).collect();
    gabbi(true, &cases);
    // Legacy: the deprecated `role:admin` default still applies.
    gabbi(
        false,
        &[
            ("project_member", "placement:reshaper:reshape", false),
            ("project_admin", "placement:reshaper:reshape", true),
        ],
    );
}

#[test]
fn resource_provider_legacy_rbac_still_enforces_scope() {
    gabbi(
        false,
        &[
            ("system_admin", "placement:resource_providers:list", false),
            ("system_reader", "placement:resource_providers:list", false),
            ("project_admin", "placement:resource_providers:list", true),
            ("project_member", "placement:resource_providers:list", false),
            ("project_reader", "placement:resource_providers:delete", false),
            ("project_admin", "placement:resource_providers:delete", true),
        ],
    );
}

#[test]
fn usage_legacy_rbac() {
    // The legacy gabbi personas use a project other than the one queried.
    let e = enforcer(false);
    let other_project = |roles: &[&str]| {
        Credentials::from_context(&ContextValues {
            user_id: Some("user".into()),
            project_id: Some("9520f97991e94f30a8dd205ef3ce735a".into()),
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            ..ContextValues::default()
        })
    };
    let target = target_for("placement:usages", &Credentials::new());
    let member = other_project(&["member", "reader"]);
    let admin = other_project(&["admin", "member", "reader"]);
    assert!(e.authorize("placement:usages", &target, &member).is_err());
    assert!(e.authorize("placement:usages", &target, &admin).is_ok());
    assert!(e.authorize("placement:resource_providers:usages", &member.default_target(), &member).is_err());
    assert!(e.authorize("placement:resource_providers:usages", &admin.default_target(), &admin).is_ok());
}

#[test]
fn open_policy_fixture() {
    // OpenPolicyFixture: every rule but admin_api set to "@" (as fixtures.json).
    let overrides = PolicyFile::from_check_strings(
        placement_defaults().into_iter().filter(|r| r.name != "admin_api").map(|r| (r.name, "@")),
    );
    let config = EnforcerConfig { enforce_new_defaults: false, ..EnforcerConfig::default() };
    let e = Enforcer::placement(config, overrides).expect("enforcer");
    // noauth2 token "user": user and project "user", no roles.
    let user = Credentials::from_context(&ContextValues {
        user_id: Some("user".into()),
        project_id: Some("user".into()),
        ..ContextValues::default()
    });
    for rule in placement_defaults().iter().filter(|r| r.name.starts_with("placement:")) {
        assert_eq!(e.authorize(&rule.name, &user.default_target(), &user), Ok(()), "{}", rule.name);
    }
    assert!(e.authorize("admin_api", &user.default_target(), &user).is_err());
    // An open rule does not lift the scope check.
    let system = persona("system_reader").creds();
    assert!(matches!(
        e.authorize("placement:traits:list", &system.default_target(), &system),
        Err(Denied::InvalidScope { .. })
    ));
}

#[test]
fn overrides_from_yaml_and_json() {
    let yaml = PolicyFile::parse("placement:traits:list: role:reader\n").expect("yaml");
    let json = PolicyFile::parse("{\"placement:traits:list\": \"role:reader\"}").expect("json");
    assert_eq!(yaml, json);
    let e = Enforcer::placement(EnforcerConfig::default(), yaml).expect("enforcer");
    let reader = persona("project_reader").creds();
    let member_only = Credentials::from_context(&ContextValues {
        project_id: Some(P.into()),
        roles: vec!["member".into()],
        ..ContextValues::default()
    });
    assert!(e.authorize("placement:traits:list", &reader.default_target(), &reader).is_ok());
    assert!(e.authorize("placement:traits:list", &member_only.default_target(), &member_only).is_err());
    // Neighbouring rules keep their defaults.
    assert!(e.authorize("placement:traits:show", &reader.default_target(), &reader).is_err());
}

#[test]
fn roles_match_case_insensitively() {
    let e = enforcer(true);
    let shouting = Credentials::from_context(&ContextValues {
        project_id: Some(P.into()),
        roles: vec!["ADMIN".into()],
        ..ContextValues::default()
    });
    assert!(e.authorize("placement:allocations:list", &shouting.default_target(), &shouting).is_ok());
}

#[test]
fn keelson_extensions_are_admin_only() {
    let rules = [
        keelson_policy::KEELSON_PLACEMENT_EXPLAIN,
        keelson_policy::KEELSON_CONSOLE_FLEET,
        keelson_policy::KEELSON_CONSOLE_STACKS,
        keelson_policy::KEELSON_CONSOLE_CONTROLLER,
        keelson_policy::KEELSON_CONSOLE_METRICS,
    ];
    for new_defaults in [false, true] {
        let e = enforcer(new_defaults);
        for who in PERSONAS {
            let creds = who.creds();
            for rule in rules {
                let got = e.authorize(rule, &creds.default_target(), &creds);
                let admin = who.roles.contains(&"admin") && !who.system;
                assert_eq!(got.is_ok(), admin, "{rule}: {} (new defaults: {new_defaults})", who.name);
            }
        }
    }
}
