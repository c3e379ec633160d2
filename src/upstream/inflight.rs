//! Misses being resolved, keyed by cache key: identical misses at the same
//! time go upstream once, and their askers wait on the leader's outcome
//! (a bounded number of them).

use super::*;

/// A miss resolved upstream: the prepared answer and who gave it.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The answer, ready for replay to each waiting client.
    pub stored: Arc<Stored>,
    /// The server that answered.
    pub upstream: SocketAddr,
    /// What replaced the answer with the block answer (rebind protection), if anything did.
    pub blocked_by: Option<Arc<str>>,
    /// No list of any group blocks a name its CNAMEs lead to: no client
    /// needs its own look at them (see `query::Engine::cnames`).
    pub cnames_pass_all: bool,
    /// What a validating set's DNSSEC check decided, for the query log
    /// (`None`: not validated); the clients waiting on the miss share its key, CD bit included.
    pub dnssec: Option<crate::answer::Dnssec>,
}

/// What a miss resolved to; `None` means SERVFAIL.
pub type Resolution = Option<Resolved>;

/// Clients waiting for one in-flight miss.
type Waiters = Vec<Sender<Resolution>>;

/// Misses currently being resolved, keyed by cache key.
#[derive(Debug, Default)]
pub struct Inflight {
    /// Waiters per key; the leader holds a [`Lead`] that completes the entry.
    /// Keyed by the miss's own key: joining allocates no copy of it.
    pub(super) map: Mutex<FxHashMap<Arc<[u8]>, Waiters>>,
}

/// The caller's part in resolving a key.
pub enum Join {
    /// First asker: resolve it and hand the outcome to [`Lead::complete`].
    Lead(Lead),
    /// Someone is already asking: wait for their outcome.
    Wait(Receiver<Resolution>),
    /// Too many misses in flight: answer SERVFAIL now.
    Full,
}

/// The right (and duty) to complete one in-flight key. Dropping it without
/// completing (e.g. at shutdown) releases the waiters with SERVFAIL.
pub struct Lead {
    pub(super) inflight: Arc<Inflight>,
    pub(super) key: Option<Arc<[u8]>>,
}

impl Inflight {
    /// Registers interest in `key`; at most `limit` distinct keys are in flight.
    pub fn join(self: &Arc<Self>, key: &Arc<[u8]>, limit: usize) -> Join {
        let Ok(mut map) = self.map.lock() else {
            return Join::Full;
        };
        if let Some(waiters) = map.get_mut(&**key) {
            if waiters.len() >= MAX_WAITERS {
                return Join::Full;
            }
            let (tx, rx) = bounded(1);
            waiters.push(tx);
            return Join::Wait(rx);
        }
        if map.len() >= limit {
            return Join::Full;
        }
        map.insert(key.clone(), Vec::new());
        Join::Lead(Lead { inflight: self.clone(), key: Some(key.clone()) })
    }

    /// Keys in flight now.
    pub fn len(&self) -> usize {
        self.map.lock().map_or(0, |m| m.len())
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Lead {
    /// Hands `outcome` to every waiter and forgets the key.
    pub fn complete(mut self, outcome: Resolution) {
        self.finish(outcome);
    }

    pub(super) fn finish(&mut self, outcome: Resolution) {
        let Some(key) = self.key.take() else { return };
        let waiters = self.inflight.map.lock().ok().and_then(|mut m| m.remove(&*key));
        for tx in waiters.into_iter().flatten() {
            let _ = tx.try_send(outcome.clone());
        }
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        self.finish(None);
    }
}

/// Clients waiting on one in-flight miss besides the one that sent it.
const MAX_WAITERS: usize = 256;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn inflight_coalesces_and_releases() {
        let inf = Arc::new(Inflight::default());
        let key = |k: &[u8]| -> Arc<[u8]> { k.into() };
        let Join::Lead(lead) = inf.join(&key(b"k"), 10) else { panic!() };
        let Join::Wait(rx) = inf.join(&key(b"k"), 10) else { panic!() };
        assert!(matches!(inf.join(&key(b"other"), 10), Join::Lead(_)));
        lead.complete(None);
        assert!(rx.try_recv().unwrap().is_none());
        assert!(inf.is_empty());
        let Join::Lead(lead) = inf.join(&key(b"k"), 10) else { panic!() };
        let Join::Wait(rx) = inf.join(&key(b"k"), 10) else { panic!() };
        drop(lead);
        assert!(rx.try_recv().unwrap().is_none(), "a dropped leader releases waiters");
        assert!(inf.is_empty());
        let _a = inf.join(&key(b"a"), 2);
        let _b = inf.join(&key(b"b"), 2);
        assert!(matches!(inf.join(&key(b"c"), 2), Join::Full), "limit of distinct keys");
        assert!(matches!(inf.join(&key(b"a"), 2), Join::Wait(_)), "joining a key in flight is not limited by it");
    }
}
