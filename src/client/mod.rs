//! Who is asking. The packet's source, unless it is a trusted forwarder
//! (`trusted_proxy`, loopback by default: dnsmasq on the router) that names
//! the client in EDNS options ([`edns`]); then that client, for the access
//! list, the rate limit and the query log alike. From anyone else those
//! options are ignored: they are the sender's word, and a client could
//! otherwise pose as another to dodge its rate limit or blame it in the log.
//! Devices' names for the log come from [`names`]; which `config client`
//! (and so which groups) a client is, from [`rules`].

pub mod edns;
pub mod names;
pub mod neighbours;
pub mod rules;

pub use edns::Named;
