//! What a simulated provider does, one act at a time, while it answers a request: the world's
//! provider draws its acts, and recorded streams (`crate::recorded`) are turned into them.

use turnstile_core::StepEvent;

/// What the provider does next while it answers a request.
#[derive(Clone, Debug)]
pub enum Act {
    /// Wait this many milliseconds of simulated time.
    Wait(u64),
    /// Send this event to the core.
    Send(StepEvent),
    /// Never send anything again (a stalled stream: only the core's watchdog, a cancel or a
    /// shutdown ends it).
    Hang,
    /// End the stream without its terminal event (the connection dropped).
    Cut,
}
