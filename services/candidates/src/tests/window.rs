//! Windowed reads on fleets large enough to need several windows: flat,
//! flat with a sharing provider whose own tree lies past every window, and
//! trees; the answer must be the whole fleet's, candidate for candidate and
//! summary for summary, and the reads must really have been windowed.

use std::sync::atomic::Ordering;

use super::{request, settings, World};
use crate::domain::request::{Request, RequestGroup};
use crate::domain::Strategy;
use crate::store::{Reach, Store};

const AGG: &str = "aaaaaaaa-0000-4000-8000-0000000000c1";

/// `computes` computes of 8 VCPU and 100 DISK_GB; the first `full` have no
/// VCPU left, every seventh is disabled, every third is in `AGG`. With
/// `nested`, each compute's VCPU is on a NUMA child instead.
async fn fleet(computes: usize, full: usize, nested: bool, sharing: bool) -> World {
    let mut w = World::new().await;
    for i in 0..computes {
        let cn = format!("cn{i}");
        w.provider(&cn, None).await;
        let vcpu_on = if nested {
            let numa = format!("numa{i}");
            w.provider(&numa, Some(&cn)).await;
            numa
        } else {
            cn.clone()
        };
        w.inventory(&vcpu_on, "VCPU", 8).await;
        if i < full {
            w.allocate(&vcpu_on, "VCPU", 8).await;
        }
        w.inventory(&cn, "DISK_GB", 100).await;
        if i % 7 == 3 {
            w.add_trait(&cn, "COMPUTE_STATUS_DISABLED").await;
        }
        if i % 3 == 0 {
            w.aggregate(&cn, AGG).await;
        }
        if i % 2 == 0 {
            w.add_trait(&cn, "CUSTOM_EVEN").await;
        }
    }
    if sharing {
        // Created last: its own tree has the greatest root id.
        w.provider("ss", None).await;
        w.aggregate("ss", AGG).await;
        w.inventory("ss", "DISK_GB", 10_000).await;
        w.add_trait("ss", "MISC_SHARES_VIA_AGGREGATE").await;
    }
    // A provider of nothing with an id far past the others: a fleet whose
    // ids span more than a `required` trait's narrowing reads in one pass.
    w.exec(
        "INSERT INTO resource_providers (id, uuid, name, generation, root_provider_id) VALUES (20000, ?, 'far', 0, 20000)",
        &["ffffffff-0000-4000-8000-000000000000".into()],
    )
    .await;
    w
}

fn requests() -> Vec<Request> {
    let mut out = Vec::new();
    for limit in [1, 2, 5, 9, 40] {
        let mut nova = request(vec![RequestGroup::unsuffixed(&[("VCPU", 2), ("DISK_GB", 10)])], None);
        nova.root_forbidden = vec!["COMPUTE_STATUS_DISABLED".into()];
        nova.limit = Some(limit);
        out.push(nova.clone());
        let mut disk_only = request(vec![RequestGroup::unsuffixed(&[("DISK_GB", 50)])], None);
        disk_only.limit = Some(limit);
        out.push(disk_only);
        let mut granular = request(vec![RequestGroup::granular("1", &[("VCPU", 1)])], None);
        granular.limit = Some(limit);
        out.push(granular);
        let mut even = nova.clone();
        even.groups[0].required = vec![vec!["CUSTOM_EVEN".into()]];
        out.push(even);
    }
    out
}

#[tokio::test]
async fn windowed_reads_answer_as_the_whole_fleet() {
    for (nested, sharing) in [(false, false), (false, true), (true, false), (true, true)] {
        let w = fleet(60, 12, nested, sharing).await;
        let store = Store::new(w.db.clone(), settings(Strategy::DepthFirst, false, -1));
        for req in requests() {
            let windowed = store.answer(&req, Reach::Narrowed).await.map(|o| o.named());
            let whole = store.answer(&req, Reach::Whole).await.map(|o| o.named());
            match (windowed, whole) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "nested {nested} sharing {sharing}: {req:?}"),
                (a, b) => panic!("nested {nested} sharing {sharing}: {a:?} against {b:?}"),
            }
        }
        let windows = store.windows.load(Ordering::Relaxed);
        assert!(windows >= 5, "nested {nested} sharing {sharing}: only {windows} answers from a window");
    }
}
