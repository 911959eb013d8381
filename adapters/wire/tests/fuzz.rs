//! The decoders under byte mutations of the recorded streams, fed in random pieces: never a
//! panic; always a valid event sequence (`check_sequence`) or a decoding error; and the same
//! result however the bytes are split. A bounded run here (`PROPTEST_CASES` raises it for a
//! long hunt: `PROPTEST_CASES=100000 cargo test -p turnstile-wire --release --test fuzz`).

use proptest::prelude::*;
use turnstile_wire::decode::check_sequence;
use turnstile_wire::recording::Recording;
use turnstile_wire::{Api, DecodeError, Decoder, StepEvent};

#[derive(Clone, Debug)]
enum Mutation {
    Flip {
        at: usize,
        bit: u8,
    },
    Delete {
        at: usize,
        len: usize,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Truncate {
        at: usize,
    },
    /// Repeats a slice (a duplicated event, a replayed chunk).
    Repeat {
        at: usize,
        len: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Positions are fractions of the body (in 1/10,000), resolved against its length.
    let interesting = prop::sample::select(vec![
        b"\n".to_vec(),
        b"\r".to_vec(),
        b"\n\n".to_vec(),
        b"data: ".to_vec(),
        b"data: [DONE]\n\n".to_vec(),
        b"event: error\n".to_vec(),
        b"{".to_vec(),
        b"\"".to_vec(),
        b":".to_vec(),
        vec![0xff],
        vec![0xe2, 0x82],
    ]);
    prop_oneof![
        (0..10_000_usize, 0..8_u8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (0..10_000_usize, 1..64_usize).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (0..10_000_usize, interesting).prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (0..10_000_usize, any::<Vec<u8>>()).prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (0..10_000_usize).prop_map(|at| Mutation::Truncate { at }),
        (0..10_000_usize, 1..400_usize).prop_map(|(at, len)| Mutation::Repeat { at, len }),
    ]
}

fn apply(body: &mut Vec<u8>, m: &Mutation) {
    let pos = |at: usize, len: usize| at * (len + 1) / 10_000;
    match m {
        Mutation::Flip { at, bit } if !body.is_empty() => {
            let i = pos(*at, body.len() - 1);
            body[i] ^= 1 << bit;
        }
        Mutation::Delete { at, len } => {
            let i = pos(*at, body.len());
            let end = (i + len).min(body.len());
            body.drain(i..end);
        }
        Mutation::Insert { at, bytes } => {
            let i = pos(*at, body.len());
            body.splice(i..i, bytes.iter().copied());
        }
        Mutation::Truncate { at } => body.truncate(pos(*at, body.len())),
        Mutation::Repeat { at, len } => {
            let i = pos(*at, body.len());
            let end = (i + len).min(body.len());
            let copy = body[i..end].to_vec();
            body.splice(end..end, copy);
        }
        Mutation::Flip { .. } => {}
    }
}

fn decode(api: Api, body: &[u8], cuts: &[usize]) -> Result<Vec<StepEvent>, DecodeError> {
    let mut d = Decoder::new(api);
    let mut out = Vec::new();
    let mut at = 0;
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    points.sort_unstable();
    for cut in points.into_iter().chain(std::iter::once(body.len())) {
        d.feed(&body[at..cut], &mut out)?;
        at = cut;
    }
    d.finish(&mut out)?;
    Ok(out)
}

fn recordings() -> &'static [Recording] {
    static CASES: std::sync::OnceLock<Vec<Recording>> = std::sync::OnceLock::new();
    CASES.get_or_init(turnstile_testkit::fixtures::cases)
}

proptest! {
    // Failures print their shrunk input; a found case is pinned as a unit test of its decoder.
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_recorded_streams_decode_to_a_valid_sequence_or_an_error(
        case in 0..1_000_usize,
        exchange in 0..2_usize,
        mutations in prop::collection::vec(mutation(), 0..6),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
        api_swap in 0..8_u8,
    ) {
        let recs = recordings();
        let rec = &recs[case % recs.len()];
        let (_, body) = &rec.exchanges[exchange % rec.exchanges.len()];
        let mut body = body.clone();
        for m in &mutations {
            apply(&mut body, m);
        }
        // Now and then, the wrong API's decoder for the bytes.
        let api = if api_swap == 0 { Api::ALL[(case / 7) % 3] } else { rec.api };
        let whole = decode(api, &body, &[]);
        let pieces = decode(api, &body, &cuts);
        prop_assert_eq!(&whole, &pieces, "the split changed the result");
        match whole {
            Ok(events) => {
                let checked = check_sequence(&events);
                prop_assert!(checked.is_ok(), "{:?}", checked);
            }
            Err(e) => prop_assert!(e.offset <= body.len() as u64, "offset {} past {}", e.offset, body.len()),
        }
    }
}
