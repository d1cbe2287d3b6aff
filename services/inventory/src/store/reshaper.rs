//! The reshaper: moves inventory and the allocations against it between
//! providers (typically from a root to new children) in one transaction.
//!
//! Inventories cannot be removed while allocated, and allocations cannot
//! be made against inventory that does not exist yet, so the move runs in
//! three steps, as upstream's: each provider first gets the union of its
//! old and new inventories, then the allocations are replaced, then each
//! provider gets exactly its new inventories. Each step moves the
//! generation of the providers it touches.

use std::collections::{BTreeSet, HashMap};

use super::allocations::{
    backoff, ensure_consumers, increment_generations, plan_allocations, plan_providers, provider_states,
    update_consumers, write_planned, ConsumerWrite, ProviderState, WriteFailure, WriteOp,
};
use super::inventories::{
    in_use_message, increment_provider_generation, provider_inventories, replace_inventories, InventoryRecord,
    ReplaceFailure, PROVIDER_CONCURRENT_UPDATE,
};
use super::{find_provider, ProviderRow, Store};
use crate::error::{Error, Result, CONCURRENT_UPDATE, INVENTORY_INUSE};

/// Database retries of a reshape (deadlock, serialization failure, lost
/// insert race); the generations are checked again on each attempt.
const DB_RETRIES: u32 = 5;

/// The inventories one provider should have after a reshape.
#[derive(Debug, Clone, PartialEq)]
pub struct ReshapeInventories {
    pub provider_uuid: String,
    /// The generation the caller computed the change from.
    pub generation: i64,
    pub inventories: Vec<InventoryRecord>,
}

/// Upstream's reshaper texts for a failed inventory replacement.
fn replace_failure(provider_uuid: &str, f: ReplaceFailure) -> WriteFailure {
    match f {
        ReplaceFailure::UnknownClass(name) => {
            WriteFailure::Fail(Error::BadRequest(format!("malformed reshaper data: No such resource class {name}.")))
        }
        ReplaceFailure::InUse(classes) => WriteFailure::Fail(Error::Conflict(
            INVENTORY_INUSE,
            format!("update conflict: {}", in_use_message(&classes, provider_uuid)),
        )),
        ReplaceFailure::Missing(name) => WriteFailure::Fail(Error::BadRequest(format!(
            "malformed reshaper data: No inventory of class {name} found."
        ))),
        ReplaceFailure::Db(e) => e.into(),
    }
}

/// Sets a provider's inventories and moves its generation on.
async fn set_provider_inventories(
    tx: &mut keelson_db::Tx,
    provider: &ProviderRow,
    state: &mut ProviderState,
    list: &[InventoryRecord],
) -> std::result::Result<(), WriteFailure> {
    replace_inventories(tx, provider, list).await.map_err(|f| replace_failure(&provider.uuid, f))?;
    if !increment_provider_generation(tx, state.id, state.generation).await? {
        return Err(WriteFailure::Fail(Error::Conflict(
            CONCURRENT_UPDATE,
            format!("update conflict: {PROVIDER_CONCURRENT_UPDATE}"),
        )));
    }
    state.generation += 1;
    Ok(())
}

impl Store {
    /// POST /reshaper: replaces the inventories of some providers and the
    /// allocations of some consumers atomically.
    pub async fn reshape(&self, inventories: &[ReshapeInventories], consumers: &[ConsumerWrite]) -> Result<()> {
        let mut db_retries = 0;
        loop {
            let mut tx = self.db.begin().await?;
            let outcome = self.reshape_once(&mut tx, inventories, consumers).await;
            let failure = match outcome {
                Ok(()) => match tx.commit().await {
                    Ok(()) => return Ok(()),
                    Err(e) => WriteFailure::from(e),
                },
                Err(f) => f,
            };
            match failure {
                WriteFailure::Retry(e) => {
                    db_retries += 1;
                    if db_retries > DB_RETRIES {
                        return Err(Error::Db(e));
                    }
                    backoff(db_retries).await;
                }
                // The caller's generations were checked: a provider that
                // moved since is the caller's conflict, not retried here.
                WriteFailure::ProviderConflict => {
                    return Err(WriteOp::Reshape.concurrent_update(PROVIDER_CONCURRENT_UPDATE))
                }
                WriteFailure::Fail(e) => return Err(e),
            }
        }
    }

    async fn reshape_once(
        &self,
        tx: &mut keelson_db::Tx,
        inventories: &[ReshapeInventories],
        consumers: &[ConsumerWrite],
    ) -> std::result::Result<(), WriteFailure> {
        let mut targets: Vec<(ProviderRow, &ReshapeInventories)> = Vec::with_capacity(inventories.len());
        for inv in inventories {
            let uuid = &inv.provider_uuid;
            let Some(provider) = find_provider(tx, uuid).await? else {
                return Err(WriteFailure::Fail(Error::BadRequestCode(
                    crate::error::PROVIDER_NOT_FOUND,
                    format!("Resource provider {uuid} in inventories not found: No resource provider with uuid {uuid} found"),
                )));
            };
            if provider.generation != inv.generation {
                return Err(WriteFailure::Fail(Error::concurrent_update(format!(
                    "resource provider generation conflict for provider {uuid}: actual: {}, given: {}",
                    provider.generation, inv.generation
                ))));
            }
            targets.push((provider, inv));
        }

        let mut ensured = ensure_consumers(tx, consumers, &self.settings).await?;
        // Every provider the allocations may touch, as this transaction
        // sees it; the reshape's own steps move the generations on.
        let mut uuids: BTreeSet<String> =
            consumers.iter().flat_map(|c| c.allocations.iter().map(|a| a.provider_uuid.clone())).collect();
        for c in consumers {
            let rows = tx
                .fetch_all(
                    "SELECT DISTINCT rp.uuid FROM allocations a JOIN resource_providers rp ON rp.id = a.resource_provider_id \
                     WHERE a.consumer_id = ?",
                    &[c.uuid.as_str().into()],
                )
                .await?;
            for r in rows {
                uuids.insert(r.string(0)?);
            }
        }
        let mut states: HashMap<String, ProviderState> = provider_states(tx, &uuids).await?;
        for (provider, _) in &targets {
            states.insert(provider.uuid.clone(), ProviderState { id: provider.id, generation: provider.generation });
        }
        let plan = plan_allocations(tx, consumers, &states).await?;
        update_consumers(tx, &mut ensured).await?;

        // Step 1: old and new inventories together.
        for (provider, wanted) in &targets {
            if wanted.inventories.is_empty() {
                continue;
            }
            let mut union: Vec<InventoryRecord> =
                provider_inventories(tx, provider.id).await?.into_iter().map(|(_, i)| i).collect();
            for inv in &wanted.inventories {
                match union.iter_mut().find(|u| u.resource_class == inv.resource_class) {
                    Some(slot) => *slot = inv.clone(),
                    None => union.push(inv.clone()),
                }
            }
            let state = states.get_mut(&provider.uuid).ok_or(WriteFailure::ProviderConflict)?;
            set_provider_inventories(tx, provider, state, &union).await?;
        }
        // Step 2: the allocations.
        write_planned(tx, WriteOp::Reshape, &plan, &ensured, &states).await?;
        increment_generations(tx, &mut states, plan_providers(&plan)).await?;
        // Step 3: exactly the new inventories.
        for (provider, wanted) in &targets {
            let state = states.get_mut(&provider.uuid).ok_or(WriteFailure::ProviderConflict)?;
            set_provider_inventories(tx, provider, state, &wanted.inventories).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::allocations::{GenerationCheck, ProviderAmounts};
    use crate::store::consumers::test_support::{provider, store};

    fn alloc(consumer: &str, rp: &str, res: &[(&str, i64)], generation: Option<i64>) -> ConsumerWrite {
        ConsumerWrite {
            uuid: consumer.into(),
            allocations: if res.is_empty() {
                vec![]
            } else {
                vec![ProviderAmounts {
                    provider_uuid: rp.into(),
                    resources: res.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
                }]
            },
            project_id: Some("proj".into()),
            user_id: Some("user".into()),
            generation: GenerationCheck::Expect(generation),
            consumer_type: None,
        }
    }

    #[tokio::test]
    async fn moves_inventory_and_allocations_to_a_child() {
        let store = store().await;
        let root = provider(&store, "root").await;
        let child = provider(&store, "child").await;
        store
            .set_inventories(
                &root,
                0,
                vec![InventoryRecord::new("VCPU", 8), InventoryRecord::new("DISK_GB", 100)],
                false,
            )
            .await
            .unwrap();
        store
            .set_allocations(WriteOp::Many, &[alloc("c1", &root, &[("VCPU", 2), ("DISK_GB", 10)], None)])
            .await
            .unwrap();

        // Stale generation.
        let stale = [ReshapeInventories { provider_uuid: root.clone(), generation: 0, inventories: vec![] }];
        let e = store.reshape(&stale, &[]).await.unwrap_err();
        assert!(matches!(e, Error::Conflict(CONCURRENT_UPDATE, ref d) if d.ends_with("actual: 2, given: 0")));

        // Removing VCPU from the root without moving its allocation.
        let drop_vcpu = [ReshapeInventories {
            provider_uuid: root.clone(),
            generation: 2,
            inventories: vec![InventoryRecord::new("DISK_GB", 100)],
        }];
        let e = store.reshape(&drop_vcpu, &[]).await.unwrap_err();
        assert!(matches!(e, Error::Conflict(INVENTORY_INUSE, _)), "{e:?}");

        let moved = [
            ReshapeInventories {
                provider_uuid: root.clone(),
                generation: 2,
                inventories: vec![InventoryRecord::new("DISK_GB", 100)],
            },
            ReshapeInventories {
                provider_uuid: child.clone(),
                generation: 0,
                inventories: vec![InventoryRecord::new("VCPU", 8)],
            },
        ];
        let c1 = ConsumerWrite {
            allocations: vec![
                ProviderAmounts { provider_uuid: root.clone(), resources: vec![("DISK_GB".into(), 10)] },
                ProviderAmounts { provider_uuid: child.clone(), resources: vec![("VCPU".into(), 2)] },
            ],
            ..alloc("c1", &root, &[], Some(1))
        };
        store.reshape(&moved, &[c1]).await.unwrap();
        let (rp, usage) = store.get_provider_usages(&root).await.unwrap();
        assert_eq!((rp.generation, usage.get("VCPU"), usage["DISK_GB"]), (5, None, 10));
        let (rp, usage) = store.get_provider_usages(&child).await.unwrap();
        assert_eq!((rp.generation, usage["VCPU"]), (3, 2));
        assert_eq!(store.get_consumer_allocations("c1").await.unwrap().consumer.unwrap().generation, 2);

        // An unknown provider in the inventories.
        let ghost = [ReshapeInventories { provider_uuid: "ghost".into(), generation: 0, inventories: vec![] }];
        let e = store.reshape(&ghost, &[]).await.unwrap_err();
        assert!(matches!(e, Error::BadRequestCode(crate::error::PROVIDER_NOT_FOUND, _)));
    }
}
