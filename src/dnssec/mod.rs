//! DNSSEC validation (RFC 4033–4035, 5155, 6840): the validator's core as
//! pure functions over records in wire form. It fetches nothing: the engine
//! asks the upstreams for the DNSKEY and DS records along the chain and
//! hands them in, and puts the [`Verdict`] on the answer and its cache entry.
//!
//! How the engine validates one answer with it:
//! 1. [`Records::from_message`] expands each reply's names once.
//! 2. [`TrustAnchors::closest`] names the zone validation starts at (none:
//!    [`Insecure::NoAnchor`]); [`Validation::validate_dnskeys`] checks that
//!    zone's DNSKEY RRset against [`TrustAnchors::for_zone`], giving
//!    [`ZoneKeys`] (cache them, keyed by zone, for their `ttl`).
//! 3. Down the chain, for each zone cut towards the signer of the answer
//!    ([`signer_of`] names it): the child's DS RRset is checked with
//!    [`Validation::verify_rrset`] under the parent's keys and handed to
//!    `validate_dnskeys` as [`Anchor::Ds`]; a DS the parent denies is
//!    proven absent with [`Denial::ds_absence`] (a delegation without DS
//!    or in an opt-out span: insecure from there down).
//! 4. Each answer RRset is checked with `verify_rrset` under its zone's
//!    keys; a [`Proof`] with a [`Wildcard`] needs
//!    [`Denial::wildcard_answer`]; NXDOMAIN and NODATA need
//!    [`Denial::nxdomain`] and [`Denial::nodata`]. CNAME and DNAME links
//!    are each validated in their own zone; [`Verdict::and`] combines them.
//!
//! One [`Validation`] per answer holds the clock (`None` until the clock is
//! known good: dates then are not enforced, and [`Validation::window`] says
//! when the signatures relied on are valid, for a later check) and the work
//! budget ([`Limits`]), spent across the whole answer.
//!
//! This is the stages layer: it uses only `wire`, `sys` and its own parts.

mod anchors;
mod canon;
mod crypto;
mod denial;
pub mod keycache;
pub mod name;
mod record;
mod text;
mod verdict;
mod verify;

pub use anchors::{AnchorError, MAX_ANCHORS, MAX_FILE_BYTES, TrustAnchors};
pub use crypto::{algorithm_supported, digest_supported, key_tag};
pub use denial::{Denial, DsAbsence};
pub use keycache::{Claim, Flight, KeyCache, Known};
pub use record::{Dnskey, Ds, Record, Records, Rrsig, Section, rrset, rrsigs_for, rtype, signer_of};
pub use verdict::{Bogus, Indeterminate, Insecure, Verdict};
pub use verify::{Anchor, DateFault, Key, KeyId, Limits, Proof, Validation, Wildcard, Window, ZoneKeys, serial_lt};

#[cfg(test)]
mod tests;
