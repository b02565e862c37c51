//! The scheduler's vocabulary (scheduler.rs, policy.rs), shared with the driver that speaks it
//! (driver.rs): the events it is told, the actions it asks for, the timers it sets. As JSON
//! (`pltlab-dp schedule`, schedule.rs: a modelled network's driver) each is an object of one
//! key, its name in snake case: `{"connected": 0}`, `{"done": {"conn": 0, "keep_alive": true}}`,
//! `{"timer": {"ready": 3}}`.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the driver reports.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// A timer set by `Action::Timer` fired.
    Timer(Timer),
    /// Connection `conn` finished setting up (TCP, and TLS if any): it can take a request.
    Connected(usize),
    /// The first byte of object `.0`'s response arrived.
    FirstByte(usize),
    /// The response on `conn` arrived completely; `keep_alive`: the connection can take another.
    Done { conn: usize, keep_alive: bool },
    /// The server closed idle connection `conn` (a request just sent to it is queued again;
    /// on an h2 connection every stream still open is).
    Closed(usize),
    /// Connection `conn` finished setting up and the server picked h2: it multiplexes.
    ConnectedH2(usize),
    /// Object `object`'s response on h2 connection `conn` arrived completely.
    StreamDone { conn: usize, object: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Timer {
    /// Object `.0`'s delay after its prerequisites is over.
    Ready(usize),
    /// Pool `.0`'s DNS delay is over.
    Dns(usize),
    /// Tight phase `.0` ends (policy.rs).
    TightEnd(usize),
}

/// What the driver does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Open connection `conn` (numbered from 0 in this order) for pool `pool`: the host,
    /// address and scheme of `Scheduler::pool_object(pool)`.
    Open { conn: usize, pool: usize, dns_end_ms: f64 },
    /// Send object `object`'s request on connection `conn`.
    Send { conn: usize, object: usize },
    /// Report `timer` back (`Event::Timer`) at `at` ms.
    Timer { at: f64, timer: Timer },
}
