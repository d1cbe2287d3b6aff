//! The part of the database one request needs, in memory: the store loads
//! it in a few queries, the algorithm only reads it.

use rustc_hash::{FxHashMap, FxHashSet};

pub type ProviderId = i64;
pub type ClassId = i64;
pub type TraitId = i64;
pub type AggregateId = i64;

/// One inventory record with what is already allocated from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Inventory {
    pub total: i64,
    pub reserved: i64,
    pub min_unit: i64,
    pub max_unit: i64,
    pub step_size: i64,
    pub allocation_ratio: f64,
    pub used: i64,
}

impl Inventory {
    /// `int((total - reserved) * allocation_ratio)`, truncated as Python's
    /// `int()` does.
    pub fn capacity(&self) -> i64 {
        // `as` saturates a product past i64 (allocation_ratio goes to 3.4e38).
        #[allow(clippy::cast_possible_truncation)]
        let capacity = (self.total.saturating_sub(self.reserved) as f64 * self.allocation_ratio) as i64;
        capacity
    }

    /// Whether one allocation of `amount` fits on its own.
    pub fn fits(&self, amount: i64) -> bool {
        self.misfit(amount).is_none()
    }

    /// The first inventory rule one allocation of `amount` breaks, if any.
    pub fn misfit(&self, amount: i64) -> Option<Misfit> {
        if self.step_size <= 0 || amount % self.step_size != 0 {
            Some(Misfit::StepSize(self.step_size))
        } else if amount < self.min_unit {
            Some(Misfit::MinUnit(self.min_unit))
        } else if amount > self.max_unit {
            Some(Misfit::MaxUnit(self.max_unit))
        } else if self.used.saturating_add(amount) > self.capacity() {
            Some(Misfit::Capacity { free: self.capacity().saturating_sub(self.used).max(0) })
        } else {
            None
        }
    }

    /// Whether several groups' amounts added up (`total` on this provider
    /// and class) still fit: the re-check after consolidation.
    pub fn fits_total(&self, total: i64) -> bool {
        total <= self.max_unit && self.used.saturating_add(total) <= self.capacity()
    }

    /// The most any combination of groups can take from this record.
    pub fn headroom(&self) -> i64 {
        self.capacity().saturating_sub(self.used).min(self.max_unit).max(0)
    }
}

/// Why an inventory refuses an amount, with the inventory's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Misfit {
    /// Not a multiple of `step_size`.
    StepSize(i64),
    /// Below `min_unit`.
    MinUnit(i64),
    /// Above `max_unit`.
    MaxUnit(i64),
    /// More than is free (capacity less usage).
    Capacity { free: i64 },
}

/// Names the request uses, resolved to database ids (names not found are
/// absent; the algorithm decides, in upstream's order, whether that is a
/// 400 or an empty answer).
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub classes: FxHashMap<String, ClassId>,
    pub traits: FxHashMap<String, TraitId>,
    pub aggregates: FxHashMap<String, AggregateId>,
    /// `in_tree` uuids found → the root of their tree.
    pub in_tree_roots: FxHashMap<String, ProviderId>,
}

/// The providers, inventories, traits and aggregates a request can touch.
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    /// Whether any provider has a parent (nested trees exist at all).
    pub has_trees: bool,
    /// Every provider with `MISC_SHARES_VIA_AGGREGATE`.
    pub sharing: FxHashSet<ProviderId>,
    /// Inventories with their usage: of the requested classes, or of
    /// every class when the summaries show them all.
    pub inventories: FxHashMap<(ProviderId, ClassId), Inventory>,
    /// Providers with an inventory of each requested class, ascending.
    pub providers_by_class: FxHashMap<ClassId, Vec<ProviderId>>,
    /// The root of every provider loaded.
    pub root_of: FxHashMap<ProviderId, ProviderId>,
    /// Class names of the inventories loaded.
    pub class_names: FxHashMap<ClassId, String>,
    /// The request's traits, as (provider, trait) pairs (other traits are
    /// not loaded; one set of pairs rather than a set per provider).
    pub traits: FxHashSet<(ProviderId, TraitId)>,
    /// The request's aggregates, by provider (others are not loaded).
    pub aggregates: FxHashMap<ProviderId, FxHashSet<AggregateId>>,
    /// For sharing providers: the roots of every tree that shares one of
    /// their aggregates (their own root included), ascending.
    pub sharing_anchors: FxHashMap<ProviderId, Vec<ProviderId>>,
    /// Every root provider; loaded only for `root_required`.
    pub roots: Option<Vec<ProviderId>>,
    /// Every provider, ascending; loaded only for resourceless groups.
    pub all_providers: Option<Vec<ProviderId>>,
}

impl Fleet {
    /// Every provider loaded: those with an inventory of a requested class
    /// (and every provider, for a resourceless group). What an explanation
    /// accounts for.
    pub fn loaded_providers(&self) -> impl Iterator<Item = ProviderId> + '_ {
        self.root_of.keys().copied()
    }

    pub fn root(&self, provider: ProviderId) -> ProviderId {
        self.root_of.get(&provider).copied().unwrap_or(provider)
    }

    pub fn has_trait(&self, provider: ProviderId, t: TraitId) -> bool {
        self.traits.contains(&(provider, t))
    }

    pub fn in_aggregate(&self, provider: ProviderId, a: AggregateId) -> bool {
        self.aggregates.get(&provider).is_some_and(|aggs| aggs.contains(&a))
    }

    /// Adds what `other`, read from more trees of the same snapshot, holds
    /// (a provider read twice reads the same both times). The tables read
    /// whole for each part (the sharing providers, their anchors, the
    /// request's aggregates, the class names) are taken from `other`.
    pub fn absorb(&mut self, other: Fleet) {
        self.inventories.extend(other.inventories);
        for (class, providers) in other.providers_by_class {
            let list = self.providers_by_class.entry(class).or_default();
            list.extend(providers);
            list.sort_unstable();
            list.dedup();
        }
        self.root_of.extend(other.root_of);
        self.traits.extend(other.traits);
        self.aggregates = other.aggregates;
        self.sharing = other.sharing;
        self.sharing_anchors = other.sharing_anchors;
        self.class_names = other.class_names;
        self.roots = match (self.roots.take(), other.roots) {
            (Some(mut mine), Some(more)) => {
                mine.extend(more);
                mine.sort_unstable();
                mine.dedup();
                Some(mine)
            }
            (mine, more) => mine.or(more),
        };
        self.all_providers = other.all_providers.or(self.all_providers.take());
    }
}

/// A provider of a tree in play: what the answer names and same_subtree
/// walks.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeProvider {
    pub uuid: String,
    pub parent: Option<ProviderId>,
    pub root: ProviderId,
    /// What the provider's cached traits are checked against.
    pub generation: Option<i64>,
}

/// Every provider of the trees in play, by id.
pub type Trees = FxHashMap<ProviderId, TreeProvider>;

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(total: i64, reserved: i64, ratio: f64, used: i64) -> Inventory {
        Inventory { total, reserved, min_unit: 1, max_unit: total, step_size: 1, allocation_ratio: ratio, used }
    }

    #[test]
    fn capacity_truncates() {
        assert_eq!(inv(24, 0, 16.0, 0).capacity(), 384);
        assert_eq!(inv(10, 1, 1.5, 0).capacity(), 13);
        assert_eq!(inv(2000, 100, 1.0, 0).capacity(), 1900);
    }

    #[test]
    fn fit_rules() {
        let mut i = inv(8, 0, 1.0, 6);
        assert!(i.fits(2));
        assert!(!i.fits(3));
        i.step_size = 2;
        assert!(!i.fits(1));
        i.min_unit = 4;
        i.used = 0;
        assert!(!i.fits(2));
        assert!(i.fits(4));
        assert_eq!(i.misfit(2), Some(Misfit::MinUnit(4)));
        i.max_unit = 4;
        assert!(!i.fits(6));
        assert_eq!(i.misfit(6), Some(Misfit::MaxUnit(4)));
        assert_eq!(i.misfit(3), Some(Misfit::StepSize(2)));
        i.used = 6;
        assert_eq!(i.misfit(4), Some(Misfit::Capacity { free: 2 }));
        i.used = 0;
        assert!(!i.fits_total(6));
        assert_eq!(i.headroom(), 4);
    }
}
