//! Writes a long, valid trace for `turnstile-sim view`'s large-trace check: a host that keeps
//! 64 sessions busy (prompts with and without RunIds, preparations, streamed answers, titles,
//! now and then a cancel or a clear) until the trace holds the requested number of inputs.
//! Every input answers an output the core produced, so `replay` passes.
//!
//! Usage: `cargo run -p turnstile-sim --example large_trace -- INPUTS FILE`

use std::collections::VecDeque;
use std::io::Write as _;

use turnstile_core::input::{FinishReason, Input, Setup, StepEvent, Submit};
use turnstile_core::output::OutputKind;
use turnstile_core::{Config, Engine, Millis, SessionId, Start, Usage};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(n), Some(path)) = (args.next().and_then(|n| n.parse::<usize>().ok()), args.next())
    else {
        eprintln!("usage: large_trace INPUTS FILE");
        std::process::exit(2);
    };
    let mut engine = Engine::new(Config::default(), Start::default()).expect("engine");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
    writeln!(
        out,
        r#"{{"format":"turnstile-trace","version":1,"name":"large","rule":"a long run of a busy host, for the view's large-trace check"}}"#
    )
    .expect("write");
    let mut pending: VecDeque<Input> = VecDeque::new();
    let (mut written, mut now, mut submitted) = (0usize, 0u64, 0u64);
    while written < n {
        let input = match pending.pop_front() {
            Some(i) => i,
            None => {
                submitted += 1;
                let session = format!("s{}", submitted % 64);
                match submitted % 97 {
                    0 => Input::Cancel { session: SessionId::new(&session), up_to: None },
                    50 => Input::ClearQueue { session: SessionId::new(&session) },
                    k if k % 3 == 0 => Input::Submit(Submit::new(&session, "and more")),
                    _ => Input::Submit(
                        Submit::new(&session, "go").with_run_id(format!("r{submitted}")),
                    ),
                }
            }
        };
        now += 1 + (written as u64 % 3);
        engine.handle(Millis(now), input.clone()).expect("a valid input");
        let line = serde_json::json!({"at": now, "input": input});
        writeln!(out, "{line}").expect("write");
        written += 1;
        while let Some(o) = engine.poll_output() {
            match o.kind {
                OutputKind::Prepare { session, seq } => {
                    pending.push_back(Input::Prepared { session, seq, setup: Setup::default() });
                }
                OutputKind::StartStep { step } => {
                    pending.push_back(Input::Step {
                        step: step.clone(),
                        event: StepEvent::TextDelta { text: "an answer".into() },
                    });
                    pending.push_back(Input::Step {
                        step,
                        event: StepEvent::Finished {
                            reason: FinishReason::Stop,
                            usage: Some(Usage {
                                input_tokens: 10,
                                output_tokens: 5,
                                ..Usage::default()
                            }),
                        },
                    });
                }
                OutputKind::RequestTitle { session, seq, .. } => {
                    pending.push_back(Input::TitleGenerated {
                        session,
                        seq,
                        title: Some("A title".into()),
                        usage: None,
                    });
                }
                _ => {}
            }
        }
    }
    out.flush().expect("flush");
    println!("wrote {path}: {written} inputs, {submitted} client inputs");
}
