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

/// One entry of the ghost log: what happened to a session, at the revision it committed at.
#[derive(Clone, Debug)]
struct Audited {
    session: SessionId,
    revision: u64,
    event: Event,
}

/// A take (the new epoch) or a commit of a member for the session (its epoch; `None` for a
/// write that checked none).
#[derive(Clone, Copy, Debug)]
enum Event {
    Took(Epoch),
    Wrote(Option<Epoch>),
}

impl Audit {
    fn log(&self) -> std::sync::MutexGuard<'_, Vec<Audited>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn took(&self, session: &SessionId, epoch: Epoch, revision: u64) {
        let event = Event::Took(epoch);
        self.log().push(Audited { session: session.clone(), revision, event });
    }

    pub(crate) fn wrote(&self, session: &SessionId, epoch: Option<Epoch>, revision: u64) {
        let event = Event::Wrote(epoch);
        self.log().push(Audited { session: session.clone(), revision, event });
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
        ordered.sort_by_key(|a| (a.revision, matches!(a.event, Event::Wrote(_))));
        for a in ordered {
            let session = &a.session;
            match (a.event, newest.get(session)) {
                (Event::Wrote(None), _) => problems.push(format!(
                    "session {session}: a write without an epoch committed at revision {}",
                    a.revision
                )),
                (Event::Took(epoch), Some((e, r))) if epoch <= *e => problems.push(format!(
                    "session {session}: epoch {} taken at revision {} after epoch {} at {r}",
                    epoch.0, a.revision, e.0
                )),
                (Event::Took(epoch), _) => {
                    newest.insert(session, (epoch, a.revision));
                }
                (Event::Wrote(Some(epoch)), Some((e, r))) if epoch < *e => problems.push(format!(
                    "session {session}: a write of epoch {} committed at revision {}, after epoch {} was taken at {r}",
                    epoch.0, a.revision, e.0
                )),
                (Event::Wrote(Some(_)), _) => {}
            }
        }
        problems
    }

    /// How many takes and writes were logged.
    #[must_use]
    pub fn counts(&self) -> (usize, usize) {
        let log = self.log();
        let takes = log.iter().filter(|a| matches!(a.event, Event::Took(_))).count();
        (takes, log.len() - takes)
    }
}
