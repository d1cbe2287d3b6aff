//! Aggregates: uuids a provider is associated with, created in
//! `placement_aggregates` on first use and never validated against
//! anything else (Nova's host aggregates, for instance).

use keelson_db::{in_list, now, Tx, Value};

use super::{bump_generation, get_provider, write_retrying, Store};
use crate::error::{Error, Result};

/// A provider's aggregates and generation after a read or a write.
#[derive(Debug, Clone)]
pub struct ProviderAggregates {
    pub aggregates: Vec<String>,
    pub generation: i64,
}

/// The (id, uuid) of each aggregate of a provider.
async fn provider_aggregates(tx: &mut Tx, provider_id: i64) -> Result<Vec<(i64, String)>> {
    let rows = tx
        .fetch_all(
            "SELECT pa.id, pa.uuid FROM placement_aggregates pa \
             JOIN resource_provider_aggregates rpa ON rpa.aggregate_id = pa.id \
             WHERE rpa.resource_provider_id = ? ORDER BY pa.id",
            &[provider_id.into()],
        )
        .await?;
    rows.iter().map(|r| Ok((r.i64(0)?, r.string(1)?))).collect()
}

/// The id of an aggregate, created when unknown.
async fn ensure_aggregate(tx: &mut Tx, uuid: &str) -> Result<i64> {
    if let Some(r) = tx.fetch_optional("SELECT id FROM placement_aggregates WHERE uuid = ?", &[uuid.into()]).await? {
        return Ok(r.i64(0)?);
    }
    Ok(tx
        .insert("INSERT INTO placement_aggregates (uuid, created_at) VALUES (?, ?)", &[uuid.into(), now().into()])
        .await?)
}

impl Store {
    pub async fn get_provider_aggregates(&self, uuid: &str) -> Result<ProviderAggregates> {
        let mut tx = self.db.begin_read().await?;
        let rp = get_provider(&mut tx, uuid).await?;
        let aggregates = provider_aggregates(&mut tx, rp.id).await?.into_iter().map(|(_, u)| u).collect();
        tx.commit().await?;
        Ok(ProviderAggregates { aggregates, generation: rp.generation })
    }

    /// Replaces a provider's aggregates. With `generation` (1.19 on) the
    /// provider must still be at it and its generation moves on; without
    /// it, nothing is checked and the generation stays.
    pub async fn set_provider_aggregates(
        &self,
        uuid: &str,
        generation: Option<i64>,
        aggregates: &[String],
    ) -> Result<ProviderAggregates> {
        // Another writer may create the same new aggregate between our
        // lookup and insert; a fresh transaction then finds it.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let write = || self.try_set_provider_aggregates(uuid, generation, aggregates);
            match write_retrying("provider aggregates write", write).await {
                Err(Error::Db(e)) if e.is_unique_violation() && attempts <= 10 => continue,
                Err(Error::Db(e)) if e.is_unique_violation() => {
                    return Err(Error::conflict(format!("Update conflict: {e}")));
                }
                other => return other,
            }
        }
    }

    async fn try_set_provider_aggregates(
        &self,
        uuid: &str,
        generation: Option<i64>,
        aggregates: &[String],
    ) -> Result<ProviderAggregates> {
        let mut tx = self.db.begin().await?;
        let rp = get_provider(&mut tx, uuid).await?;
        if generation.is_some_and(|g| g != rp.generation) {
            return Err(Error::concurrent_update(
                "Resource provider's generation already changed. Please update the generation and try again.",
            ));
        }
        let existing = provider_aggregates(&mut tx, rp.id).await?;
        let to_remove: Vec<i64> = existing.iter().filter(|(_, u)| !aggregates.contains(u)).map(|(id, _)| *id).collect();
        if !to_remove.is_empty() {
            let mut params: Vec<Value> = vec![rp.id.into()];
            params.extend(to_remove.iter().map(|id| Value::Int(*id)));
            tx.execute(
                &format!(
                    "DELETE FROM resource_provider_aggregates WHERE resource_provider_id = ? AND aggregate_id IN ({})",
                    in_list(to_remove.len())
                ),
                &params,
            )
            .await?;
        }
        let ts = now();
        let mut added: Vec<&String> = Vec::new();
        for agg in aggregates {
            if existing.iter().any(|(_, u)| u == agg) || added.contains(&agg) {
                continue;
            }
            added.push(agg);
            let agg_id = ensure_aggregate(&mut tx, agg).await?;
            tx.execute(
                "INSERT INTO resource_provider_aggregates (resource_provider_id, aggregate_id, created_at) VALUES (?, ?, ?)",
                &[rp.id.into(), agg_id.into(), ts.into()],
            )
            .await?;
        }
        let generation = match generation {
            Some(g) => bump_generation(&mut tx, &rp, g).await.map_err(|e| match e {
                Error::Conflict(code, _) if code == crate::error::CONCURRENT_UPDATE => Error::concurrent_update(
                    "Update conflict: Another thread concurrently updated the resource provider data. Please retry your update",
                ),
                other => other,
            })?,
            None => rp.generation,
        };
        let aggregates = provider_aggregates(&mut tx, rp.id).await?.into_iter().map(|(_, u)| u).collect();
        tx.commit().await?;
        Ok(ProviderAggregates { aggregates, generation })
    }
}
