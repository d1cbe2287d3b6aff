//! OS::Neutron::QoSPolicy and its rules (OS::Neutron::QoSBandwidthLimitRule,
//! QoSDscpMarkingRule, QoSMinimumBandwidthRule, QoSMinimumPacketRateRule):
//! one rule type, told apart by a [`RuleFlavor`].
//!
//! A policy's physical id is the policy's id; Neutron shows it at once,
//! so nothing is waited for, and a delete is done when Neutron accepts it
//! (or no longer has it). A rule lives under its policy, named by name
//! or id and resolved each time the rule is acted on; its physical id is
//! the rule's id. A rule whose policy is gone is gone too. Heat's own
//! NeutronResource rules apply: a delete's 409 is retried, attributes are
//! read from Neutron.

use std::marker::PhantomData;
use std::sync::Arc;

use keelson_openstack::network::{
    Kind, Network, BANDWIDTH_LIMIT_RULE, DSCP_MARKING_RULE, MINIMUM_BANDWIDTH_RULE, MINIMUM_PACKET_RATE_RULE,
    QOS_POLICY,
};
use keelson_openstack::OsError;
use serde_json::{json, Value};

use super::super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState, SupportStatus,
};
use super::{
    attribute_error, attribute_session, changed, conflict_retryable, create_fields, create_in_stack, delete_in_stack,
    failure, failure_as_attribute_error, find_id, find_id_if_any, network, object_attribute, remember, replace_failed,
    set_str, stack_session, update_fields, update_in_stack, with_delete_retries, NeutronActions, OBJECT_DATA,
};
use crate::error::EngineError;
use crate::resources::RequiredService;

pub struct QosPolicy {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

impl QosPolicy {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new("name", T::String, "The name for the QoS policy.").update_allowed(),
            PropertySchema::new("description", T::String, "The description for the QoS policy.").update_allowed(),
            PropertySchema::new("shared", T::Boolean, "Whether this QoS policy should be shared to other tenants.")
                .default_value(false)
                .update_allowed(),
            PropertySchema::new("tenant_id", T::String, "The owner tenant ID of this QoS policy."),
        ];
        let attributes = vec![AttributeSchema::new("rules", "A list of all rules for the QoS policy.", Some("list"))];
        QosPolicy {
            host,
            schema: ResourceSchema {
                properties,
                attributes,
                support_status: SupportStatus::supported("6.0.0"),
                description: "A resource for Neutron QoS Policy.\n\nThis QoS policy can be associated with neutron resources,\nsuch as port and network, to provide QoS capabilities.\n\nThe default policy usage of this resource is limited to\nadministrators only.",
            },
        }
    }
}

impl NeutronActions for QosPolicy {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let name = ctx.stable_physical_name();
        let fields = create_fields(&ctx.properties, name);
        let created = network.create(QOS_POLICY, fields).await.map_err(failure)?;
        let id = created
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| failure(OsError::InvalidResponse("a QoS policy without an id".into())))?
            .to_string();
        ctx.state.physical_id = Some(id);
        remember(ctx, created);
        Ok(())
    }

    async fn update_with(&self, network: &Network<'_>, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let diff = changed(old, &ctx.properties);
        if diff.is_empty() {
            return Ok(());
        }
        let fields = update_fields(ctx, old, diff);
        network.update(QOS_POLICY, &id, fields).await.map_err(failure)
    }

    /// Heat does not wait for the 404 here: the accepted delete is done.
    async fn delete_with(&self, network: &Network<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        with_delete_retries(ctx, move || async move { conflict_retryable(network.delete(QOS_POLICY, id).await) }).await
    }
}

impl Plugin for QosPolicy {
    const TYPE: &'static str = "OS::Neutron::QoSPolicy";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::neutron_with(&["qos"]))
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        create_in_stack(self, ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        update_in_stack(self, ctx, old).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        delete_in_stack(self, ctx).await
    }

    async fn needs_replace_failed(&self, ctx: &mut ActionContext) -> Result<bool, ResourceFailure> {
        replace_failed(&self.host, ctx, QOS_POLICY).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        object_attribute(&self.host, state, QOS_POLICY, name).await
    }
}

/// What tells one kind of QoS rule from another.
pub trait RuleFlavor: Send + Sync + 'static {
    const TYPE: &'static str;
    /// The rule's kind under its policy.
    const KIND: Kind;
    /// The Neutron extensions the rule needs (`required_service_extension`).
    const EXTENSIONS: &'static [&'static str];
    fn schema() -> ResourceSchema;
}

/// The `policy` and `tenant_id` every rule has.
fn rule_base_properties() -> [PropertySchema; 2] {
    [
        PropertySchema::new("policy", T::String, "ID or name of the QoS policy.")
            .required()
            .constraint(Constraint::custom("neutron.qos_policy")),
        PropertySchema::new("tenant_id", T::String, "The owner tenant ID of this rule."),
    ]
}

fn direction() -> PropertySchema {
    directions(&["egress", "ingress"])
}

/// A `direction` allowing `allowed` (the packet rate rule also allows `any`).
fn directions(allowed: &[&'static str]) -> PropertySchema {
    PropertySchema::new("direction", T::String, "Traffic direction from the point of view of the port.")
        .default_value("egress")
        .update_allowed()
        .constraint(Constraint::allowed_values(allowed.iter().copied()))
}

fn kbps(name: &'static str, description: &'static str) -> PropertySchema {
    PropertySchema::new(name, T::Integer, description).update_allowed().constraint(Constraint::range(Some(0), None))
}

pub struct BandwidthLimit;

impl RuleFlavor for BandwidthLimit {
    const TYPE: &'static str = "OS::Neutron::QoSBandwidthLimitRule";
    const KIND: Kind = BANDWIDTH_LIMIT_RULE;
    const EXTENSIONS: &'static [&'static str] = &["qos"];

    fn schema() -> ResourceSchema {
        let mut properties = vec![
            kbps("max_kbps", "Max bandwidth in kbps.").required(),
            kbps("max_burst_kbps", "Max burst bandwidth in kbps.").default_value(0),
            direction(),
        ];
        properties.extend(rule_base_properties());
        ResourceSchema {
            properties,
            attributes: Vec::new(),
            support_status: SupportStatus::supported("6.0.0"),
            description: "A resource for Neutron QoS bandwidth limit rule.\n\nThis rule can be associated with QoS policy, and then the policy\ncan be used by neutron port and network, to provide bandwidth limit\nQoS capabilities.\n\nThe default policy usage of this resource is limited to\nadministrators only.",
        }
    }
}

/// The DSCP marks Heat allows: 0 to 56 except 2-6, 42, 44 and 50-54
/// (the class selector, assured and expedited forwarding code points).
const DSCP_MARKS: [i64; 21] = [0, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 46, 48, 56];

pub struct DscpMarking;

impl RuleFlavor for DscpMarking {
    const TYPE: &'static str = "OS::Neutron::QoSDscpMarkingRule";
    const KIND: Kind = DSCP_MARKING_RULE;
    const EXTENSIONS: &'static [&'static str] = &["qos"];

    fn schema() -> ResourceSchema {
        let mut properties = vec![PropertySchema::new(
            "dscp_mark",
            T::Integer,
            "DSCP mark between 0 and 56, except 2-6, 42, 44, and 50-54.",
        )
        .required()
        .update_allowed()
        .constraint(Constraint::allowed_values(DSCP_MARKS))];
        properties.extend(rule_base_properties());
        ResourceSchema {
            properties,
            attributes: Vec::new(),
            support_status: SupportStatus::supported("7.0.0"),
            description: "A resource for Neutron QoS DSCP marking rule.\n\nThis rule can be associated with QoS policy, and then the policy\ncan be used by neutron port and network, to provide DSCP marking\nQoS capabilities.\n\nThe default policy usage of this resource is limited to\nadministrators only.",
        }
    }
}

pub struct MinimumBandwidth;

impl RuleFlavor for MinimumBandwidth {
    const TYPE: &'static str = "OS::Neutron::QoSMinimumBandwidthRule";
    const KIND: Kind = MINIMUM_BANDWIDTH_RULE;
    const EXTENSIONS: &'static [&'static str] = &["qos-bw-minimum-ingress"];

    fn schema() -> ResourceSchema {
        let mut properties = vec![kbps("min_kbps", "Min bandwidth in kbps.").required(), direction()];
        properties.extend(rule_base_properties());
        ResourceSchema {
            properties,
            attributes: Vec::new(),
            support_status: SupportStatus::supported("14.0.0"),
            description: "A resource for guaranteeing bandwidth.\n\nThis rule can be associated with a QoS policy, and then the policy\ncan be used by a neutron port to provide guaranteed bandwidth QoS\ncapabilities.\n\nDepending on drivers the guarantee may be enforced on two levels.\nFirst when a server is placed (scheduled) on physical infrastructure\nand/or second in the data plane of the physical hypervisor. For details\nplease see Neutron documentation:\n\nhttps://docs.openstack.org/neutron/latest/admin/config-qos-min-bw.html\n\nThe default policy usage of this resource is limited to\nadministrators only.",
        }
    }
}

pub struct MinimumPacketRate;

impl RuleFlavor for MinimumPacketRate {
    const TYPE: &'static str = "OS::Neutron::QoSMinimumPacketRateRule";
    const KIND: Kind = MINIMUM_PACKET_RATE_RULE;
    const EXTENSIONS: &'static [&'static str] = &["qos-pps-minimum"];

    fn schema() -> ResourceSchema {
        let mut properties = vec![
            PropertySchema::new("min_kpps", T::Integer, "Min packet rate in kpps.")
                .required()
                .update_allowed()
                .constraint(Constraint::range(Some(0), None)),
            directions(&["any", "egress", "ingress"]),
        ];
        properties.extend(rule_base_properties());
        ResourceSchema {
            properties,
            attributes: Vec::new(),
            support_status: SupportStatus::supported("19.0.0"),
            description: "A resource for guaranteeing packet rate.\n\nThis rule can be associated with a QoS policy, and then the policy\ncan be used by a neutron port to provide guaranteed packet rate QoS\ncapabilities.\n\nDepending on drivers the guarantee may be enforced on two levels.\nFirst when a server is placed (scheduled) on physical infrastructure\nand/or second in the data plane of the physical hypervisor. For details\nplease see Neutron documentation:\n\nhttps://docs.openstack.org/neutron/latest/admin/config-qos-min-pps.html\n\nThe default policy usage of this resource is limited to\nadministrators only.",
        }
    }
}

/// One rule of a QoS policy.
pub struct QosRule<R: RuleFlavor> {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
    flavor: PhantomData<R>,
}

pub type QosBandwidthLimitRule = QosRule<BandwidthLimit>;
pub type QosMinimumBandwidthRule = QosRule<MinimumBandwidth>;
pub type QosDscpMarkingRule = QosRule<DscpMarking>;
pub type QosMinimumPacketRateRule = QosRule<MinimumPacketRate>;

/// The id of the rule's policy; None when Neutron has no such policy
/// (Heat's ignore-not-found covers the lookup too).
async fn policy_id(network: &Network<'_>, props: &Properties) -> Result<Option<String>, ResourceFailure> {
    find_id_if_any(network, QOS_POLICY, set_str(props, "policy").unwrap_or_default()).await
}

impl<R: RuleFlavor> QosRule<R> {
    pub fn new(host: Arc<HostSlot>) -> Self {
        QosRule { host, schema: R::schema(), flavor: PhantomData }
    }
}

impl<R: RuleFlavor> NeutronActions for QosRule<R> {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let policy = find_id(network, QOS_POLICY, set_str(&ctx.properties, "policy").unwrap_or_default()).await?;
        // No `name` property: the physical name is not part of the body.
        let mut fields = create_fields(&ctx.properties, String::new());
        fields.remove("policy");
        let created = network.create_in(QOS_POLICY, &policy, R::KIND, fields).await.map_err(failure)?;
        let id = created
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| failure(OsError::InvalidResponse(format!("a {} without an id", R::KIND.key))))?
            .to_string();
        ctx.state.physical_id = Some(id);
        remember(ctx, created);
        Ok(())
    }

    async fn update_with(&self, network: &Network<'_>, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let diff = changed(old, &ctx.properties);
        if diff.is_empty() {
            return Ok(());
        }
        let policy = find_id(network, QOS_POLICY, set_str(old, "policy").unwrap_or_default()).await?;
        network.update_in(QOS_POLICY, &policy, R::KIND, &id, diff).await.map_err(failure)
    }

    /// Under the policy; a policy Neutron no longer has has no rules.
    async fn delete_with(&self, network: &Network<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        let Some(policy) = policy_id(network, &ctx.properties).await? else { return Ok(()) };
        let policy = &policy;
        with_delete_retries(ctx, move || async move {
            conflict_retryable(network.delete_in(QOS_POLICY, policy, R::KIND, id).await)
        })
        .await
    }
}

impl<R: RuleFlavor> Plugin for QosRule<R> {
    const TYPE: &'static str = R::TYPE;

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::neutron_with(R::EXTENSIONS))
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        create_in_stack(self, ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        update_in_stack(self, ctx, old).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        delete_in_stack(self, ctx).await
    }

    /// Heat's `needs_replace_failed` for an object without a status:
    /// replaced only when it (or its policy) is gone.
    async fn needs_replace_failed(&self, ctx: &mut ActionContext) -> Result<bool, ResourceFailure> {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(true) };
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let network = network(&session).await?;
        let Some(policy) = policy_id(&network, &ctx.properties).await? else { return Ok(true) };
        match network.show_in(QOS_POLICY, &policy, R::KIND, &id).await {
            Ok(rule) => Ok(rule.get("status").is_some_and(|s| s == "ERROR")),
            Err(e) if e.is_not_found() => Ok(true),
            Err(e) => Err(failure(e)),
        }
    }

    /// Only `show`: the rule as Neutron shows it now (as last seen when
    /// Neutron cannot be asked).
    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        let (Some(id), "show") = (&state.physical_id, name) else { return Ok(Value::Null) };
        if let Some(session) = attribute_session(&self.host, state).await? {
            let network = Network::connect(&session).await.map_err(attribute_error)?;
            // As Heat: a rule or policy Neutron no longer has shows null.
            let Some(policy) = policy_id(&network, &state.properties).await.map_err(failure_as_attribute_error)? else {
                return Ok(Value::Null);
            };
            return match network.show_in(QOS_POLICY, &policy, R::KIND, id).await {
                Ok(rule) => Ok(Value::Object(rule)),
                Err(e) if e.is_not_found() => Ok(Value::Null),
                Err(e) => Err(attribute_error(e)),
            };
        }
        Ok(state.data.get(OBJECT_DATA).and_then(|o| serde_json::from_str(o).ok()).unwrap_or(json!(null)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::super::UpdateDecision;
    use super::super::testing;
    use super::*;

    fn policy() -> QosPolicy {
        QosPolicy::new(Arc::new(HostSlot::default()))
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&policy(), "qp", &v).unwrap()
    }

    const POLICIES: &str = "/network/v2.0/qos/policies";

    #[tokio::test]
    async fn create_posts_the_policy_without_waiting() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(
            &format!("POST {POLICIES}"),
            201,
            json!({"policy": {"id": "q1", "rules": [{"id": "r1", "type": "bandwidth_limit"}]}}),
        );
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"description": "gold"})));
        policy().create_with(&network, &mut ctx).await.unwrap();
        let name = ctx.state.data.get(crate::resources::PHYSICAL_NAME_DATA).unwrap().clone();
        let calls = neutron.calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].2, json!({"policy": {"name": name, "description": "gold", "shared": false}}));
        assert_eq!(ctx.state.physical_id.as_deref(), Some("q1"));
        // Attributes answer from Neutron.
        neutron.answer(&format!("GET {POLICIES}/q1"), 200, json!({"policy": {"id": "q1", "rules": []}}));
        let (slot, _host) = testing::bound(Some(session));
        let bound = QosPolicy::new(slot);
        assert_eq!(bound.attribute(&ctx.state, "rules").await.unwrap(), json!([]));
        assert_eq!(bound.attribute(&ctx.state, "show").await.unwrap(), json!({"id": "q1", "rules": []}));
        ctx.state.physical_id = Some("gone".into());
        assert_eq!(bound.attribute(&ctx.state, "rules").await.unwrap(), Value::Null);
    }

    #[tokio::test]
    async fn update_puts_what_changed_and_a_cleared_name_is_the_physical_one() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("PUT {POLICIES}/q1"), 200, json!({"policy": {"id": "q1"}}));
        let network = network(&session).await.unwrap();
        let old = props(json!({"name": "gold", "description": "d"}));
        let (mut ctx, _tx) = test_context(props(json!({"description": "d", "shared": true})));
        ctx.state.physical_id = Some("q1".into());
        policy().update_with(&network, &mut ctx, &old).await.unwrap();
        let name = ctx.state.data.get(crate::resources::PHYSICAL_NAME_DATA).unwrap().clone();
        assert_eq!(
            neutron.calls()[0],
            ("PUT".into(), format!("{POLICIES}/q1"), json!({"policy": {"name": name, "shared": true}}))
        );
        assert_eq!(
            Plugin::update_decision(&policy(), &old, &props(json!({"tenant_id": "t"}))),
            UpdateDecision::Replace
        );
        assert_eq!(Plugin::update_decision(&policy(), &old, &props(json!({"name": "x"}))), UpdateDecision::InPlace);
    }

    #[tokio::test]
    async fn delete_is_done_when_accepted_or_gone() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("DELETE {POLICIES}/q1"), 204, Value::Null);
        let (slot, _host) = testing::bound(Some(session));
        let plugin = QosPolicy::new(slot);
        let (mut ctx, _tx) = test_context(props(json!({})));
        ctx.state.physical_id = Some("q1".into());
        Plugin::delete(&plugin, &mut ctx).await.unwrap();
        assert_eq!(neutron.calls().len(), 1, "no look after the delete");
        ctx.state.physical_id = Some("gone".into());
        Plugin::delete(&plugin, &mut ctx).await.unwrap();
    }

    fn min_rule() -> QosMinimumBandwidthRule {
        QosRule::new(Arc::new(HostSlot::default()))
    }

    const GOLD: &str = "GET /network/v2.0/qos/policies?name=gold&fields=id";

    #[tokio::test]
    async fn a_rule_is_made_under_its_policy() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(GOLD, 200, json!({"policies": [{"id": "q1"}]}));
        neutron.answer(
            &format!("POST {POLICIES}/q1/minimum_bandwidth_rules"),
            201,
            json!({"minimum_bandwidth_rule": {"id": "r1", "min_kbps": 1000, "direction": "egress"}}),
        );
        let network = network(&session).await.unwrap();
        let props =
            Plugin::validate_properties(&min_rule(), "r", &json!({"policy": "gold", "min_kbps": 1000})).unwrap();
        let (mut ctx, _tx) = test_context(props.clone());
        min_rule().create_with(&network, &mut ctx).await.unwrap();
        assert_eq!(neutron.calls()[1].2, json!({"minimum_bandwidth_rule": {"min_kbps": 1000, "direction": "egress"}}));
        assert_eq!(ctx.state.physical_id.as_deref(), Some("r1"));
        assert!(!ctx.state.data.contains_key(crate::resources::PHYSICAL_NAME_DATA));
        // `show` is the rule as Neutron shows it.
        neutron.answer(
            &format!("GET {POLICIES}/q1/minimum_bandwidth_rules/r1"),
            200,
            json!({"minimum_bandwidth_rule": {"id": "r1", "min_kbps": 1000}}),
        );
        ctx.state.properties = props;
        let (slot, _host) = testing::bound(Some(session));
        let bound = QosMinimumBandwidthRule::new(slot);
        assert_eq!(bound.attribute(&ctx.state, "show").await.unwrap(), json!({"id": "r1", "min_kbps": 1000}));
        ctx.state.physical_id = Some("gone".into());
        assert_eq!(bound.attribute(&ctx.state, "show").await.unwrap(), Value::Null);
    }

    #[tokio::test]
    async fn a_rule_update_puts_what_changed_and_a_new_policy_replaces() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(GOLD, 200, json!({"policies": [{"id": "q1"}]}));
        neutron.answer(&format!("PUT {POLICIES}/q1/minimum_bandwidth_rules/r1"), 200, json!({}));
        let network = network(&session).await.unwrap();
        let rule = |v: Value| Plugin::validate_properties(&min_rule(), "r", &v).unwrap();
        let old = rule(json!({"policy": "gold", "min_kbps": 1000}));
        let new = rule(json!({"policy": "gold", "min_kbps": 2000, "direction": "ingress"}));
        assert_eq!(Plugin::update_decision(&min_rule(), &old, &new), UpdateDecision::InPlace);
        let (mut ctx, _tx) = test_context(new);
        ctx.state.physical_id = Some("r1".into());
        min_rule().update_with(&network, &mut ctx, &old).await.unwrap();
        assert_eq!(neutron.calls()[1].2, json!({"minimum_bandwidth_rule": {"min_kbps": 2000, "direction": "ingress"}}));
        let moved = rule(json!({"policy": "silver", "min_kbps": 1000}));
        assert_eq!(Plugin::update_decision(&min_rule(), &old, &moved), UpdateDecision::Replace);
    }

    #[tokio::test]
    async fn a_rule_whose_policy_is_gone_is_deleted() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(GOLD, 200, json!({"policies": []}));
        let network = network(&session).await.unwrap();
        let props = Plugin::validate_properties(&min_rule(), "r", &json!({"policy": "gold", "min_kbps": 1})).unwrap();
        let (mut ctx, _tx) = test_context(props);
        ctx.state.physical_id = Some("r1".into());
        min_rule().delete_with(&network, &mut ctx, "r1").await.unwrap();
        assert!(neutron.calls().iter().all(|(m, _, _)| m == "GET"));
        // The policy there, the rule gone: done too.
        neutron.answer(
            "GET /network/v2.0/qos/policies?name=silver&fields=id",
            200,
            json!({"policies": [{"id": "q1"}]}),
        );
        ctx.properties.insert("policy".into(), json!("silver"));
        min_rule().delete_with(&network, &mut ctx, "r1").await.unwrap();
        assert_eq!(
            last_request(&neutron),
            ("DELETE".to_string(), "/network/v2.0/qos/policies/q1/minimum_bandwidth_rules/r1".to_string())
        );
    }

    #[test]
    fn rule_values_are_checked() {
        let invalid = |v: Value| Plugin::validate_properties(&min_rule(), "r", &v).unwrap_err().message();
        assert!(invalid(json!({"policy": "gold", "min_kbps": -1})).contains("min_kbps"));
        assert!(invalid(json!({"policy": "gold", "min_kbps": 1, "direction": "any"})).contains("direction"));
        assert!(invalid(json!({"min_kbps": 1})).contains("policy"));
    }
    #[tokio::test]
    async fn a_bandwidth_limit_rule_sends_its_defaults() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(GOLD, 200, json!({"policies": [{"id": "q1"}]}));
        neutron.answer(
            &format!("POST {POLICIES}/q1/bandwidth_limit_rules"),
            201,
            json!({"bandwidth_limit_rule": {"id": "b1"}}),
        );
        let network = network(&session).await.unwrap();
        let limit = || QosBandwidthLimitRule::new(Arc::new(HostSlot::default()));
        let props =
            Plugin::validate_properties(&limit(), "r", &json!({"policy": "gold", "max_kbps": 100, "tenant_id": "t"}))
                .unwrap();
        let (mut ctx, _tx) = test_context(props);
        limit().create_with(&network, &mut ctx).await.unwrap();
        assert_eq!(
            neutron.calls()[1].2,
            json!({"bandwidth_limit_rule": {"max_kbps": 100, "max_burst_kbps": 0, "direction": "egress", "tenant_id": "t"}})
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("b1"));
        let e =
            Plugin::validate_properties(&limit(), "r", &json!({"policy": "gold", "max_kbps": 1, "max_burst_kbps": -1}))
                .unwrap_err();
        assert!(e.message().contains("max_burst_kbps"));
    }
    #[tokio::test]
    async fn a_failed_rule_is_replaced_only_when_gone() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(GOLD, 200, json!({"policies": [{"id": "q1"}]}));
        neutron.answer(
            &format!("GET {POLICIES}/q1/minimum_bandwidth_rules/r1"),
            200,
            json!({"minimum_bandwidth_rule": {"id": "r1"}}),
        );
        let (slot, _host) = testing::bound(Some(session));
        let plugin = QosMinimumBandwidthRule::new(slot);
        let props = Plugin::validate_properties(&plugin, "r", &json!({"policy": "gold", "min_kbps": 1})).unwrap();
        let (mut ctx, _tx) = test_context(props);
        assert_eq!(Plugin::needs_replace_failed(&plugin, &mut ctx).await, Ok(true));
        ctx.state.physical_id = Some("r1".into());
        assert_eq!(Plugin::needs_replace_failed(&plugin, &mut ctx).await, Ok(false));
        ctx.state.physical_id = Some("r2".into());
        assert_eq!(Plugin::needs_replace_failed(&plugin, &mut ctx).await, Ok(true));
    }

    /// The method and path of the last request the stand-in saw.
    fn last_request(neutron: &testing::Neutron) -> (String, String) {
        let (method, path, _) = neutron.calls().last().cloned().unwrap();
        (method, path)
    }

    fn dscp_rule() -> QosDscpMarkingRule {
        QosRule::new(Arc::new(HostSlot::default()))
    }

    fn pps_rule() -> QosMinimumPacketRateRule {
        QosRule::new(Arc::new(HostSlot::default()))
    }

    #[tokio::test]
    async fn a_dscp_marking_rule_is_made_updated_and_deleted_under_its_policy() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(GOLD, 200, json!({"policies": [{"id": "q1"}]}));
        neutron.answer(
            &format!("POST {POLICIES}/q1/dscp_marking_rules"),
            201,
            json!({"dscp_marking_rule": {"id": "d1", "dscp_mark": 26}}),
        );
        neutron.answer(&format!("PUT {POLICIES}/q1/dscp_marking_rules/d1"), 200, json!({}));
        neutron.answer(&format!("DELETE {POLICIES}/q1/dscp_marking_rules/d1"), 204, Value::Null);
        let network = network(&session).await.unwrap();
        let rule = |v: Value| Plugin::validate_properties(&dscp_rule(), "r", &v).unwrap();
        let old = rule(json!({"policy": "gold", "dscp_mark": 26}));
        let (mut ctx, _tx) = test_context(old.clone());
        dscp_rule().create_with(&network, &mut ctx).await.unwrap();
        assert_eq!(
            neutron.calls()[1],
            (
                "POST".into(),
                format!("{POLICIES}/q1/dscp_marking_rules"),
                json!({"dscp_marking_rule": {"dscp_mark": 26}})
            )
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("d1"));

        // A new mark is put in place; a new policy replaces the rule.
        let new = rule(json!({"policy": "gold", "dscp_mark": 46}));
        assert_eq!(Plugin::update_decision(&dscp_rule(), &old, &new), UpdateDecision::InPlace);
        ctx.properties = new;
        dscp_rule().update_with(&network, &mut ctx, &old).await.unwrap();
        let last = neutron.calls().last().cloned().unwrap();
        assert_eq!(
            last,
            (
                "PUT".into(),
                format!("{POLICIES}/q1/dscp_marking_rules/d1"),
                json!({"dscp_marking_rule": {"dscp_mark": 46}})
            )
        );
        let moved = rule(json!({"policy": "silver", "dscp_mark": 26}));
        assert_eq!(Plugin::update_decision(&dscp_rule(), &old, &moved), UpdateDecision::Replace);

        // Deleted under the policy; a rule Neutron no longer has (404) is deleted too.
        dscp_rule().delete_with(&network, &mut ctx, "d1").await.unwrap();
        assert_eq!(
            last_request(&neutron),
            ("DELETE".to_string(), "/network/v2.0/qos/policies/q1/dscp_marking_rules/d1".to_string())
        );
        dscp_rule().delete_with(&network, &mut ctx, "gone").await.unwrap();
        assert_eq!(
            last_request(&neutron),
            ("DELETE".to_string(), "/network/v2.0/qos/policies/q1/dscp_marking_rules/gone".to_string())
        );
    }

    #[test]
    fn a_dscp_mark_is_one_heat_lists() {
        let invalid = |v: Value| Plugin::validate_properties(&dscp_rule(), "r", &v).unwrap_err().message();
        for mark in [0, 8, 46, 56] {
            Plugin::validate_properties(&dscp_rule(), "r", &json!({"policy": "gold", "dscp_mark": mark})).unwrap();
        }
        // Heat converts an integer property before checking it.
        Plugin::validate_properties(&dscp_rule(), "r", &json!({"policy": "gold", "dscp_mark": "10"})).unwrap();
        for mark in [2, 6, 42, 44, 50, 54, 57, -8] {
            let e = invalid(json!({"policy": "gold", "dscp_mark": mark}));
            assert!(e.contains("dscp_mark") && e.contains("is not an allowed value"), "{mark}: {e}");
        }
        assert!(invalid(json!({"policy": "gold"})).contains("dscp_mark"));
        assert_eq!(Plugin::required_service(&dscp_rule()), Some(RequiredService::neutron_with(&["qos"])));
    }

    #[tokio::test]
    async fn a_minimum_packet_rate_rule_is_made_updated_and_deleted_under_its_policy() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(GOLD, 200, json!({"policies": [{"id": "q1"}]}));
        neutron.answer(
            &format!("POST {POLICIES}/q1/minimum_packet_rate_rules"),
            201,
            json!({"minimum_packet_rate_rule": {"id": "p1", "min_kpps": 1000, "direction": "egress"}}),
        );
        neutron.answer(&format!("PUT {POLICIES}/q1/minimum_packet_rate_rules/p1"), 200, json!({}));
        neutron.answer(&format!("DELETE {POLICIES}/q1/minimum_packet_rate_rules/p1"), 204, Value::Null);
        let network = network(&session).await.unwrap();
        let rule = |v: Value| Plugin::validate_properties(&pps_rule(), "r", &v).unwrap();
        let old = rule(json!({"policy": "gold", "min_kpps": 1000}));
        let (mut ctx, _tx) = test_context(old.clone());
        pps_rule().create_with(&network, &mut ctx).await.unwrap();
        // The default direction is sent.
        assert_eq!(
            neutron.calls()[1].2,
            json!({"minimum_packet_rate_rule": {"min_kpps": 1000, "direction": "egress"}})
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("p1"));

        let new = rule(json!({"policy": "gold", "min_kpps": 2000, "direction": "any"}));
        assert_eq!(Plugin::update_decision(&pps_rule(), &old, &new), UpdateDecision::InPlace);
        ctx.properties = new;
        pps_rule().update_with(&network, &mut ctx, &old).await.unwrap();
        let last = neutron.calls().last().cloned().unwrap();
        assert_eq!(
            last,
            (
                "PUT".into(),
                format!("{POLICIES}/q1/minimum_packet_rate_rules/p1"),
                json!({"minimum_packet_rate_rule": {"min_kpps": 2000, "direction": "any"}})
            )
        );
        let moved = rule(json!({"policy": "silver", "min_kpps": 1000}));
        assert_eq!(Plugin::update_decision(&pps_rule(), &old, &moved), UpdateDecision::Replace);

        pps_rule().delete_with(&network, &mut ctx, "p1").await.unwrap();
        assert_eq!(
            last_request(&neutron),
            ("DELETE".to_string(), "/network/v2.0/qos/policies/q1/minimum_packet_rate_rules/p1".to_string())
        );
        // 404: already gone, so deleted.
        pps_rule().delete_with(&network, &mut ctx, "gone").await.unwrap();
    }

    #[test]
    fn minimum_packet_rate_values_are_checked() {
        let invalid = |v: Value| Plugin::validate_properties(&pps_rule(), "r", &v).unwrap_err().message();
        for direction in ["any", "egress", "ingress"] {
            let v = json!({"policy": "gold", "min_kpps": 0, "direction": direction});
            Plugin::validate_properties(&pps_rule(), "r", &v).unwrap();
        }
        assert!(invalid(json!({"policy": "gold", "min_kpps": -1})).contains("min_kpps"));
        assert!(invalid(json!({"policy": "gold", "min_kpps": 1, "direction": "both"})).contains("direction"));
        assert!(invalid(json!({"policy": "gold"})).contains("min_kpps"));
        assert_eq!(Plugin::required_service(&pps_rule()), Some(RequiredService::neutron_with(&["qos-pps-minimum"])));
    }
}
