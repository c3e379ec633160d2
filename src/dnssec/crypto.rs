//! The cryptography, all of it through ring (already linked for TLS):
//! DNSKEY algorithms to ring's verifiers, key tags, DS digests.
//!
//! Supported: what RFC 8624 says a validator must or should support and
//! ring provides: RSA/SHA-1 (5, 7), RSA/SHA-256 (8), RSA/SHA-512 (10),
//! ECDSA P-256 (13) and P-384 (14), Ed25519 (15); DS digests SHA-1 (1),
//! SHA-256 (2), SHA-384 (4). Not: RSA/MD5, DSA, GOST (deprecated), Ed448
//! (ring lacks it).

use ring::{digest, signature};

/// RSA moduli outside this range are not verified: below 1,024 bits is
/// too weak to mean anything (ring refuses it), above 8,192 is ring's
/// limit. A zone whose DS names only such keys is treated as unsigned
/// with an unsupported algorithm, as RFC 4035 §5.2 treats one.
pub(crate) const RSA_MIN_BITS: usize = 1024;
pub(crate) const RSA_MAX_BITS: usize = 8192;

/// What one signature check of `algorithm` with key material `key` takes
/// from the per-answer budget ([`super::Limits::verifications`]), in units
/// of about one P-256 or Ed25519 check (58 and 51 µs on the 2-core AMD EPYC
/// VM, ring 0.17; bench/dnssec.py counts 0.77 M instructions for P-256).
/// ring has no assembly for P-384: a check is about 12 M instructions
/// (790 µs), so 16. RSA grows with the square of the modulus and with the
/// exponent's bits and ones (ring's square-and-multiply; it takes exponents
/// up to 2^33 - 1): RSA-2048 with exponent 65,537 is 23 µs, 1 unit, but
/// RSA-8192 with 2^33 - 1 is 1,040 µs. At 1 unit each, 128 of those would
/// hold a worker for 133 ms an answer, 18 times what 128 P-256 checks take
/// (a hostile zone's keys, bench/dnssec_hostile.py), so a key costs
/// ceil(bits² × (exponent bits + ones) / D) units, D = 192 × 1,024²
/// (measured: RSA-4096 e=65,537 1.4, charged 2; RSA-8192 e=65,537 5.8,
/// charged 7; RSA-8192 e=2^33-1 17.9, charged 22).
pub(super) fn cost(algorithm: u8, key: &[u8]) -> u32 {
    match algorithm {
        14 => 16,
        5 | 7 | 8 | 10 => rsa_parts(key).map_or(1, |(e, n)| {
            let bits = bit_len(n) as u64;
            let e_work = u64::from(e.iter().map(|b| b.count_ones()).sum::<u32>()) + bit_len(e) as u64;
            (bits * bits * e_work).div_ceil(192 << 20).max(1) as u32
        }),
        _ => 1,
    }
}

/// Whether DNSKEY/RRSIG algorithm `alg` is one this validator verifies.
pub fn algorithm_supported(alg: u8) -> bool {
    matches!(alg, 5 | 7 | 8 | 10 | 13 | 14 | 15)
}

/// Whether DS digest type `t` is one this validator computes.
pub fn digest_supported(t: u8) -> bool {
    matches!(t, 1 | 2 | 4)
}

/// What a DNSKEY's key material is good for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyUse {
    /// ring can verify with it.
    Usable,
    /// A supported algorithm, but a key ring will not use: an RSA modulus
    /// outside 1,024–8,192 bits or an exponent over 2³³. Treated like an
    /// unsupported algorithm.
    Unsupported,
    /// An algorithm this validator does not implement.
    UnknownAlgorithm,
    /// Not a key of its algorithm at all (wrong length, cut short).
    Malformed,
}

/// The exponent and modulus of an RFC 3110 RSA key, leading zeros
/// stripped as ring wants them.
fn rsa_parts(key: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = key.split_first()?;
    let (e_len, rest) = if first == 0 {
        let (len, rest) = rest.split_first_chunk::<2>()?;
        (u16::from_be_bytes(*len) as usize, rest)
    } else {
        (first as usize, rest)
    };
    if e_len == 0 || rest.len() <= e_len {
        return None;
    }
    let (e, n) = rest.split_at(e_len);
    Some((strip_zeros(e), strip_zeros(n)))
}

fn strip_zeros(b: &[u8]) -> &[u8] {
    let lead = b.iter().take_while(|&&x| x == 0).count();
    &b[lead..]
}

fn bit_len(n: &[u8]) -> usize {
    n.first().map_or(0, |&top| n.len() * 8 - top.leading_zeros() as usize)
}

/// What the key material of a DNSKEY of algorithm `alg` is good for.
pub(crate) fn key_use(alg: u8, key: &[u8]) -> KeyUse {
    match alg {
        5 | 7 | 8 | 10 => match rsa_parts(key) {
            None => KeyUse::Malformed,
            Some((e, n)) => {
                let bits = bit_len(n);
                // ring takes exponents up to 2^33 - 1: five bytes at most.
                if !(RSA_MIN_BITS..=RSA_MAX_BITS).contains(&bits) || e.len() > 5 || e.is_empty() {
                    KeyUse::Unsupported
                } else {
                    KeyUse::Usable
                }
            }
        },
        13 if key.len() == 64 => KeyUse::Usable,
        14 if key.len() == 96 => KeyUse::Usable,
        15 if key.len() == 32 => KeyUse::Usable,
        13..=15 => KeyUse::Malformed,
        _ => KeyUse::UnknownAlgorithm,
    }
}

/// Whether `signature` by the DNSKEY of algorithm `alg` with key material
/// `key` is good over `data`. Any key or signature ring will not take is
/// a bad signature: this never panics and never errs otherwise.
pub(crate) fn verify(alg: u8, key: &[u8], data: &[u8], sig: &[u8]) -> bool {
    let rsa = |params: &signature::RsaParameters| {
        rsa_parts(key)
            .is_some_and(|(e, n)| signature::RsaPublicKeyComponents { n, e }.verify(params, data, sig).is_ok())
    };
    // ECDSA keys are the raw x|y (RFC 6605 §4); ring wants the SEC1
    // uncompressed point, 0x04|x|y.
    let ecdsa = |params: &'static signature::EcdsaVerificationAlgorithm, len: usize| {
        if key.len() != len {
            return false;
        }
        let mut point = [0u8; 97];
        point[0] = 4;
        point[1..=len].copy_from_slice(key);
        signature::UnparsedPublicKey::new(params, &point[..=len]).verify(data, sig).is_ok()
    };
    match alg {
        5 | 7 => rsa(&signature::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY),
        8 => rsa(&signature::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY),
        10 => rsa(&signature::RSA_PKCS1_1024_8192_SHA512_FOR_LEGACY_USE_ONLY),
        13 => ecdsa(&signature::ECDSA_P256_SHA256_FIXED, 64),
        14 => ecdsa(&signature::ECDSA_P384_SHA384_FIXED, 96),
        15 => key.len() == 32 && signature::UnparsedPublicKey::new(&signature::ED25519, key).verify(data, sig).is_ok(),
        _ => false,
    }
}

/// The key tag of a DNSKEY's RDATA (RFC 4034 Appendix B). Algorithm 1
/// (RSA/MD5) has a tag of its own, but it is not supported, so no key of
/// it is ever looked up.
pub fn key_tag(rdata: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for (i, &b) in rdata.iter().enumerate() {
        acc += if i & 1 == 0 { (b as u32) << 8 } else { b as u32 };
    }
    acc += (acc >> 16) & 0xffff;
    (acc & 0xffff) as u16
}

/// The digest of a DS of type `t` for the DNSKEY `rdata` at `owner`
/// (RFC 4034 §5.1.4: canonical owner, then RDATA), written to `out`;
/// returns its length, or `None` for an unsupported type.
pub(crate) fn ds_digest(t: u8, owner: &[u8], rdata: &[u8], out: &mut [u8; 48]) -> Option<usize> {
    let alg = match t {
        1 => &digest::SHA1_FOR_LEGACY_USE_ONLY,
        2 => &digest::SHA256,
        4 => &digest::SHA384,
        _ => return None,
    };
    let mut ctx = digest::Context::new(alg);
    let mut lower = [0u8; 255];
    let owner = owner.get(..255).unwrap_or(owner);
    for (d, s) in lower.iter_mut().zip(owner) {
        *d = s.to_ascii_lowercase();
    }
    ctx.update(&lower[..owner.len()]);
    ctx.update(rdata);
    let d = ctx.finish();
    out[..d.as_ref().len()].copy_from_slice(d.as_ref());
    Some(d.as_ref().len())
}

/// The NSEC3 hash (RFC 5155 §5): SHA-1 of the lowercase wire name and the
/// salt, then `iterations` more times of the digest and the salt. The
/// caller bounds `iterations` (see `Limits`).
pub(crate) fn nsec3_hash(name: &[u8], salt: &[u8], iterations: u16) -> [u8; 20] {
    let mut lower = [0u8; 255];
    let name = name.get(..255).unwrap_or(name);
    for (d, s) in lower.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(&lower[..name.len()]);
    ctx.update(salt);
    let mut h = [0u8; 20];
    h.copy_from_slice(ctx.finish().as_ref());
    for _ in 0..iterations {
        let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
        ctx.update(&h);
        ctx.update(salt);
        h.copy_from_slice(ctx.finish().as_ref());
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsa_key_sizes() {
        let key = |e: &[u8], bits: usize| {
            let mut k = vec![e.len() as u8];
            k.extend_from_slice(e);
            let mut n = vec![0xffu8; bits / 8];
            n[0] = 0x80;
            k.extend_from_slice(&n);
            k
        };
        assert_eq!(key_use(8, &key(&[1, 0, 1], 1024)), KeyUse::Usable);
        assert_eq!(key_use(8, &key(&[1, 0, 1], 512)), KeyUse::Unsupported);
        assert_eq!(key_use(8, &key(&[1, 0, 1], 16384)), KeyUse::Unsupported);
        assert_eq!(key_use(8, &key(&[1, 0, 0, 0, 0, 0, 1], 2048)), KeyUse::Unsupported);
        // A leading zero in the modulus does not count as a bit.
        let mut k = key(&[3], 1024);
        k.insert(2, 0);
        assert_eq!(key_use(5, &k), KeyUse::Usable);
        // The three-byte exponent length form.
        let mut long = vec![0, 0, 3, 1, 0, 1];
        long.extend_from_slice(&[0x80; 128]);
        assert_eq!(key_use(10, &long), KeyUse::Usable);
        assert_eq!(key_use(8, &[3, 1, 0]), KeyUse::Malformed);
        assert_eq!(key_use(8, &[]), KeyUse::Malformed);
        assert_eq!(key_use(13, &[0; 63]), KeyUse::Malformed);
        assert_eq!(key_use(16, &[0; 57]), KeyUse::UnknownAlgorithm);
        assert!(!verify(8, &key(&[1, 0, 1], 1024), b"data", &[0; 128]));
        assert!(!verify(13, &[0; 64], b"data", &[0; 64]));
        assert!(!verify(15, &[0; 31], b"data", &[0; 64]));
    }

    /// RFC 4034 §5.4's example key, its tag (Appendix B) and SHA-1 DS.
    #[test]
    fn rfc4034_key_tag_and_ds() {
        let key = super::super::text::base64(
            "AQOeiiR0GOMYkDshWoSKz9XzfwJr1AYtsmx3TGkJaNXVbfi/2pHm822aJ5iI9BMzNXxeYCmZDRD99WYwYqUSdjMmmAphXdvxegXd/M5+X7OrzKBaMbCVdFLUUh6DhweJBjEVv5f2wwjM9XzcnOf+EPbtG9DMBmADjFDc2w/rljwvFw==",
        )
        .unwrap();
        let mut rdata = vec![1, 0, 3, 5];
        rdata.extend_from_slice(&key);
        assert_eq!(key_tag(&rdata), 60485);
        let mut out = [0u8; 48];
        let owner = crate::dnssec::name::from_text("dskey.example.com.");
        let len = ds_digest(1, &owner, &rdata, &mut out).unwrap();
        assert_eq!(super::super::text::hex(&out[..len]), "2bb183af5f22588179a53b0a98631fad1a292118");
        assert!(ds_digest(3, &owner, &rdata, &mut out).is_none());
    }

    /// RFC 5155 Appendix A's hashes (salt aabbccdd, 12 iterations), also
    /// what `ldns-nsec3-hash -t 12 -s aabbccdd` prints.
    #[test]
    fn rfc5155_hashes() {
        let salt = [0xaa, 0xbb, 0xcc, 0xdd];
        for (name, hash) in [
            ("example.", "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom"),
            ("a.example.", "35mthgpgcu1qg68fab165klnsnk3dpvl"),
            ("ai.example.", "gjeqe526plbf1g8mklp59enfd789njgi"),
            ("ns1.example.", "2t7b4g4vsa5smi47k61mv5bv1a22bojr"),
            ("w.example.", "k8udemvp1j2f7eg6jebps17vp3n8i58h"),
            ("*.w.example.", "r53bq7cc2uvmubfu5ocmm6pers9tk9en"),
            ("x.w.example.", "b4um86eghhds6nea196smvmlo4ors995"),
            ("Y.W.Example.", "ji6neoaepv8b5o6k4ev33abha8ht9fgc"),
            ("x.y.w.example.", "2vptu5timamqttgl4luu9kg21e0aor3s"),
            ("xx.example.", "t644ebqk9bibcna874givr6joj62mlhv"),
        ] {
            let h = nsec3_hash(&crate::dnssec::name::from_text(name), &salt, 12);
            assert_eq!(super::super::text::base32hex(&h), hash, "{name}");
        }
    }
}
