//! Decoder throughput on the recorded streams, beside a baseline measured in the same run:
//! parsing the same `data:` payloads with `serde_json` into a `Value` and nothing else (no
//! framing, no events). Rounds alternate between the two so that the machine's noise falls on
//! both; the medians are printed (see docs/performance.md).
//!
//! `cargo bench -p turnstile-wire --bench decode`

use std::hint::black_box;
use std::time::{Duration, Instant};

use turnstile_wire::{Api, Decoder};

const ROUNDS: usize = 21;
/// Each timed round decodes the API's bodies this many times.
const REPEAT: usize = 20;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn decode(api: Api, bodies: &[Vec<u8>]) -> usize {
    let mut events = 0;
    let mut out = Vec::new();
    for body in bodies {
        let mut d = Decoder::new(api);
        for chunk in body.chunks(4096) {
            d.feed(chunk, &mut out).expect("recorded streams decode");
        }
        d.finish(&mut out).expect("recorded streams decode");
        events += out.len();
        black_box(&out);
        out.clear();
    }
    events
}

fn baseline(bodies: &[Vec<u8>]) -> usize {
    let mut parsed = 0;
    for body in bodies {
        let text = std::str::from_utf8(body).expect("UTF-8");
        for line in text.lines() {
            if let Some(payload) = line.strip_prefix("data:") {
                let payload = payload.trim();
                if payload != "[DONE]" {
                    let v: serde_json::Value = serde_json::from_str(payload).expect("JSON");
                    black_box(&v);
                    parsed += 1;
                }
            }
        }
    }
    parsed
}

fn main() {
    let recordings = turnstile_testkit::fixtures::cases();
    println!(
        "decoder throughput on the recorded streams ({ROUNDS} rounds of {REPEAT} passes, medians)"
    );
    println!(
        "{:<20} {:>9} {:>12} {:>14} {:>16} {:>8}",
        "api", "bytes", "decoder MB/s", "decoder ev/s", "serde_json MB/s", "ratio"
    );
    for api in Api::ALL {
        let bodies: Vec<Vec<u8>> = recordings
            .iter()
            .filter(|r| r.api == api)
            .flat_map(|r| r.exchanges.iter().map(|(_, b)| b.clone()))
            .collect();
        let bytes: usize = bodies.iter().map(Vec::len).sum();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let mut events = 0;
        for _ in 0..ROUNDS {
            let t = Instant::now();
            for _ in 0..REPEAT {
                events = decode(api, &bodies);
            }
            ours.push(t.elapsed());
            let t = Instant::now();
            for _ in 0..REPEAT {
                black_box(baseline(&bodies));
            }
            theirs.push(t.elapsed());
        }
        let (ours, theirs) = (median(ours), median(theirs));
        let mb = |d: Duration| (bytes * REPEAT) as f64 / d.as_secs_f64() / 1e6;
        let ev = (events * REPEAT) as f64 / ours.as_secs_f64();
        println!(
            "{:<20} {:>9} {:>12.1} {:>14.0} {:>16.1} {:>8.2}",
            api.name(),
            bytes,
            mb(ours),
            ev,
            mb(theirs),
            mb(ours) / mb(theirs)
        );
    }
}
