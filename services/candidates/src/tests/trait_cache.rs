//! The summaries' trait sets kept across requests: a store answers from
//! them while a provider's uuid and generation are the ones they were read
//! at, and reads the database again when either changed.

use super::{request, World};
use crate::domain::request::RequestGroup;
use crate::domain::{NamedOutcome, Settings};
use crate::store::Store;

async fn fleet() -> World {
    let mut w = World::new().await;
    for cn in ["cn1", "cn2"] {
        w.provider(cn, None).await;
        w.inventory(cn, "VCPU", 8).await;
        w.add_trait(cn, "HW_CPU_X86_AVX").await;
    }
    w.add_trait("cn2", "CUSTOM_GOLD").await;
    w
}

async fn traits_of(w: &World, store: &Store, provider: &str) -> Vec<String> {
    let req = request(vec![RequestGroup::unsuffixed(&[("VCPU", 1)])], None);
    let o: NamedOutcome = store.allocation_candidates(&req).await.unwrap().named();
    let uuid = w.uuid(provider);
    o.provider_summaries.into_iter().find(|s| s.uuid == uuid).map(|s| s.traits).unwrap_or_default()
}

async fn exec(w: &World, sql: &str) {
    let mut tx = w.db.begin().await.unwrap();
    tx.execute(sql, &[]).await.unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn a_trait_change_is_seen_with_the_generation_it_bumps() {
    let w = fleet().await;
    let store = Store::new(w.db.clone(), Settings::default());
    assert_eq!(traits_of(&w, &store, "cn1").await, ["HW_CPU_X86_AVX"]);
    assert_eq!(traits_of(&w, &store, "cn2").await, ["HW_CPU_X86_AVX", "CUSTOM_GOLD"]);
    assert_eq!(store.trait_cache_len(), 2);

    // As Placement's set_traits does: the traits and the generation in one
    // transaction.
    w.add_trait("cn1", "COMPUTE_STATUS_DISABLED").await;
    exec(&w, "UPDATE resource_providers SET generation = generation + 1 WHERE name = 'cn1'").await;
    // Trait id order: the standard trait was seeded before HW_CPU_X86_AVX.
    assert_eq!(traits_of(&w, &store, "cn1").await, ["COMPUTE_STATUS_DISABLED", "HW_CPU_X86_AVX"]);
    assert_eq!(traits_of(&w, &store, "cn2").await, ["HW_CPU_X86_AVX", "CUSTOM_GOLD"]);
}

#[tokio::test]
async fn the_same_generation_answers_from_the_cache() {
    let w = fleet().await;
    let store = Store::new(w.db.clone(), Settings::default());
    assert_eq!(traits_of(&w, &store, "cn1").await, ["HW_CPU_X86_AVX"]);
    // A write no Placement writer makes (traits changed, generation not):
    // what the cache relies on, shown by its not being seen.
    w.add_trait("cn1", "CUSTOM_GOLD").await;
    assert_eq!(traits_of(&w, &store, "cn1").await, ["HW_CPU_X86_AVX"]);
    // Another store (another process) reads the database.
    let other = Store::new(w.db.clone(), Settings::default());
    assert_eq!(traits_of(&w, &other, "cn1").await, ["HW_CPU_X86_AVX", "CUSTOM_GOLD"]);
}

#[tokio::test]
async fn an_id_given_to_another_provider_is_not_taken_for_the_old_one() {
    let w = fleet().await;
    let store = Store::new(w.db.clone(), Settings::default());
    assert_eq!(traits_of(&w, &store, "cn1").await, ["HW_CPU_X86_AVX"]);
    // The same id and generation under another uuid (an id a MySQL 5.7
    // server handed out again after a restart), with other traits.
    exec(&w, "DELETE FROM resource_provider_traits WHERE resource_provider_id = (SELECT id FROM resource_providers WHERE name = 'cn1')").await;
    w.add_trait("cn1", "CUSTOM_GOLD").await;
    exec(&w, "UPDATE resource_providers SET uuid = '00000000-0000-4000-8000-0000000000ff' WHERE name = 'cn1'").await;
    let req = request(vec![RequestGroup::unsuffixed(&[("VCPU", 1)])], None);
    let o = store.allocation_candidates(&req).await.unwrap().named();
    let recreated = o.provider_summaries.iter().find(|s| s.uuid == "00000000-0000-4000-8000-0000000000ff").unwrap();
    assert_eq!(recreated.traits, ["CUSTOM_GOLD"]);
}

#[tokio::test]
async fn a_provider_without_traits_is_kept_as_such() {
    let mut w = fleet().await;
    w.provider("bare", None).await;
    w.inventory("bare", "VCPU", 8).await;
    let store = Store::new(w.db.clone(), Settings::default());
    assert!(traits_of(&w, &store, "bare").await.is_empty());
    assert_eq!(store.trait_cache_len(), 3);
    assert!(traits_of(&w, &store, "bare").await.is_empty());
}
