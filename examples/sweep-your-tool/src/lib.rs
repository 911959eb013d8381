//! # A tool of your own, swept by the simulator
//!
//! An example to copy into your own crate. [`Transfer`] moves money between the accounts of a
//! [`Bank`], the external system a real tool would talk to. It takes the amount out of one
//! account, waits for the bank's network, and puts it into the other: two halves that must
//! both happen.
//!
//! A cancel (the user pressed Escape) or a shutdown can come while a call runs. What the host
//! then does to the call is the tool's to declare (its [`ToolSpec`]): a droppable call is cut
//! off at once, a call left to finish runs to its end. [`Transfer::droppable`] declares the
//! wrong one, so a cancel between its halves loses the money; `tests/sweep.rs` sweeps both
//! through the simulated world (clients that submit and cancel at random moments, provider
//! failures, store faults, shutdowns) and a check of its own, "the money is all there",
//! finds the droppable one.
//!
//! Run it with `RUSTFLAGS="--cfg madsim" CARGO_TARGET_DIR=target/madsim cargo test --release
//! -p sweep-your-tool`.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use turnstile_core::{ToolOutput, ToolSpec};
use turnstile_host::{BoxFuture, Tool, ToolCall, ToolDef};

/// Accounts and their balances, shared by the tool and the test's check.
#[derive(Clone, Debug, Default)]
pub struct Bank(Arc<Mutex<BTreeMap<String, u64>>>);

impl Bank {
    /// A bank holding these accounts.
    #[must_use]
    pub fn new(accounts: &[(&str, u64)]) -> Bank {
        let map = accounts
            .iter()
            .map(|(name, n)| ((*name).to_owned(), *n))
            .collect();
        Bank(Arc::new(Mutex::new(map)))
    }

    /// Every account's balance.
    #[must_use]
    pub fn balances(&self) -> BTreeMap<String, u64> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The money in all accounts together.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.balances().values().sum()
    }

    /// Takes `amount` out of `account`; an error when it does not hold that much.
    fn take(&self, account: &str, amount: u64) -> Result<(), String> {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let balance = map
            .get_mut(account)
            .ok_or_else(|| format!("no account {account:?}"))?;
        *balance = balance
            .checked_sub(amount)
            .ok_or_else(|| format!("{account} holds less"))?;
        Ok(())
    }

    /// Puts `amount` into `account`.
    fn put(&self, account: &str, amount: u64) {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *map.entry(account.to_owned()).or_default() += amount;
    }
}

/// How long the bank's network takes between the two halves of a transfer.
pub const NETWORK: Duration = Duration::from_millis(250);

/// The `transfer` tool: `{"from": "alice", "to": "bob", "amount": 10}`.
#[derive(Clone, Debug)]
pub struct Transfer {
    bank: Bank,
    droppable: bool,
}

impl Transfer {
    /// The transfer as it must be declared: left to finish when a cancel or a shutdown comes,
    /// so its two halves both happen (SPEC 4.9: the turn's clean-up waits for it).
    #[must_use]
    pub fn new(bank: Bank) -> Transfer {
        Transfer {
            bank,
            droppable: false,
        }
    }

    /// The bug: declared droppable (the default of [`ToolSpec::new`]), so the host cuts a
    /// call off at a cancel, also between its halves.
    #[must_use]
    pub fn droppable(bank: Bank) -> Transfer {
        Transfer {
            bank,
            droppable: true,
        }
    }
}

fn error(text: String) -> ToolOutput {
    ToolOutput {
        content: text,
        is_error: true,
        stop: None,
    }
}

impl Tool for Transfer {
    fn spec(&self) -> ToolSpec {
        let spec = ToolSpec::new("transfer");
        if self.droppable {
            spec
        } else {
            spec.left_to_finish()
        }
    }

    fn definition(&self) -> ToolDef {
        ToolDef::new("transfer", "Moves money from one account to another.").with_schema(
            serde_json::json!({
                "type": "object",
                "properties": {
                    "from": {"type": "string"},
                    "to": {"type": "string"},
                    "amount": {"type": "integer", "minimum": 1}
                },
                "required": ["from", "to", "amount"]
            }),
        )
    }

    fn run(&self, call: ToolCall) -> BoxFuture<ToolOutput> {
        let bank = self.bank.clone();
        Box::pin(async move {
            let args: serde_json::Value = serde_json::from_str(&call.input).unwrap_or_default();
            let (Some(from), Some(to), Some(amount)) = (
                args["from"].as_str(),
                args["to"].as_str(),
                args["amount"].as_u64(),
            ) else {
                return error(format!("expected from, to and amount; got {}", call.input));
            };
            if let Err(e) = bank.take(from, amount) {
                return error(e);
            }
            tokio::time::sleep(NETWORK).await;
            bank.put(to, amount);
            ToolOutput::ok(format!("moved {amount} from {from} to {to}"))
        })
    }
}
