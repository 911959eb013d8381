//! The status line of the interactive chat: what the session is doing, what waits, and what it
//! has cost.
//!
//! Pure: the screen's loop feeds it what the host says, and the line is drawn from it with the
//! time as an input (a retry counts down).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use turnstile_core::RunUsage;

/// What the status line knows.
#[derive(Debug, Default)]
pub struct Status {
    /// A turn of the session runs.
    pub busy: bool,
    /// The model steps of the running turn so far.
    pub step: u32,
    /// The tool calls running now (call id → tool).
    pub tools: BTreeMap<String, String>,
    /// A retry waits: until when, and why.
    pub retry: Option<(Instant, String)>,
    /// A permission question waits for the person.
    pub asking: bool,
    /// A cancel is under way.
    pub cancelling: bool,
    /// Submissions waiting behind the running turn.
    pub queued: usize,
    /// What the session used so far (the store's totals).
    pub usage: RunUsage,
}

impl Status {
    /// A turn ended: nothing of it runs any more.
    pub fn turn_ended(&mut self) {
        self.step = 0;
        self.tools.clear();
        self.retry = None;
    }

    /// When the line changes by itself next (a retry's countdown), if it does.
    pub fn next_change(&self, now: Instant) -> Option<Instant> {
        let (until, _) = self.retry.as_ref()?;
        let left = until.saturating_duration_since(now);
        // The next whole second shown, or the end.
        let sub = Duration::from_nanos((left.as_nanos() % 1_000_000_000) as u64);
        Some(
            now + if sub.is_zero() {
                Duration::from_secs(1)
            } else {
                sub
            },
        )
    }

    /// The line, at `now`.
    pub fn line(&self, now: Instant) -> String {
        let mut parts = vec![self.doing(now)];
        if self.queued > 0 {
            parts.push(format!("queued {}", self.queued));
        }
        let u = &self.usage;
        let tokens = u.prompt_tokens + u.completion_tokens;
        if tokens > 0 {
            parts.push(format!("{} tokens", thousands(tokens)));
        }
        if u.cost_micros > 0 {
            parts.push(format!("${:.4}", u.cost_micros as f64 / 1e6));
        }
        parts.join(" · ")
    }

    fn doing(&self, now: Instant) -> String {
        if self.cancelling {
            return "cancelling".into();
        }
        if self.asking {
            return "waiting for your answer".into();
        }
        if let Some((until, why)) = &self.retry {
            let left = until.saturating_duration_since(now);
            if !left.is_zero() {
                let secs = left.as_millis().div_ceil(1_000);
                return format!("retrying in {secs} s ({why})");
            }
        }
        if !self.busy {
            return "idle".into();
        }
        let mut doing = format!("working · step {}", self.step.max(1));
        if !self.tools.is_empty() {
            let names: Vec<&str> = self.tools.values().map(String::as_str).collect();
            doing.push_str(&format!(" · running {}", names.join(", ")));
        }
        doing
    }
}

/// 12345 as "12,345".
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_says_what_it_is() {
        let now = Instant::now();
        let mut s = Status::default();
        assert_eq!(s.line(now), "idle");
        s.busy = true;
        s.step = 2;
        s.tools.insert("c1".into(), "bash".into());
        s.queued = 1;
        assert_eq!(s.line(now), "working · step 2 · running bash · queued 1");
        s.retry = Some((now + Duration::from_millis(4_200), "Overloaded".into()));
        assert_eq!(s.line(now), "retrying in 5 s (Overloaded) · queued 1");
        assert_eq!(
            s.next_change(now),
            Some(now + Duration::from_millis(200)),
            "the countdown's next second"
        );
        assert!(
            s.line(now + Duration::from_secs(5)).starts_with("working"),
            "a retry that is due is no longer shown"
        );
        s.asking = true;
        assert!(s.line(now).starts_with("waiting for your answer"));
        s.cancelling = true;
        assert!(s.line(now).starts_with("cancelling"));
        s.turn_ended();
        s.busy = false;
        s.asking = false;
        s.cancelling = false;
        s.queued = 0;
        s.usage = RunUsage {
            prompt_tokens: 12_000,
            completion_tokens: 345,
            cost_micros: 41_500,
        };
        assert_eq!(s.line(now), "idle · 12,345 tokens · $0.0415");
    }
}
