//! Why a command stopped before it could do its job, and the exit statuses of that (SPEC 9
//! "CLI"): every command returns a [`Failure`] for `main` to print.

/// The exit status of a run that could not start (a configuration, a key, the store).
pub const EXIT_SETUP: u8 = 1;
/// The exit status of bad usage (the same as a rejected submission: the request was refused).
pub const EXIT_USAGE: u8 = 64;

/// Why a command stopped before it could do its job: the message for stderr and the status.
#[derive(Debug)]
pub struct Failure {
    /// The exit status.
    pub status: u8,
    /// What went wrong and, where it helps, what to do.
    pub message: String,
}

impl Failure {
    /// A set-up failure: status 1.
    pub fn setup(message: impl Into<String>) -> Failure {
        Failure {
            status: EXIT_SETUP,
            message: message.into(),
        }
    }

    /// Bad usage: status 64.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            status: EXIT_USAGE,
            message: message.into(),
        }
    }
}
