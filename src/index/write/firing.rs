//! A firing of one of our triggers on an indexed table, a partition of one or a shard of one,
//! resolved once (the sync triggers, the claim trigger and the duplicate check share it):
//! the relation it fired on, the indexed table it serves and that table's owner, and the
//! table's indexes.

use pgrx::prelude::*;
use pgrx::spi::SpiClient;

use crate::pg::names::relation_name;

use crate::index::def::catalog::indexed_table;
use crate::index::def::citus::{sync_trigger_args, Shard};
use crate::index::def::extension::Extension;
use crate::index::def::restore::{is_function, SYNC_FUNCTION};
use crate::index::def::trigger::trigger_args;
use crate::index::read::access_plan::{Index, Indexes};
use crate::index::run::owner::relation_owner;

/// What fired, and for which index.
pub(super) struct Firing<'a> {
    /// The trigger, and the relation it fires on (open), its OID and its descriptor.
    pub(super) trigger: &'a pg_sys::Trigger,
    pub(super) relation: pg_sys::Relation,
    pub(super) rel: pg_sys::Oid,
    pub(super) tupdesc: pg_sys::TupleDesc,
    /// The trigger function (one of the extension's).
    pub(super) fn_oid: pg_sys::Oid,
    /// The shard of a Citus table it fired on, if it did (see `citus`).
    pub(super) shard: Option<Shard>,
    /// The table whose indexes it serves: the relation itself, the root of its partition tree
    /// (an index is made on a root), or the Citus table of the shard.
    pub(super) table: pg_sys::Oid,
    /// That table's owner, whose its indexes and band tables are.
    pub(super) owner: pg_sys::Oid,
}

impl<'a> Firing<'a> {
    /// The firing of `trigger`, now.
    pub(super) fn of(trigger: &'a PgTrigger<'a>) -> Firing<'a> {
        // SAFETY: a trigger's relation is open while it fires.
        unsafe { Firing::on(trigger.trigger_data().tg_relation, trigger.trigger()) }
    }

    /// A firing of `trigger` on `relation`: now, or to come (a trigger checked as it is
    /// created).
    ///
    /// # Safety
    /// `relation` is open and outlives the firing; `trigger` is one of its triggers.
    pub(super) unsafe fn on(relation: pg_sys::Relation, trigger: &'a pg_sys::Trigger) -> Self {
        // SAFETY: per the contract: the relation and its descriptor are valid.
        let (rel, tupdesc) = unsafe { ((*relation).rd_id, (*relation).rd_att) };
        let shard = Shard::of(rel, &relation_name(rel));
        let (table, owner) = match shard {
            Some(shard) => (shard.table, relation_owner(shard.table)),
            // SAFETY: as above.
            None => unsafe { indexed_table(relation) },
        };
        Firing {
            trigger,
            relation,
            rel,
            tupdesc,
            fn_oid: trigger.tgfoid,
            shard,
            table,
            owner,
        }
    }

    /// The extension whose trigger function fired.
    pub(super) fn ext(&self) -> Extension {
        Extension::of_function(self.fn_oid)
    }

    /// The trigger's arguments as given to CREATE TRIGGER.
    pub(super) fn args(&self) -> Vec<String> {
        trigger_args(self.trigger)
    }

    /// The indexes of the table (none if it has none). On a shard, whose node has no catalog
    /// rows, those the sync triggers there carry as arguments: the firing trigger's own if it
    /// is a sync trigger, else the insert sync trigger's.
    pub(super) fn indexes(&self, client: &SpiClient<'_>) -> Indexes {
        let Some(shard) = self.shard else {
            return Index::of_table(client, self.fn_oid, self.table);
        };
        let ext = self.ext();
        let args = if is_function(self.trigger, SYNC_FUNCTION, ext) {
            self.args()
        } else {
            // SAFETY: the trigger's relation is open (`on`).
            unsafe { sync_trigger_args(self.relation, Some(shard), ext) }
        };
        Index::of_trigger(client, self.fn_oid, self.table, &args)
    }
}
