//! Response scheduling of one h2 connection by the requests' RFC 9218 priorities, as CDN front
//! ends do it (Cloudflare, h2o): of the responses with data to send, those of the lowest
//! urgency go first; among them a non-incremental one goes alone, the oldest stream first;
//! incremental ones (none non-incremental left at that urgency) share the connection. A pure
//! state machine: h2.rs asks it before each chunk of a response.
use std::collections::BTreeMap;

/// How the replay server orders the responses of an h2 or h3 connection (manifest `h2_priority`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
pub enum Scheme {
    /// By the requests' `priority` headers (RFC 9218), as above.
    #[serde(rename = "rfc9218")]
    Rfc9218,
    /// Every response with data sends at once; the h2 crate interleaves them (round robin).
    #[default]
    #[serde(rename = "round-robin")]
    RoundRobin,
}

/// A request's priority (RFC 9218 section 4): urgency 0 (first) .. 7, default 3; incremental,
/// default false.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub urgency: u8,
    pub incremental: bool,
}

impl Default for Priority {
    fn default() -> Self {
        Priority { urgency: 3, incremental: false }
    }
}

/// The priority a `priority` field value asks for (a Structured Fields dictionary): its `u`
/// (an integer 0-7) and `i` (a boolean: bare `i`, `i=?1`, `i=?0`); other members, parameters
/// and bad values are ignored (the defaults stay), as RFC 9218 says a server should.
pub fn parse(value: &str) -> Priority {
    let mut p = Priority::default();
    for member in value.split(',') {
        let item = member.split(';').next().unwrap_or("").trim();
        let (key, val) = match item.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (item, None),
        };
        match (key, val) {
            ("u", Some(v)) => {
                if let Ok(u) = v.parse::<u8>() {
                    if u <= 7 {
                        p.urgency = u;
                    }
                }
            }
            ("i", None) | ("i", Some("?1")) => p.incremental = true,
            ("i", Some("?0")) => p.incremental = false,
            _ => {}
        }
    }
    p
}

/// The responses of one connection not yet sent, by arrival order, and whether each is ready
/// (its data at hand: not reading the request's body, not in its think time).
#[derive(Debug, Default)]
pub struct Schedule {
    pending: BTreeMap<u64, (Priority, bool)>,
}

impl Schedule {
    /// Response `seq` (the connection's requests numbered in arrival order) is to be sent,
    /// `ready` or not yet.
    pub fn add(&mut self, seq: u64, p: Priority, ready: bool) {
        self.pending.insert(seq, (p, ready));
    }

    /// Response `seq` has its data at hand.
    pub fn ready(&mut self, seq: u64) {
        if let Some(e) = self.pending.get_mut(&seq) {
            e.1 = true;
        }
    }

    /// Response `seq` is done (sent, reset or given up).
    pub fn remove(&mut self, seq: u64) {
        self.pending.remove(&seq);
    }

    /// Whether response `seq` is the only one of its connection not yet sent (ready or not).
    pub fn alone(&self, seq: u64) -> bool {
        self.pending.len() == 1 && self.pending.contains_key(&seq)
    }

    /// Whether response `seq` (ready) may send its next chunk now: responses not ready do not
    /// hold the others back.
    pub fn may_send(&self, seq: u64) -> bool {
        let Some((me, _)) = self.pending.get(&seq) else { return true };
        let ready = || self.pending.iter().filter(|(_, (_, r))| *r).map(|(s, (p, _))| (*s, *p));
        let best = ready().map(|(_, p)| p.urgency).min().unwrap_or(me.urgency);
        if me.urgency != best {
            return false;
        }
        match ready().find(|(_, p)| p.urgency == best && !p.incremental) {
            Some((first, _)) => first == seq,
            None => true,
        }
    }
}

/// The same order as a `Schedule`, as one QUIC send priority per stream (quinn's: higher first,
/// round robin among equal ones): urgency first; at an urgency, non-incremental responses above
/// incremental ones and in arrival order (`seq`: the older higher, so one at a time); the
/// incremental ones of an urgency all equal (they share). Responses without data to send hold
/// nothing back there either.
pub fn quic_priority(p: Priority, seq: u64) -> i32 {
    const ORDER: i32 = 1 << 23;
    let by_urgency = i32::from(7 - p.urgency.min(7)) << 24;
    if p.incremental {
        by_urgency
    } else {
        by_urgency + ORDER + (ORDER - 1 - seq.min(ORDER as u64 - 1) as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(urgency: u8, incremental: bool) -> Priority {
        Priority { urgency, incremental }
    }

    #[test]
    fn parses_what_chromium_sends_and_ignores_the_rest() {
        assert_eq!(parse("u=0, i"), p(0, true));
        assert_eq!(parse("u=1"), p(1, false));
        assert_eq!(parse("i"), p(3, true));
        assert_eq!(parse(""), p(3, false));
        assert_eq!(parse("u=5;x=1, i=?1, foo=bar"), p(5, true));
        assert_eq!(parse("i=?0, u=2"), p(2, false));
        // out of range, not an integer, a string: the default urgency stays
        assert_eq!(parse("u=8"), p(3, false));
        assert_eq!(parse("u=-1, i"), p(3, true));
        assert_eq!(parse("u=\"0\""), p(3, false));
        assert_eq!(parse("u=1.5"), p(3, false));
    }

    #[test]
    fn lowest_urgency_first_non_incremental_one_at_a_time() {
        let mut s = Schedule::default();
        s.add(1, p(4, true), true); // an image
        assert!(s.may_send(1));
        s.add(3, p(1, false), true); // a blocking script
        s.add(5, p(1, false), true); // another
        assert!(!s.may_send(1));
        assert!(s.may_send(3));
        assert!(!s.may_send(5), "same urgency, not incremental: in stream order");
        s.remove(3);
        assert!(s.may_send(5));
        s.add(7, p(0, false), true); // a stylesheet arrives: everything else waits
        assert!(s.may_send(7) && !s.may_send(5) && !s.may_send(1));
        s.remove(7);
        s.remove(5);
        assert!(s.may_send(1));
        // unknown (finished) responses are never held
        assert!(s.may_send(42));
    }

    #[test]
    fn responses_not_ready_hold_nothing_back() {
        let mut s = Schedule::default();
        s.add(1, p(0, false), false); // in its think time
        s.add(3, p(3, false), true);
        assert!(s.may_send(3));
        s.ready(1);
        assert!(s.may_send(1) && !s.may_send(3));
    }

    #[test]
    fn alone_only_without_any_other_response_pending() {
        let mut s = Schedule::default();
        s.add(1, p(3, false), true);
        assert!(s.alone(1));
        s.add(3, p(5, true), false); // not ready yet: it may be soon, so 1 is not alone
        assert!(!s.alone(1) && !s.alone(3));
        s.remove(3);
        assert!(s.alone(1));
        assert!(!s.alone(7), "an unknown response is not the one pending");
    }

    #[test]
    fn quic_priorities_order_as_the_schedule_does() {
        let q = quic_priority;
        assert!(q(p(0, false), 9) > q(p(0, true), 1));
        assert!(q(p(0, true), 1) > q(p(1, false), 0));
        assert!(q(p(3, false), 1) > q(p(3, false), 2), "older first");
        assert_eq!(q(p(4, true), 1), q(p(4, true), 7), "incremental ones share");
        assert!(q(p(7, false), u64::MAX) >= 0 && q(p(0, false), 0) > 0);
    }

    #[test]
    fn incremental_responses_of_one_urgency_share() {
        let mut s = Schedule::default();
        s.add(1, p(2, true), true);
        s.add(3, p(2, true), true);
        assert!(s.may_send(1) && s.may_send(3));
        s.add(5, p(2, false), true);
        assert!(s.may_send(5) && !s.may_send(1) && !s.may_send(3));
        s.remove(5);
        assert!(s.may_send(1) && s.may_send(3));
    }
}
