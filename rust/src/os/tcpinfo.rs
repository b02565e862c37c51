//! TCP_INFO reader (struct tcp_info from include/uapi/linux/tcp.h, prefix).
//!
//! TFO semantics, from the kernel source (net/ipv4/tcp_input.c,
//! tcp_rcv_fastopen_synack, and tcp_get_info in net/ipv4/tcp.c):
//! * `tcpi_options & TCPI_OPT_SYN_DATA` (32) is set from `tp->syn_data_acked`.
//!   On the client it becomes 1 only when data was sent in the SYN *and* the
//!   SYN-ACK acknowledged it (same moment TcpExtTCPFastOpenActive is bumped).
//!   On a server-side socket it means the connection was created from an
//!   accepted SYN carrying data.
//! * `tcpi_fastopen_client_fail` (2 bits after `tcpi_delivery_rate_app_limited`)
//!   says why TFO failed on the client: 0 unspecified/none, 1 cookie
//!   unavailable, 2 SYN-ACK did not ack the SYN data, 3 SYN-ACK did not ack the
//!   SYN data after SYN retransmission. Values 2 and 3 imply data *was* put in
//!   the SYN. So we report syn_data = (opt&32)!=0 || fail in {2,3},
//!   syn_data_acked = (opt&32)!=0.
use std::os::fd::AsRawFd;

pub const TCPI_OPT_SYN_DATA: u8 = 32;

#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
pub struct TcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub wscale: u8,
    /// bit0 delivery_rate_app_limited, bits1-2 fastopen_client_fail (LE bitfield)
    pub flags: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
}

/// tcpi_state of an established connection, and of a closed one.
pub const TCP_ESTABLISHED: u8 = 1;
pub const TCP_CLOSE: u8 = 7;

impl TcpInfo {
    pub fn fastopen_client_fail(&self) -> u8 {
        (self.flags >> 1) & 3
    }
    pub fn syn_data_acked(&self) -> bool {
        self.options & TCPI_OPT_SYN_DATA != 0
    }
    pub fn syn_data_sent(&self) -> bool {
        self.syn_data_acked() || matches!(self.fastopen_client_fail(), 2 | 3)
    }
}

/// TCP_INFO of a TCP socket (the prefix above; older kernels fill less of it).
pub fn get<S: AsRawFd>(s: &S) -> std::io::Result<TcpInfo> {
    let mut ti = TcpInfo::default();
    let mut len = std::mem::size_of::<TcpInfo>() as libc::socklen_t;
    // SAFETY: ti is a plain repr(C) buffer of `len` bytes; the kernel writes
    // at most `len` bytes and updates `len`.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut ti as *mut TcpInfo as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ti)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_loopback_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        for sock in [&c, &s] {
            let ti = get(sock).unwrap();
            assert_eq!(ti.state, TCP_ESTABLISHED);
            assert!(ti.snd_mss > 0 && ti.snd_cwnd > 0, "{ti:?}");
            assert!(!ti.syn_data_acked() && !ti.syn_data_sent());
        }
        let ti = TcpInfo { options: TCPI_OPT_SYN_DATA, flags: 0b110, ..Default::default() };
        assert!(ti.syn_data_acked() && ti.syn_data_sent() && ti.fastopen_client_fail() == 3);
        let ti = TcpInfo { flags: 0b100, ..Default::default() };
        assert!(!ti.syn_data_acked() && ti.syn_data_sent());
    }
}
