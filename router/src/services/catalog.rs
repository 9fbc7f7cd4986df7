//! Definitions kept in a home group and copied to other groups: document
//! collections and object buckets (copied to every data group) and vector
//! collections (copied to the shards their layout names). The home group decides
//! whether a name exists — its write settles a race between two creates — and
//! the copies let every group check and hold its part of the data.
//!
//! The steps every such definition shares are here: where a name's home is and
//! which groups hold copies, writing to or asking all the copies at once, and
//! dropping the copies before the home so that an interrupted drop leaves the
//! name in place, to be dropped again. What a definition is and how its copies
//! are repaired stays with its model (`handlers::{document, object, vector}`).

use futures::future::join_all;
use tessera_api::GroupId;
use tessera_api::routing::RoutingKey;
use tessera_api::rpc::Consistency;

use crate::cluster::ReadPrefs;
use crate::cluster::typed::{self, Model};
use crate::error::ApiError;
use crate::state::AppState;

/// One definition's home group and the groups holding its copies.
pub struct Catalog<'a> {
    state: &'a AppState,
    /// The group whose copy decides whether the definition exists.
    pub home: GroupId,
    /// Every other group holding a copy.
    pub others: Vec<GroupId>,
}

/// One group's outcome; a refusal is already an [`ApiError`] (a missing copy is
/// `ApiError::NotFound`).
pub type Outcome<T> = (GroupId, Result<T, ApiError>);

impl<'a> Catalog<'a> {
    /// The definition homed where `key` routes, copied to every other data group.
    pub fn everywhere(state: &'a AppState, key: &RoutingKey<'_>) -> Result<Catalog<'a>, ApiError> {
        let home = state.cluster.group_for(key)?;
        let others = state.cluster.data_groups()?.into_iter().filter(|g| *g != home).collect();
        Ok(Catalog { state, home, others })
    }

    /// The definition homed at `shards[0]`, copied to the rest of `shards`.
    pub fn on_shards(state: &'a AppState, shards: &[GroupId]) -> Option<Catalog<'a>> {
        let (home, others) = shards.split_first()?;
        Some(Catalog { state, home: *home, others: others.to_vec() })
    }

    /// Writes `op()` to every copy at once.
    pub async fn write_copies<M: Model>(&self, op: impl Fn() -> M::Op, c: Consistency) -> Vec<Outcome<M::Reply>> {
        self.write_to::<M>(&self.others, op, c).await
    }

    /// Writes `op()` to `groups` at once.
    pub async fn write_to<M: Model>(&self, groups: &[GroupId], op: impl Fn() -> M::Op, c: Consistency) -> Vec<Outcome<M::Reply>> {
        let (cluster, op) = (&*self.state.cluster, &op);
        let calls = groups.iter().map(|g| async move { (*g, typed::write::<M>(cluster, *g, op(), c).await.map(|s| s.value)) });
        join_all(calls).await
    }

    /// Asks every copy `query` at once.
    pub async fn ask_copies<M: Model>(&self, query: &M::Query, prefs: &ReadPrefs) -> Vec<Outcome<M::Answer>> {
        let cluster = &*self.state.cluster;
        let calls = self.others.iter().map(|g| async move {
            (*g, typed::read::<M>(cluster, *g, query.clone(), prefs.consistency, prefs.replica).await.map(|s| s.value))
        });
        join_all(calls).await
    }

    /// Drops the definition: `op()` to every copy first, then to the home group
    /// (only once every copy is gone, so an interrupted drop can be repeated).
    /// A copy already missing counts as dropped. The copies' replies, then the home's.
    pub async fn drop_home_last<M: Model>(
        &self,
        op: impl Fn() -> M::Op,
        c: Consistency,
    ) -> Result<(Vec<M::Reply>, Result<M::Reply, ApiError>), ApiError> {
        let mut copies = Vec::new();
        for (_, r) in self.write_copies::<M>(&op, c).await {
            match r {
                Ok(reply) => copies.push(reply),
                Err(ApiError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let home = typed::write::<M>(&*self.state.cluster, self.home, op(), c).await.map(|s| s.value);
        Ok((copies, home))
    }
}

/// The first failure among `outcomes`, else every reply in order.
pub fn all_ok<T>(outcomes: Vec<Outcome<T>>) -> Result<Vec<(GroupId, T)>, ApiError> {
    outcomes.into_iter().map(|(g, r)| r.map(|v| (g, v))).collect()
}
