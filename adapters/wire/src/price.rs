//! A step's cost from its usage (SPEC 4.4: the host prices each step; estimated usage costs 0).

use turnstile_core::Usage;

/// Prices in millionths of the currency unit per million tokens (so `3_000_000` is 3.00 per
/// million tokens).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prices {
    /// Input tokens (not read from or written to the cache).
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
    /// Input tokens written to the cache.
    pub cache_write: u64,
}

impl Prices {
    /// The cost of `usage` in millionths of the currency unit, rounded to the nearest; 0 for
    /// estimated usage.
    #[must_use]
    pub fn cost_micros(&self, usage: &Usage) -> u64 {
        if usage.estimated {
            return 0;
        }
        let total: u128 = [
            (usage.input_tokens, self.input),
            (usage.output_tokens, self.output),
            (usage.cache_read_tokens, self.cache_read),
            (usage.cache_creation_tokens, self.cache_write),
        ]
        .iter()
        .map(|&(tokens, price)| u128::from(tokens) * u128::from(price))
        .sum();
        u64::try_from((total + 500_000) / 1_000_000).unwrap_or(u64::MAX)
    }

    /// `usage` with its cost set.
    #[must_use]
    pub fn priced(&self, mut usage: Usage) -> Usage {
        usage.cost_micros = self.cost_micros(&usage);
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_per_million_tokens_each_kind_its_price() {
        let p = Prices {
            input: 3_000_000,
            output: 15_000_000,
            cache_read: 300_000,
            cache_write: 3_750_000,
        };
        let u = Usage {
            input_tokens: 1_000,
            output_tokens: 100,
            cache_read_tokens: 10_000,
            cache_creation_tokens: 2_000,
            ..Usage::default()
        };
        // 3,000 + 1,500 + 3,000 + 7,500 micros.
        assert_eq!(p.cost_micros(&u), 15_000);
        assert_eq!(p.cost_micros(&Usage { estimated: true, ..u }), 0);
    }
}
