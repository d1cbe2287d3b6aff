//! Aggregates: uuids a provider is associated with, created in
//! `placement_aggregates` on first use and never validated against
//! anything else (Nova's host aggregates, for instance).

use std::collections::{HashMap, HashSet};

use keelson_db::{in_list, now, Tx, Value, IN_LIST_CHUNK};

use super::{bump_generation, get_provider, write_retrying, Store, WRITE_CONFLICT};
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

/// The ids of aggregates by uuid, those unknown created (in the order
/// given). A concurrent creator of the same aggregate makes the insert a
/// unique violation, which the caller answers with a fresh transaction.
async fn ensure_aggregates(tx: &mut Tx, uuids: &[&String]) -> Result<HashMap<String, i64>> {
    let mut ids = aggregate_ids(tx, uuids).await?;
    let missing: Vec<&String> = uuids.iter().copied().filter(|u| !ids.contains_key(*u)).collect();
    if !missing.is_empty() {
        let ts = now();
        let rows: Vec<Value> = missing.iter().flat_map(|u| [Value::from(u.as_str()), ts.into()]).collect();
        tx.insert_rows("INSERT INTO placement_aggregates (uuid, created_at)", 2, &rows).await?;
        ids.extend(aggregate_ids(tx, &missing).await?);
    }
    Ok(ids)
}

/// The ids of the known aggregates among `uuids`.
async fn aggregate_ids(tx: &mut Tx, uuids: &[&String]) -> Result<HashMap<String, i64>> {
    let mut ids = HashMap::with_capacity(uuids.len());
    for chunk in uuids.chunks(IN_LIST_CHUNK) {
        let params: Vec<Value> = chunk.iter().map(|u| Value::from(u.as_str())).collect();
        let sql = format!("SELECT id, uuid FROM placement_aggregates WHERE uuid IN ({})", in_list(chunk.len()));
        for r in tx.fetch_all(&sql, &params).await? {
            ids.insert(r.string(1)?, r.i64(0)?);
        }
    }
    Ok(ids)
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
        let requested: HashSet<&String> = aggregates.iter().collect();
        let to_remove: Vec<i64> = existing.iter().filter(|(_, u)| !requested.contains(u)).map(|(id, _)| *id).collect();
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
        // New links in request order, once each.
        let mut seen: HashSet<&String> = existing.iter().map(|(_, u)| u).collect();
        let added: Vec<&String> = aggregates.iter().filter(|agg| seen.insert(*agg)).collect();
        if !added.is_empty() {
            let ids = ensure_aggregates(&mut tx, &added).await?;
            let ts = now();
            let mut rows: Vec<Value> = Vec::with_capacity(3 * added.len());
            for agg in &added {
                let id = *ids
                    .get(*agg)
                    .ok_or_else(|| Error::conflict(format!("Update conflict: aggregate {agg} vanished")))?;
                rows.extend([rp.id.into(), Value::Int(id), ts.into()]);
            }
            tx.insert_rows(
                "INSERT INTO resource_provider_aggregates (resource_provider_id, aggregate_id, created_at)",
                3,
                &rows,
            )
            .await?;
        }
        let generation = match generation {
            Some(g) => bump_generation(&mut tx, &rp, g).await.map_err(|e| match e {
                Error::Conflict(code, _) if code == crate::error::CONCURRENT_UPDATE => {
                    Error::concurrent_update(WRITE_CONFLICT)
                }
                other => other,
            })?,
            None => rp.generation,
        };
        let aggregates = provider_aggregates(&mut tx, rp.id).await?.into_iter().map(|(_, u)| u).collect();
        tx.commit().await?;
        Ok(ProviderAggregates { aggregates, generation })
    }
}
