//! The summaries' traits: each summarised provider's trait ids, kept
//! across requests by provider and generation, and the names of the
//! traits the answer shows.
//!
//! Why a generation is enough: every writer of a provider's traits bumps
//! the provider's generation in the transaction that changes them
//! (Placement's `set_traits`, keelson's inventory service, hence Nova's
//! and Neutron's trait updates and the COMPUTE_STATUS_DISABLED toggle), so
//! a provider at one generation has one trait set, whichever process wrote
//! it and whenever it is read. The cache also compares the provider's uuid,
//! so that an id a server hands out again (MySQL before 8.0 resets
//! AUTO_INCREMENT to the highest id at restart; MariaDB since 10.2.4,
//! PostgreSQL and keelson's SQLite tables never reuse one) is not taken for
//! the provider that had it. A cached set is read with its generation in
//! one statement, hence from one snapshot, whatever the isolation level.

use std::sync::{Arc, Mutex, PoisonError};

use rustc_hash::{FxHashMap, FxHashSet};

use keelson_db::{in_list, Dialect, Tx};

use super::{ids, IN_CHUNK, MAX_IN_LIST};
use crate::domain::fleet::{ProviderId, TraitId, Trees};
use crate::error::Result;

/// Past this many providers the cache starts afresh: a bound on its memory
/// (an entry is about 100 bytes; trait sets are shared between providers
/// that have the same traits, as a fleet's computes mostly do).
const MAX_CACHED_PROVIDERS: usize = 250_000;

/// The summarised providers' trait ids (ascending), and the names of
/// those traits.
pub(super) type ProviderTraits = (FxHashMap<ProviderId, Arc<[TraitId]>>, FxHashMap<TraitId, String>);

/// Provider trait sets by id, valid at the generation they were read at.
#[derive(Debug, Default)]
pub(crate) struct TraitCache {
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_provider: FxHashMap<ProviderId, Cached>,
    /// Each distinct trait set once.
    sets: FxHashSet<Arc<[TraitId]>>,
}

#[derive(Debug)]
struct Cached {
    uuid: Box<str>,
    generation: i64,
    traits: Arc<[TraitId]>,
}

/// A provider's traits as one statement read them, with its identity.
struct Read {
    provider: ProviderId,
    uuid: String,
    generation: Option<i64>,
    traits: Vec<TraitId>,
}

impl TraitCache {
    /// The cached sets of the `providers` whose uuid and generation in
    /// `trees` match the cache's; the others are returned as misses.
    fn lookup(
        &self,
        providers: &[ProviderId],
        trees: &Trees,
    ) -> (FxHashMap<ProviderId, Arc<[TraitId]>>, Vec<ProviderId>) {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut hits = FxHashMap::with_capacity_and_hasher(providers.len(), Default::default());
        let mut misses = Vec::new();
        for p in providers {
            let cached = trees.get(p).and_then(|t| {
                let c = entries.by_provider.get(p)?;
                (Some(c.generation) == t.generation && *c.uuid == *t.uuid).then(|| c.traits.clone())
            });
            match cached {
                Some(traits) => {
                    hits.insert(*p, traits);
                }
                None => misses.push(*p),
            }
        }
        (hits, misses)
    }

    /// Keeps what was read (a provider without a generation is not kept)
    /// and answers each provider's set.
    fn keep(&self, read: Vec<Read>, into: &mut FxHashMap<ProviderId, Arc<[TraitId]>>) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.by_provider.len() + read.len() > MAX_CACHED_PROVIDERS || entries.sets.len() > MAX_CACHED_PROVIDERS {
            *entries = Entries::default();
        }
        for r in read {
            let traits = match entries.sets.get(r.traits.as_slice()) {
                Some(shared) => shared.clone(),
                None => {
                    let set: Arc<[TraitId]> = r.traits.into();
                    entries.sets.insert(set.clone());
                    set
                }
            };
            if let Some(generation) = r.generation {
                let cached = Cached { uuid: r.uuid.into_boxed_str(), generation, traits: traits.clone() };
                entries.by_provider.insert(r.provider, cached);
            }
            into.insert(r.provider, traits);
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).by_provider.len()
    }
}

/// The traits of the summarised `providers` (ascending), from the cache
/// where the provider's generation in `trees` is the one cached, else from
/// the database; then the names of the traits they have (a fleet's
/// providers share a handful of traits: each name once).
pub(super) async fn load_traits(
    tx: &mut Tx,
    cache: &TraitCache,
    providers: &[ProviderId],
    trees: &Trees,
) -> Result<ProviderTraits> {
    let (mut traits, misses) = cache.lookup(providers, trees);
    if !misses.is_empty() {
        let read = read_traits(tx, &misses).await?;
        cache.keep(read, &mut traits);
    }

    let mut trait_names: FxHashMap<TraitId, String> = FxHashMap::default();
    let used: std::collections::BTreeSet<TraitId> = traits.values().flat_map(|t| t.iter().copied()).collect();
    if used.is_empty() {
        return Ok((traits, trait_names));
    }
    let (filter, params) = if used.len() > MAX_IN_LIST {
        ("1 = 1".to_string(), Vec::new())
    } else {
        (format!("id IN ({})", in_list(used.len())), ids(used.iter().copied()))
    };
    tx.for_each_row(&format!("SELECT id, name FROM traits WHERE {filter}"), &params, |r| -> Result<()> {
        let id = r.i64(0)?;
        if used.contains(&id) {
            trait_names.insert(id, r.string(1)?);
        }
        Ok(())
    })
    .await?;
    Ok((traits, trait_names))
}

/// Each provider's traits with its uuid and generation, one row per
/// provider (a list of trait ids with their count: a provider has dozens,
/// and a row costs the driver more than its ids cost to parse). A list the
/// server cut short (MySQL's `group_concat_max_len`) does not match its
/// count; those providers are read again row by row, their generation on
/// every row.
async fn read_traits(tx: &mut Tx, providers: &[ProviderId]) -> Result<Vec<Read>> {
    let list = match tx.dialect {
        Dialect::MySql => "CAST(GROUP_CONCAT(t.trait_id) AS CHAR)",
        Dialect::Postgres => "string_agg(CAST(t.trait_id AS TEXT), ',')",
        Dialect::Sqlite => "group_concat(t.trait_id)",
    };
    let mut read: Vec<Read> = Vec::with_capacity(providers.len());
    let mut cut_short: Vec<ProviderId> = Vec::new();
    for chunk in providers.chunks(IN_CHUNK) {
        let sql = format!(
            "SELECT rp.id, rp.uuid, rp.generation, COUNT(t.trait_id), {list} FROM resource_providers rp \
             LEFT JOIN resource_provider_traits t ON t.resource_provider_id = rp.id \
             WHERE rp.id IN ({}) GROUP BY rp.id, rp.uuid, rp.generation",
            in_list(chunk.len())
        );
        tx.for_each_row(&sql, &ids(chunk.iter().copied()), |r| -> Result<()> {
            let provider = r.i64(0)?;
            let count = r.i64(3)?;
            let mut traits: Vec<TraitId> = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
            for id in r.opt_string(4)?.unwrap_or_default().split(',').filter(|s| !s.is_empty()) {
                match id.trim().parse::<TraitId>() {
                    Ok(t) => traits.push(t),
                    Err(_) => break,
                }
            }
            if i64::try_from(traits.len()).ok() != Some(count) {
                cut_short.push(provider);
                return Ok(());
            }
            traits.sort_unstable();
            read.push(Read { provider, uuid: r.string(1)?, generation: r.opt_i64(2)?, traits });
            Ok(())
        })
        .await?;
    }
    for chunk in cut_short.chunks(IN_CHUNK) {
        let sql = format!(
            "SELECT rp.id, rp.uuid, rp.generation, t.trait_id FROM resource_providers rp \
             JOIN resource_provider_traits t ON t.resource_provider_id = rp.id WHERE rp.id IN ({}) \
             ORDER BY rp.id, t.trait_id",
            in_list(chunk.len())
        );
        tx.for_each_row(&sql, &ids(chunk.iter().copied()), |r| -> Result<()> {
            let provider = r.i64(0)?;
            let trait_id = r.i64(3)?;
            match read.last_mut() {
                Some(last) if last.provider == provider => last.traits.push(trait_id),
                _ => {
                    read.push(Read { provider, uuid: r.string(1)?, generation: r.opt_i64(2)?, traits: vec![trait_id] })
                }
            }
            Ok(())
        })
        .await?;
    }
    Ok(read)
}
