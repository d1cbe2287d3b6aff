//! The arithmetic of scaling groups, free of any engine (upstream
//! `heat/scaling/scalingutil.py`, `cooldown.py`, `rolling_update.py`,
//! `template.py`): the capacity an adjustment asks for, the cooldown and
//! `scaling_in_progress` bookkeeping a group keeps in its metadata, the
//! batches of a rolling update, and the member definitions of the next
//! nested template.

use chrono::{Duration, NaiveDateTime};
use serde_json::{json, Map, Value};

use super::ResourceFailure;

/// How a scaling adjustment is read (the OS::Heat names and the
/// CloudFormation ones the group uses internally).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdjustmentType {
    Change,
    Exact,
    PercentChange,
}

impl AdjustmentType {
    /// The property values OS::Heat::ScalingPolicy accepts.
    pub const HEAT_NAMES: [&'static str; 3] = ["change_in_capacity", "exact_capacity", "percent_change_in_capacity"];

    pub fn parse(text: &str) -> Option<AdjustmentType> {
        match text {
            "change_in_capacity" | "ChangeInCapacity" => Some(AdjustmentType::Change),
            "exact_capacity" | "ExactCapacity" => Some(AdjustmentType::Exact),
            "percent_change_in_capacity" | "PercentChangeInCapacity" => Some(AdjustmentType::PercentChange),
            _ => None,
        }
    }

    /// The CloudFormation name, as cooldown reasons record it.
    pub fn cfn_name(self) -> &'static str {
        match self {
            AdjustmentType::Change => "ChangeInCapacity",
            AdjustmentType::Exact => "ExactCapacity",
            AdjustmentType::PercentChange => "PercentChangeInCapacity",
        }
    }
}

/// Python's `int()` of a float, bounded: `as` truncates towards zero,
/// saturates past i64 and maps NaN to 0.
#[allow(clippy::cast_possible_truncation)]
pub fn saturating_i64(f: f64) -> i64 {
    f as i64
}

/// The capacity `adjustment` of `kind` gives a group of `current`
/// members, kept within `[minimum, maximum]` (upstream
/// `calculate_new_capacity`). A percentage always moves by at least one
/// member, and by at least `min_step` when given.
pub fn new_capacity(
    current: i64,
    adjustment: f64,
    kind: AdjustmentType,
    min_step: Option<i64>,
    minimum: i64,
    maximum: i64,
) -> i64 {
    let wanted = match kind {
        // `as` saturates a huge adjustment; the sum must not wrap.
        AdjustmentType::Change => current.saturating_add(saturating_i64(adjustment)),
        AdjustmentType::Exact => saturating_i64(adjustment),
        AdjustmentType::PercentChange => {
            let delta = current as f64 * adjustment / 100.0;
            // Below one member the change rounds away from zero, above it
            // towards zero.
            let mut rounded = saturating_i64(if delta.abs() < 1.0 {
                if delta > 0.0 {
                    delta.ceil()
                } else {
                    delta.floor()
                }
            } else if delta > 0.0 {
                delta.floor()
            } else {
                delta.ceil()
            });
            if let Some(step) = min_step.filter(|s| s.unsigned_abs() > rounded.unsigned_abs()) {
                rounded = if rounded > 0 { step } else { step.saturating_neg() };
            }
            current.saturating_add(rounded)
        }
    };
    if wanted > maximum {
        maximum
    } else if wanted < minimum {
        minimum
    } else {
        wanted
    }
}

/// Python's `datetime.isoformat()` of a naive UTC time: microseconds only
/// when there are some. Cooldown ends are compared as these texts.
pub fn isoformat(t: NaiveDateTime) -> String {
    if t.and_utc().timestamp_subsec_micros() == 0 {
        t.format("%Y-%m-%dT%H:%M:%S").to_string()
    } else {
        t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
    }
}

fn parse_iso(text: &str) -> Option<NaiveDateTime> {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f").ok()
}

/// The first key of the map under `key` (upstream keeps one entry there).
fn first_key<'a>(metadata: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    metadata.get(key)?.as_object()?.keys().next().map(String::as_str)
}

/// A cooldown in seconds as upstream sanitises it: none or negative is 0.
pub fn sanitize_cooldown(cooldown: Option<f64>) -> f64 {
    cooldown.unwrap_or(0.0).max(0.0)
}

/// The failure that ends a signal quietly: nothing to do (no event).
/// `reason` is empty when upstream gives none.
pub fn no_action_required(group: &str, reason: &str) -> ResourceFailure {
    ResourceFailure::NoActionRequired(format!("The resource {group} could not perform scaling action: {reason}"))
}

/// Upstream's exception name of [`no_action_required`] failures.
pub const NO_ACTION_REQUIRED: &str = "NoActionRequired";

/// Upstream `_check_scaling_allowed`: refuses while a scaling runs or
/// the cooldown lasts, else marks the group's `metadata` as scaling.
/// Answers the metadata to write.
pub fn begin_scaling(
    group: &str,
    metadata: &Value,
    cooldown: Option<f64>,
    now: NaiveDateTime,
) -> Result<Value, ResourceFailure> {
    let mut md = match metadata {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    // Only this module writes the flag, always as a boolean.
    if md.get("scaling_in_progress").and_then(Value::as_bool) == Some(true) {
        return Err(no_action_required(group, "due to scaling activity"));
    }
    let cooldown = sanitize_cooldown(cooldown);
    let in_cooldown = || no_action_required(group, &format!("due to cooldown, cooldown {}", py_number(cooldown)));
    let younger_than_cooldown = |text: &str| {
        parse_iso(text).is_some_and(|at| now - at <= Duration::milliseconds(saturating_i64(cooldown * 1000.0)))
    };
    if let Some(end) = first_key(&md, "cooldown_end") {
        if isoformat(now).as_str() < end {
            return Err(in_cooldown());
        }
    } else if cooldown != 0.0 {
        // Groups scaled by older releases kept the last adjustment's time
        // under `cooldown`, or as the metadata's only key.
        let last = match first_key(&md, "cooldown") {
            Some(at) => Some(at.to_string()),
            None => md.keys().find(|k| *k != "scaling_in_progress").cloned(),
        };
        if last.as_deref().is_some_and(younger_than_cooldown) {
            return Err(in_cooldown());
        }
    }
    md.insert("scaling_in_progress".into(), Value::Bool(true));
    Ok(Value::Object(md))
}

/// Upstream `_finished_scaling`: the cooldown starts now (never ending
/// before an earlier one) when the size changed, and the group is no
/// longer scaling.
pub fn finish_scaling(
    metadata: &Value,
    cooldown: Option<f64>,
    reason: &str,
    size_changed: bool,
    now: NaiveDateTime,
) -> Value {
    let mut md = match metadata {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    if size_changed {
        let seconds = sanitize_cooldown(cooldown);
        // A cooldown past the calendar ends at its last instant.
        let until = now.checked_add_signed(Duration::microseconds(saturating_i64(seconds * 1_000_000.0)));
        let mut end = isoformat(until.unwrap_or(NaiveDateTime::MAX));
        if let Some(existing) = first_key(&md, "cooldown_end") {
            if existing > end.as_str() {
                end = existing.to_string();
            }
        }
        md.insert("cooldown_end".into(), json!({ end: reason }));
    }
    md.insert("scaling_in_progress".into(), Value::Bool(false));
    Value::Object(md)
}

/// A number as Heat prints it in messages (`60`, `2.5`).
pub use keelson_pyfmt::int_or_float_repr as py_number;

/// Whether a rolling update has batches left: not once every member of a
/// group already at its target size has the new definition.
pub fn needs_update(target: usize, capacity: usize, updated: usize) -> bool {
    !(updated >= capacity && capacity == target)
}

/// The next batch of a rolling update (upstream `next_batch`): the group's
/// size after it and how many members get the new definition in it. The
/// group may grow above `target` meanwhile so that `min_in_service`
/// members stay up.
pub fn next_batch(
    target: usize,
    capacity: usize,
    updated: usize,
    batch_size: usize,
    min_in_service: usize,
) -> (usize, usize) {
    let efft_min = min_in_service.min(target).min(capacity);
    let efft_batch = batch_size.min(target.saturating_sub(updated));
    (efft_batch + capacity.min(target.saturating_sub(efft_batch)).max(efft_min), efft_batch)
}

/// Every batch of a rolling update from `capacity` members to `target`.
pub fn rolling_batches(
    target: usize,
    mut capacity: usize,
    batch_size: usize,
    min_in_service: usize,
) -> Vec<(usize, usize)> {
    let batch_size = batch_size.max(1);
    let mut batches = Vec::new();
    let mut updated = 0;
    while needs_update(target, capacity, updated) {
        let (next, batch) = next_batch(target, capacity, updated, batch_size, min_in_service);
        if batch == 0 && next == capacity {
            // Nothing a further batch could change.
            break;
        }
        batches.push((next, batch));
        capacity = next;
        updated += batch;
    }
    batches
}

/// The members of the group's next nested template (upstream
/// `member_definitions`): `old` are the current members with their
/// definitions, first to be replaced or removed first; the newest `size`
/// are kept, new ones named by `new_name` fill up to `size`, and up to
/// `num_new` members (new ones included) get `definition`.
pub fn member_definitions(
    old: &[(String, Value)],
    definition: &Value,
    size: usize,
    num_new: usize,
    mut new_name: impl FnMut() -> String,
) -> Vec<(String, Value)> {
    let kept = &old[old.len().saturating_sub(size)..];
    let created = size - kept.len();
    let mut replace = num_new.saturating_sub(created);
    let mut out = Vec::with_capacity(size);
    for (name, old_definition) in kept {
        if old_definition != definition && replace > 0 {
            replace -= 1;
            out.push((name.clone(), definition.clone()));
        } else {
            out.push((name.clone(), old_definition.clone()));
        }
    }
    for _ in 0..created {
        out.push((new_name(), definition.clone()));
    }
    out
}

/// Upstream `timeutils.parse_isoduration`: `PT#H#M#S` (each part
/// optional, whole numbers only) in seconds; None for any other text
/// (upstream's ValueError, see [`ISO_DURATION_ERROR`]).
pub fn parse_isoduration(text: &str) -> Option<u64> {
    let mut rest = text.strip_prefix("PT")?;
    let mut total: u64 = 0;
    // Each designator at most once, in this order.
    for (unit, seconds) in [('H', 3600u64), ('M', 60), ('S', 1)] {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(unit) {
            let n: u64 = rest[..digits].parse().ok()?;
            total = total.saturating_add(n.saturating_mul(seconds));
            rest = &rest[digits + 1..];
        }
    }
    rest.is_empty().then_some(total)
}

/// Upstream's refusal of a duration [`parse_isoduration`] cannot read.
pub const ISO_DURATION_ERROR: &str = "Only ISO 8601 duration format of the form PT#H#M#S is supported.";

/// The nested template of a group holding `members`.
pub fn group_template(members: &[(String, Value)]) -> Value {
    let resources: Map<String, Value> = members.iter().cloned().collect();
    json!({"heat_template_version": "2015-04-30", "resources": resources})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> NaiveDateTime {
        parse_iso(text).unwrap()
    }

    #[test]
    fn capacities_follow_the_adjustment_and_stay_in_bounds() {
        use AdjustmentType::*;
        assert_eq!(new_capacity(3, 1.0, Change, None, 2, 5), 4);
        assert_eq!(new_capacity(5, 1.0, Change, None, 2, 5), 5);
        assert_eq!(new_capacity(2, -1.0, Change, None, 2, 5), 2);
        assert_eq!(new_capacity(3, 9.0, Exact, None, 0, 5), 5);
        // 10% of 3 is 0.3: rounds up to one member; 50% of 4 is exactly 2.
        assert_eq!(new_capacity(3, 10.0, PercentChange, None, 0, 10), 4);
        assert_eq!(new_capacity(3, -10.0, PercentChange, None, 0, 10), 2);
        assert_eq!(new_capacity(4, 50.0, PercentChange, None, 0, 10), 6);
        // 150% of 3 is 4.5: down to 4; a step of 5 raises it.
        assert_eq!(new_capacity(3, 150.0, PercentChange, None, 0, 20), 7);
        assert_eq!(new_capacity(3, 150.0, PercentChange, Some(5), 0, 20), 8);
        assert_eq!(AdjustmentType::parse("percent_change_in_capacity"), Some(PercentChange));
        assert_eq!(AdjustmentType::parse("bogus"), None);
    }

    #[test]
    fn cooldown_end_blocks_until_it_passes() {
        let now = at("2026-01-01T10:00:00");
        let done = finish_scaling(&Value::Null, Some(60.0), "ExactCapacity : 3", true, now);
        assert_eq!(
            done,
            json!({"cooldown_end": {"2026-01-01T10:01:00": "ExactCapacity : 3"}, "scaling_in_progress": false})
        );
        let refused = begin_scaling("g", &done, Some(60.0), at("2026-01-01T10:00:30")).unwrap_err();
        assert_eq!(
            refused,
            ResourceFailure::NoActionRequired(
                "The resource g could not perform scaling action: due to cooldown, cooldown 60".into()
            )
        );
        let started = begin_scaling("g", &done, Some(60.0), at("2026-01-01T10:01:00.5")).unwrap();
        assert_eq!(started["scaling_in_progress"], json!(true));
        // A scaling in progress refuses any other.
        let busy = begin_scaling("g", &started, Some(0.0), at("2026-01-02T00:00:00")).unwrap_err();
        assert!(busy.to_string().contains("due to scaling activity"));
    }

    #[test]
    fn a_later_cooldown_end_is_kept_and_unchanged_sizes_start_none() {
        let md = json!({"cooldown_end": {"2026-01-01T12:00:00": "old"}, "scaling_in_progress": true});
        let done = finish_scaling(&md, Some(0.0), "ChangeInCapacity : 1", true, at("2026-01-01T10:00:00"));
        assert_eq!(done["cooldown_end"], json!({"2026-01-01T12:00:00": "ChangeInCapacity : 1"}));
        let failed = finish_scaling(&md, Some(0.0), "r", false, at("2026-01-01T10:00:00"));
        assert_eq!(failed["cooldown_end"], md["cooldown_end"]);
        assert_eq!(failed["scaling_in_progress"], json!(false));
        // Without a cooldown_end, an old-style last adjustment counts.
        let legacy = json!({"2026-01-01T10:00:00": "ChangeInCapacity : 1"});
        assert!(begin_scaling("g", &legacy, Some(60.0), at("2026-01-01T10:00:10")).is_err());
        assert!(begin_scaling("g", &legacy, Some(60.0), at("2026-01-01T10:02:00")).is_ok());
        assert!(begin_scaling("g", &legacy, None, at("2026-01-01T10:00:10")).is_ok());
    }

    #[test]
    fn isoformat_drops_zero_microseconds() {
        assert_eq!(isoformat(at("2026-01-01T10:00:00")), "2026-01-01T10:00:00");
        assert_eq!(isoformat(at("2026-01-01T10:00:00.25")), "2026-01-01T10:00:00.250000");
    }

    #[test]
    fn batches_follow_upstream_next_batch() {
        // (target, current, updated, batch size, min in service) -> batch,
        // from upstream's rolling update scenarios.
        let cases = [
            ((4, 4, 0, 1, 0), (4, 1)),
            ((4, 4, 0, 1, 4), (5, 1)),
            ((4, 5, 4, 1, 4), (4, 0)),
            ((4, 4, 0, 2, 4), (6, 2)),
            ((5, 6, 4, 2, 4), (5, 1)),
            ((3, 3, 0, 2, 4), (5, 2)),
            ((3, 5, 2, 2, 4), (4, 1)),
            ((4, 4, 0, 5, 0), (4, 4)),
            ((4, 4, 0, 5, 6), (8, 4)),
        ];
        for ((t, c, u, b, m), want) in cases {
            assert_eq!(next_batch(t, c, u, b, m), want, "{t}_{c}_{u}_{b}_{m}");
        }
        assert!(needs_update(4, 5, 5) && needs_update(4, 3, 4) && !needs_update(4, 4, 4));
        assert_eq!(rolling_batches(0, 0, 1, 0), vec![]);
        assert_eq!(rolling_batches(10, 10, 3, 0), vec![(10, 3), (10, 3), (10, 3), (10, 1)]);
        let mut in_service = vec![(11, 1); 10];
        in_service.push((10, 0));
        assert_eq!(rolling_batches(10, 10, 1, 10), in_service);
    }

    #[test]
    fn iso_durations_are_read_as_upstream() {
        assert_eq!(parse_isoduration("PT0S"), Some(0));
        assert_eq!(parse_isoduration("PT1S"), Some(1));
        assert_eq!(parse_isoduration("PT12H30M5S"), Some(45005));
        assert_eq!(parse_isoduration("PT2M"), Some(120));
        assert_eq!(parse_isoduration("PT"), Some(0));
        for bad in ["P1D", "PT1.5S", "PT5S3M", "1S", "PT1X", ""] {
            assert_eq!(parse_isoduration(bad), None, "{bad}");
        }
    }

    #[test]
    fn member_definitions_keep_the_newest_and_replace_the_oldest_first() {
        let old_def = json!({"type": "A"});
        let new_def = json!({"type": "B"});
        let old: Vec<(String, Value)> = ["m1", "m2", "m3"].iter().map(|n| (n.to_string(), old_def.clone())).collect();
        let mut n = 0;
        let mut next = || {
            n += 1;
            format!("new{n}")
        };
        // Shrinking drops the oldest.
        let shrunk = member_definitions(&old, &new_def, 2, 0, &mut next);
        assert_eq!(shrunk, vec![("m2".into(), old_def.clone()), ("m3".into(), old_def.clone())]);
        // Growing adds members with the new definition, the old keep theirs.
        let grown = member_definitions(&old, &new_def, 4, 0, &mut next);
        assert_eq!(grown[..3], old[..]);
        assert_eq!(grown[3], ("new1".to_string(), new_def.clone()));
        // A batch of two replaces the two oldest.
        let batch = member_definitions(&old, &new_def, 3, 2, &mut next);
        assert_eq!(batch.iter().map(|(_, d)| d["type"].as_str().unwrap()).collect::<Vec<_>>(), vec!["B", "B", "A"]);
        let t = group_template(&batch);
        assert_eq!(t["resources"]["m3"], old_def);
    }
}
