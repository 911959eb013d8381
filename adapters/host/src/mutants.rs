//! Test-only bugs of the reference host (SPEC 10 "Mutants"), switchable with the `mutants`
//! feature through `StoreConfig::mutant`. Each is a plausible mistake in the host's IO
//! around the core; the host's tests and the crash test must find every one
//! (`tests/mutants.rs` shows how each is found), and the simulator will hunt them too. Without
//! the feature no switch exists and every check is the constant `false`.

/// A bug the host can be built to have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum HostMutant {
    /// The store writer publishes outcomes (wakes waiters, advances the completion stream)
    /// before the commit that records them (SPEC 4.12, I9).
    PublishBeforeCommit,
    /// The acceptance reply is sent before the submission's ledger row is durable (SPEC 4.12).
    ReplyBeforeDurable,
    /// A structural transaction does not carry its session's held streamed writes first: they
    /// are written later, after the RunComplete that should follow them (SPEC 4.12, I9).
    StructuralOvertakesHeld,
    /// Crash recovery does not write results for tool calls that have none (SPEC 4.12, I8).
    RecoveryLeavesOrphans,
    /// A sub-agent's model requests offer the `agent` tool too (SPEC 4.11: depth 1).
    ChildOfferedAgent,
    /// The setup a preparation resolves names the tools but loses what an abort does to each:
    /// every call reads as droppable, so a cancel cuts off a call that must finish (SPEC 4.9).
    AbortPolicyLost,
    /// Several hosts: an owner's commit does not check its lease's epoch, so a host that lost
    /// the session writes over the new owner (SPEC 11).
    MemberNoFence,
    /// Several hosts: a take decides from an earlier look for unowned sessions (the previous
    /// round's), not from the lease row as it is: it takes a lease another host took meanwhile
    /// (SPEC 11, the River bug).
    MemberStaleTake,
    /// Several hosts: a host that could not renew goes on acting past its own deadline, and
    /// renews late (SPEC 11).
    MemberActsPastDeadline,
    /// Several hosts: an owner applies a cancel after every submission it read with it, as if
    /// its watermark were the newest of them, so it also cancels what was accepted after it
    /// (SPEC 4.10, 11).
    MemberWatermarkOutOfOrder,
    /// Several hosts: a take hands the new owner none of the waiting submissions: they are
    /// never run (SPEC 11).
    MemberTakeDropsWaiting,
    /// Several hosts: a take's recovery puts the interrupted turn back in the queue, so it
    /// runs a second time (SPEC 11).
    MemberTakeRunsTwice,
    /// Several hosts: streamed writes held for coalescing and released by the writer's
    /// debounce are committed without their lease's epoch, so an owner that lost the session
    /// still writes its streamed text (SPEC 11; the host had this bug until the real-process
    /// test's audit found it).
    MemberHeldUnfenced,
}

impl HostMutant {
    /// Every mutant of a host alone (the single-process world hunts them).
    pub const ALL: &'static [HostMutant] = &[
        HostMutant::PublishBeforeCommit,
        HostMutant::ReplyBeforeDurable,
        HostMutant::StructuralOvertakesHeld,
        HostMutant::RecoveryLeavesOrphans,
        HostMutant::ChildOfferedAgent,
        HostMutant::AbortPolicyLost,
    ];

    /// Every mutant of several hosts over one store (the simulator's members world hunts
    /// them, SPEC 11).
    pub const MEMBERS: &'static [HostMutant] = &[
        HostMutant::MemberNoFence,
        HostMutant::MemberStaleTake,
        HostMutant::MemberActsPastDeadline,
        HostMutant::MemberWatermarkOutOfOrder,
        HostMutant::MemberTakeDropsWaiting,
        HostMutant::MemberTakeRunsTwice,
        HostMutant::MemberHeldUnfenced,
    ];

    /// The mutant's name in `snake_case`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            HostMutant::PublishBeforeCommit => "publish_before_commit",
            HostMutant::ReplyBeforeDurable => "reply_before_durable",
            HostMutant::StructuralOvertakesHeld => "structural_overtakes_held",
            HostMutant::RecoveryLeavesOrphans => "recovery_leaves_orphans",
            HostMutant::ChildOfferedAgent => "child_offered_agent",
            HostMutant::AbortPolicyLost => "abort_policy_lost",
            HostMutant::MemberNoFence => "member_no_fence",
            HostMutant::MemberStaleTake => "member_stale_take",
            HostMutant::MemberActsPastDeadline => "member_acts_past_deadline",
            HostMutant::MemberWatermarkOutOfOrder => "member_watermark_out_of_order",
            HostMutant::MemberTakeDropsWaiting => "member_take_drops_waiting",
            HostMutant::MemberTakeRunsTwice => "member_take_runs_twice",
            HostMutant::MemberHeldUnfenced => "member_held_unfenced",
        }
    }

    /// The mutant with this name (of a host alone, or of several hosts).
    #[must_use]
    pub fn from_name(name: &str) -> Option<HostMutant> {
        HostMutant::ALL.iter().chain(HostMutant::MEMBERS).copied().find(|m| m.name() == name)
    }
}

/// Which mutant a host runs with; without the `mutants` feature, none (a zero-sized value).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Armed {
    #[cfg(feature = "mutants")]
    mutant: Option<HostMutant>,
}

impl Armed {
    /// The host runs with this mutant (the store's configuration names it).
    #[cfg(feature = "mutants")]
    pub(crate) fn with(mutant: Option<HostMutant>) -> Armed {
        Armed { mutant }
    }

    /// True when the host pretends to have this bug.
    #[inline]
    pub(crate) fn is(self, which: HostMutant) -> bool {
        #[cfg(feature = "mutants")]
        {
            self.mutant == Some(which)
        }
        #[cfg(not(feature = "mutants"))]
        {
            let _ = which;
            false
        }
    }
}
