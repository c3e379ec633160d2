//! What a validation concludes (RFC 4033 §5: secure, insecure, bogus,
//! indeterminate), each with the reason the engine shows and the Extended
//! DNS Error (RFC 8914) it answers with.

use std::fmt;

/// A validation's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Signed, and every signature on the way from a trust anchor is good.
    Secure,
    /// Proven unsigned, or signed in a way this validator does not check:
    /// the answer is given without AD.
    Insecure(Insecure),
    /// Should be signed and is not, or the signatures or proofs are wrong:
    /// SERVFAIL.
    Bogus(Bogus),
    /// Could not be decided: SERVFAIL, never cached as bogus.
    Indeterminate(Indeterminate),
}

/// Why an answer is insecure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insecure {
    /// No trust anchor is at or above the name.
    NoAnchor,
    /// A delegation on the way is proven to have no DS.
    NoDs,
    /// The name is in an NSEC3 opt-out span (RFC 5155 §6): a delegation
    /// there may be unsigned, so nothing in it can be secure.
    OptOut,
    /// The zone's DS records name only algorithms (or keys, such as RSA
    /// below 1,024 bits) this validator does not verify (RFC 4035 §5.2).
    UnsupportedAlgorithm,
    /// The zone's DS records use only digest types this validator does not
    /// compute.
    UnsupportedDigest,
    /// The denial needs NSEC3 records with more iterations than the limit
    /// (RFC 9276 §3.2).
    Nsec3Iterations,
}

/// Why an answer is bogus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bogus {
    /// Every usable signature has expired.
    SignatureExpired,
    /// Every usable signature starts in the future.
    SignatureNotYetValid,
    /// The RRset has no RRSIG at all.
    RrsigMissing,
    /// The zone's DNSKEY RRset is missing or empty.
    DnskeyMissing,
    /// No DNSKEY of the zone matches any supported DS record.
    DsMatchesNoKey,
    /// Keys match the DS records, but none of them signs the DNSKEY RRset.
    KeysNotSignedByDsKey,
    /// The only key a DS matches has no Zone Key flag (RFC 4034 §2.1.1).
    NoZoneKeyBit,
    /// The RRSIGs name no key of the signing zone.
    NoMatchingKey,
    /// A signature does not verify.
    BadSignature,
    /// A denial of existence was needed and there were no NSEC or NSEC3
    /// records to prove it.
    NsecMissing,
    /// The NSEC or NSEC3 records do not prove what the answer claims.
    BadDenial,
    /// Records that cannot be read as DNSSEC requires.
    Malformed,
}

/// Why an answer could not be decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indeterminate {
    /// The validation spent its budget of signature checks or hashes
    /// (`Limits`): KeyTrap and NSEC3 floods end here.
    WorkLimit,
    /// No upstream answered a query the validation needed (for the engine).
    NoReachableAuthority,
    /// The network failed on such a query (for the engine).
    NetworkError,
}

impl Verdict {
    /// The Extended DNS Error code (RFC 8914 §4, RFC 9276 for 27) that
    /// names this outcome, where one does.
    pub fn ede(&self) -> Option<u16> {
        match self {
            Verdict::Secure => None,
            Verdict::Insecure(i) => match i {
                Insecure::UnsupportedAlgorithm => Some(1),
                Insecure::UnsupportedDigest => Some(2),
                Insecure::Nsec3Iterations => Some(27),
                Insecure::NoAnchor | Insecure::NoDs | Insecure::OptOut => None,
            },
            Verdict::Bogus(b) => Some(match b {
                Bogus::SignatureExpired => 7,
                Bogus::SignatureNotYetValid => 8,
                Bogus::RrsigMissing => 10,
                Bogus::DnskeyMissing | Bogus::DsMatchesNoKey => 9,
                Bogus::NoZoneKeyBit => 11,
                Bogus::NsecMissing => 12,
                Bogus::KeysNotSignedByDsKey
                | Bogus::NoMatchingKey
                | Bogus::BadSignature
                | Bogus::BadDenial
                | Bogus::Malformed => 6,
            }),
            Verdict::Indeterminate(i) => Some(match i {
                Indeterminate::WorkLimit => 5,
                Indeterminate::NoReachableAuthority => 22,
                Indeterminate::NetworkError => 23,
            }),
        }
    }

    pub fn is_secure(&self) -> bool {
        *self == Verdict::Secure
    }

    /// The worse of two verdicts for one answer built from parts (a CNAME
    /// chain, a wildcard answer and its proof): bogus over indeterminate
    /// over insecure over secure; the first reason of the worst kind wins.
    pub fn and(self, other: Verdict) -> Verdict {
        fn rank(v: &Verdict) -> u8 {
            match v {
                Verdict::Secure => 0,
                Verdict::Insecure(_) => 1,
                Verdict::Indeterminate(_) => 2,
                Verdict::Bogus(_) => 3,
            }
        }
        if rank(&other) > rank(&self) { other } else { self }
    }
}

impl Verdict {
    /// The outcome's name: `secure`, `insecure`, `bogus` or `indeterminate`.
    pub fn state(&self) -> &'static str {
        match self {
            Verdict::Secure => "secure",
            Verdict::Insecure(_) => "insecure",
            Verdict::Bogus(_) => "bogus",
            Verdict::Indeterminate(_) => "indeterminate",
        }
    }

    /// Why, in words (none for secure): what `hydradns check` shows.
    pub fn reason(&self) -> Option<&'static str> {
        Some(match self {
            Verdict::Secure => return None,
            Verdict::Insecure(i) => match i {
                Insecure::NoAnchor => "no trust anchor covers it",
                Insecure::NoDs => "a delegation on the way has no DS",
                Insecure::OptOut => "it is in an NSEC3 opt-out span",
                Insecure::UnsupportedAlgorithm => "the zone's DS names only unsupported algorithms or keys",
                Insecure::UnsupportedDigest => "the zone's DS uses only unsupported digest types",
                Insecure::Nsec3Iterations => "its NSEC3 proof has too many iterations",
            },
            Verdict::Bogus(b) => match b {
                Bogus::SignatureExpired => "the signature has expired",
                Bogus::SignatureNotYetValid => "the signature is not valid yet",
                Bogus::RrsigMissing => "an RRSIG is missing",
                Bogus::DnskeyMissing => "the zone's DNSKEY set is missing",
                Bogus::DsMatchesNoKey => "no DNSKEY matches the DS",
                Bogus::KeysNotSignedByDsKey => "no key the DS names signs the DNSKEY set",
                Bogus::NoZoneKeyBit => "the key the DS names is not a zone key",
                Bogus::NoMatchingKey => "the RRSIG names no key of the zone",
                Bogus::BadSignature => "a signature does not verify",
                Bogus::NsecMissing => "the denial of existence is missing",
                Bogus::BadDenial => "the denial of existence does not prove it",
                Bogus::Malformed => "a DNSSEC record is malformed",
            },
            Verdict::Indeterminate(i) => match i {
                Indeterminate::WorkLimit => "the validation work limit was reached",
                Indeterminate::NoReachableAuthority => "no upstream answered",
                Indeterminate::NetworkError => "the network failed",
            },
        })
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.state())?;
        match self.reason() {
            Some(why) => write!(f, ": {why}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(Verdict::Secure.ede(), None);
        assert_eq!(Verdict::Insecure(Insecure::UnsupportedAlgorithm).ede(), Some(1));
        assert_eq!(Verdict::Insecure(Insecure::UnsupportedDigest).ede(), Some(2));
        assert_eq!(Verdict::Insecure(Insecure::Nsec3Iterations).ede(), Some(27));
        assert_eq!(Verdict::Insecure(Insecure::OptOut).ede(), None);
        assert_eq!(Verdict::Bogus(Bogus::SignatureExpired).ede(), Some(7));
        assert_eq!(Verdict::Bogus(Bogus::SignatureNotYetValid).ede(), Some(8));
        assert_eq!(Verdict::Bogus(Bogus::DnskeyMissing).ede(), Some(9));
        assert_eq!(Verdict::Bogus(Bogus::RrsigMissing).ede(), Some(10));
        assert_eq!(Verdict::Bogus(Bogus::NsecMissing).ede(), Some(12));
        assert_eq!(Verdict::Bogus(Bogus::BadDenial).ede(), Some(6));
        assert_eq!(Verdict::Indeterminate(Indeterminate::WorkLimit).ede(), Some(5));
        assert_eq!(Verdict::Indeterminate(Indeterminate::NetworkError).ede(), Some(23));
        let bogus = Verdict::Bogus(Bogus::BadSignature);
        assert_eq!(Verdict::Secure.and(bogus), bogus);
        assert_eq!(bogus.and(Verdict::Insecure(Insecure::NoDs)), bogus);
        assert_eq!(
            Verdict::Insecure(Insecure::OptOut).and(Verdict::Insecure(Insecure::NoDs)),
            Verdict::Insecure(Insecure::OptOut)
        );
        assert_eq!(bogus.to_string(), "bogus: a signature does not verify");
    }
}
