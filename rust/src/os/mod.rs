//! Every direct OS call of the data plane, behind small safe functions: socket options and
//! socket inspection (sock, tcpinfo, stamp), clocks and timers (clock), process settings
//! (process: parent-death signal, limits, scheduling, memory locking), signals and epoll.
//! TUN device set-up stays with the link (link/tun.rs): nothing else uses it.
pub mod clock;
pub mod epoll;
pub mod process;
pub mod signal;
pub mod sock;
pub mod stamp;
pub mod tcpinfo;
