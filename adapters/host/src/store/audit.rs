//! The simulator's ghost log of several hosts (SPEC 11): every take and every commit of an
//! owner, with its epoch, and the check "no write by a fenced epoch" over it.

use turnstile_core::SessionId;

use super::lease::Epoch;

/// The simulator's ghost log of several hosts (SPEC 11): every take and every commit of a
/// member for a session, with its epoch (if it had one) and the revision it committed at.
/// [`Audit::fenced_writes`] is the check "no write by a fenced epoch": nothing committed for a
/// session without an epoch, or at an epoch after a later epoch was taken.
#[derive(Clone, Debug, Default)]
pub struct Audit(std::sync::Arc<std::sync::Mutex<Vec<Audited>>>);

/// One entry of the ghost log: a take (the new epoch) or a commit of a member for a session
/// (its epoch; `None` for a write that checked none).
#[derive(Clone, Debug)]
struct Audited {
    session: SessionId,
    epoch: Option<Epoch>,
    revision: u64,
    take: bool,
}

impl Audit {
    fn log(&self) -> std::sync::MutexGuard<'_, Vec<Audited>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn took(&self, session: &SessionId, epoch: Epoch, revision: u64) {
        self.log().push(Audited {
            session: session.clone(),
            epoch: Some(epoch),
            revision,
            take: true,
        });
    }

    pub(crate) fn wrote(&self, session: &SessionId, epoch: Option<Epoch>, revision: u64) {
        self.log().push(Audited { session: session.clone(), epoch, revision, take: false });
    }

    /// Every write committed without an epoch or by an epoch that a later take had fenced
    /// off, as a sentence; and every take that did not grow its session's epoch. Empty when
    /// the protocol held.
    #[must_use]
    pub fn fenced_writes(&self) -> Vec<String> {
        let log = self.log();
        let mut problems = Vec::new();
        let mut newest: std::collections::BTreeMap<&SessionId, (Epoch, u64)> = Default::default();
        let mut ordered: Vec<&Audited> = log.iter().collect();
        // In commit order; at one revision the take first (a take commits alone).
        ordered.sort_by_key(|a| (a.revision, !a.take));
        for a in ordered {
            let session = &a.session;
            let Some(epoch) = a.epoch else {
                problems.push(format!(
                    "session {session}: a write without an epoch committed at revision {}",
                    a.revision
                ));
                continue;
            };
            match (a.take, newest.get(session)) {
                (true, Some((e, r))) if epoch <= *e => problems.push(format!(
                    "session {session}: epoch {} taken at revision {} after epoch {} at {r}",
                    epoch.0, a.revision, e.0
                )),
                (true, _) => {
                    newest.insert(session, (epoch, a.revision));
                }
                (false, Some((e, r))) if epoch < *e => problems.push(format!(
                    "session {session}: a write of epoch {} committed at revision {}, after epoch {} was taken at {r}",
                    epoch.0, a.revision, e.0
                )),
                (false, _) => {}
            }
        }
        problems
    }

    /// How many takes and writes were logged.
    #[must_use]
    pub fn counts(&self) -> (usize, usize) {
        let log = self.log();
        let takes = log.iter().filter(|a| a.take).count();
        (takes, log.len() - takes)
    }
}
