//! The process driver (SPEC 12): one turnstile engine behind JSON Lines on stdin and stdout, so a
//! host in any language embeds the core by running a process and writing lines to it.
//!
//! The protocol itself is pure and lives in the core ([`turnstile_core::trace::driver`]); this
//! crate only moves bytes: [`run`] reads lines from a reader, hands each to a
//! [`Driver`], writes each reply and flushes it (a host
//! waits for the reply to one input before it writes the next, or pipelines; both work), and
//! appends the flight recording to a file when asked. The binary `turnstile-driver` and the
//! command `turnstile driver` both call it. `docs/embedding.md` documents the protocol.

use std::fs::File;
use std::io::{self, BufRead, BufWriter, Write};
use std::path::Path;

use turnstile_core::trace::driver::{Driver, Next, reply_line};

/// How the driver ended: the process's exit status (0 at the end of the input,
/// [`EXIT_BAD_HEADER`](turnstile_core::trace::driver::EXIT_BAD_HEADER) after a header it cannot
/// start from, [`EXIT_ENGINE_FAILED`](turnstile_core::trace::driver::EXIT_ENGINE_FAILED) after
/// the engine failed).
pub type Status = u8;

/// Pumps `input` through one driver into `output` until the input ends or the driver stops.
/// With `flight`, every handled input (with its outputs) is appended to it as a trace, flushed
/// after each line, so the recording survives the process being killed.
///
/// # Errors
/// Reading, writing or recording failed (a closed pipe included).
pub fn run(
    input: impl BufRead,
    mut output: impl Write,
    mut flight: Option<&mut dyn Write>,
) -> io::Result<Status> {
    let mut driver = Driver::new(flight.is_some());
    for raw in input.split(b'\n') {
        let (reply, next) = driver.read(&raw?);
        if let Some(f) = flight.as_deref_mut() {
            let text = driver.take_flight();
            if !text.is_empty() {
                f.write_all(text.as_bytes())?;
                f.flush()?;
            }
        }
        if let Some(reply) = reply {
            output.write_all(reply_line(&reply).as_bytes())?;
            output.flush()?;
        }
        if let Next::Exit(status) = next {
            return Ok(status);
        }
    }
    Ok(0)
}

/// The whole process: stdin through one driver to stdout, the flight recording to `record`
/// (created or truncated) when given. Problems of the process itself (the recording cannot be
/// created, stdin or stdout failed) are told on stderr and end with status 1; a host that
/// closed stdout has stopped listening, so nothing is said then.
#[must_use]
pub fn run_stdio(record: Option<&Path>) -> Status {
    let mut flight = match record {
        None => None,
        Some(path) => match File::create(path) {
            Ok(f) => Some(BufWriter::new(f)),
            Err(e) => {
                eprintln!("error: cannot create the recording {}: {e}", path.display());
                return 1;
            }
        },
    };
    let stdout = BufWriter::new(io::stdout().lock());
    match run(
        io::stdin().lock(),
        stdout,
        flight.as_mut().map(|f| f as &mut dyn Write),
    ) {
        Ok(status) => status,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 1,
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
