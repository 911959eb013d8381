//! The world's tools: the built-in ones (`view`, `slow`, `fail`, `deny`, `halt`) and the
//! user's, each of the user's run under a guard that turns a panic into a violation naming the
//! tool and the call (madsim refuses an OS thread to code under simulation, so a tool that
//! starts one panics here: the guard says so).

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use turnstile_core::{StopTurn, ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, Tool, ToolCall, ToolDef};

use crate::world::provider::{Shared, draw};

/// The world's tool that an abort must leave to finish ([`turnstile_core::OnAbort::Finish`]).
pub const LEFT_TO_FINISH: &str = "slow";

/// The built-in tools' names.
pub(crate) const BUILT_IN: [&str; 5] = ["view", "slow", "fail", "deny", "halt"];

/// A built-in tool: `view` (sometimes slow), `slow` (slow, and a cancel must let it finish),
/// `fail` (an error result), `deny` and `halt` (results that stop the turn).
pub(crate) struct SimTool {
    pub(crate) name: &'static str,
    pub(crate) rng: Shared,
}

impl Tool for SimTool {
    fn spec(&self) -> ToolSpec {
        let spec = ToolSpec::new(self.name);
        if self.name == LEFT_TO_FINISH { spec.left_to_finish() } else { spec }
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        // Now and then a tool outlives the cancel grace (5 s): its result comes too late.
        let ms =
            draw(
                &self.rng,
                |r| if r.chance(15) { r.between(3_000, 9_000) } else { r.between(0, 300) },
            );
        let name = self.name;
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            match name {
                "fail" => ToolOutput { content: "it broke".into(), is_error: true, stop: None },
                "deny" => ToolOutput {
                    content: "denied".into(),
                    is_error: true,
                    stop: Some(StopTurn::PermissionDenied),
                },
                "halt" => ToolOutput {
                    content: "halted".into(),
                    is_error: true,
                    stop: Some(StopTurn::HookHalt),
                },
                _ => ToolOutput::ok(format!("viewed {}", call.input)),
            }
        })
    }
}

/// Problems the world's guards saw while the seed ran (a tool that panicked).
pub(crate) type Panics = Arc<Mutex<Vec<String>>>;

/// A user's tool under the world's guard: a panic in `run` or while its future runs becomes a
/// violation (and an error result, so the world goes on).
pub(crate) struct Guarded {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) panics: Panics,
}

impl Tool for Guarded {
    fn spec(&self) -> ToolSpec {
        self.tool.spec()
    }

    fn definition(&self) -> ToolDef {
        self.tool.definition()
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let name = self.tool.spec().name;
        let id = call.call.clone();
        let panics = self.panics.clone();
        let report = move |payload: &(dyn std::any::Any + Send)| {
            let why = crate::panic_message(payload);
            // std's thread spawn asserts that `pthread_attr_init` returned 0; madsim makes it
            // return -1 under the simulation.
            let spawned = why.contains("failed to spawn thread")
                || (why.starts_with("assertion `left == right` failed")
                    && why.contains("left: -1")
                    && why.contains("right: 0"));
            let hint = if spawned {
                " (the way starting an OS thread fails under the simulation, which refuses \
                 threads the OS would schedule: use tokio::spawn or tokio::task::spawn_blocking)"
            } else {
                ""
            };
            let problem = format!("tool `{name}` panicked in call {id}: {why}{hint}");
            panics.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(problem);
            ToolOutput { content: "the tool panicked".into(), is_error: true, stop: None }
        };
        let tool = self.tool.clone();
        let mut future = match std::panic::catch_unwind(AssertUnwindSafe(|| tool.run(call))) {
            Ok(f) => f,
            Err(payload) => {
                let output = report(payload.as_ref());
                return Box::pin(async move { output });
            }
        };
        Box::pin(std::future::poll_fn(move |cx| {
            match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                Ok(poll) => poll,
                Err(payload) => Poll::Ready(report(payload.as_ref())),
            }
        }))
    }
}
