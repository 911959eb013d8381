//! # turnstile-model (empty for now)
//!
//! Will hold the independent executable specification of SPEC sections 4 to 7 and its
//! exhaustive breadth-first checker (issue "Model"). Nothing here works yet, and nothing
//! pretends to: the crate exports no items.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
