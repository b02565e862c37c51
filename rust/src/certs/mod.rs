//! `pltlab-dp ca`: a per-corpus CA and one leaf certificate carrying every
//! https host as a SAN, plus the rustls configuration helpers shared by the
//! replay server and the loader.
//!
//! Files written (fixed names): `ca.pem` (CA certificate), `ca.key` (CA key),
//! `hosts.pem` (leaf certificate followed by the CA certificate),
//! `hosts.key` (leaf key, PKCS#8). Stdout: one JSON object with the paths and
//! `spki` (= `spki_sha256`) = base64(sha256(SubjectPublicKeyInfo of the leaf
//! key)), the value Chromium's `--ignore-certificate-errors-spki-list` takes.
use anyhow::{bail, Context, Result};
use base64::Engine as _;
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

// QUIC's TLS (issue 26 step 3). Until the replay over h3 (step 4) and the loader's QUIC
// transport (step 8) use it, only its tests do.
#[cfg_attr(not(test), allow(dead_code))]
pub mod quic;

#[derive(clap::Args)]
pub struct Args {
    /// Output directory (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Host name (or IP address) to put in the leaf certificate; repeatable.
    #[arg(long = "host", required = true)]
    pub hosts: Vec<String>,
}

pub struct Generated {
    pub ca_pem: String,
    pub ca_key_pem: String,
    pub leaf_pem: String,
    pub leaf_key_pem: String,
    pub spki_sha256: String,
}

fn current_year() -> i32 {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    1970 + (secs / 31_556_952) as i32
}

/// Generates the CA and the leaf certificate (ECDSA P-256 keys).
pub fn generate(hosts: &[String]) -> Result<Generated> {
    if hosts.is_empty() {
        bail!("at least one --host is needed");
    }
    let year = current_year();
    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let mut ca = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "pltlab replay CA");
    dn.push(DnType::OrganizationName, "pltlab");
    ca.distinguished_name = dn;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    ca.not_before = date_time_ymd(year - 1, 1, 1);
    ca.not_after = date_time_ymd(year + 10, 1, 1);
    let ca_cert = ca.self_signed(&ca_key).context("self-signing the CA")?;

    let leaf_key = KeyPair::generate().context("generating the leaf key")?;
    let mut leaf = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, hosts[0].clone());
    leaf.distinguished_name = dn;
    let mut sans = Vec::new();
    for h in hosts {
        let h = h.trim().trim_end_matches('.').to_ascii_lowercase();
        if h.is_empty() {
            continue;
        }
        if let Ok(ip) = h.parse::<std::net::IpAddr>() {
            sans.push(SanType::IpAddress(ip));
        } else {
            let name = h.clone().try_into().with_context(|| format!("host {h:?} is not a valid DNS name"))?;
            sans.push(SanType::DnsName(name));
        }
    }
    sans.dedup();
    leaf.subject_alt_names = sans;
    leaf.is_ca = IsCa::NoCa; // (DER omits the default cA: false; aioquic refuses it written out)
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.not_before = date_time_ymd(year - 1, 1, 1);
    leaf.not_after = date_time_ymd(year + 10, 1, 1);
    let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).context("signing the leaf certificate")?;

    let spki = leaf_key.public_key_der();
    let digest = ring::digest::digest(&ring::digest::SHA256, &spki);
    Ok(Generated {
        ca_pem: ca_cert.pem(),
        ca_key_pem: ca_key.serialize_pem(),
        leaf_pem: format!("{}{}", leaf_cert.pem(), ca_cert.pem()),
        leaf_key_pem: leaf_key.serialize_pem(),
        spki_sha256: base64::engine::general_purpose::STANDARD.encode(digest.as_ref()),
    })
}

fn write_file(path: &Path, data: &str, mode: u32) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(data.as_bytes()).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

pub fn run(a: Args) -> Result<()> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("cannot create output directory {}", a.out.display()))?;
    let g = generate(&a.hosts)?;
    let paths = [
        (a.out.join("ca.pem"), &g.ca_pem, 0o644),
        (a.out.join("ca.key"), &g.ca_key_pem, 0o600),
        (a.out.join("hosts.pem"), &g.leaf_pem, 0o644),
        (a.out.join("hosts.key"), &g.leaf_key_pem, 0o600),
    ];
    for (p, d, m) in &paths {
        write_file(p, d, *m)?;
    }
    let out = serde_json::json!({
        "ca": paths[0].0, "ca_key": paths[1].0, "cert": paths[2].0, "key": paths[3].0,
        "hosts": a.hosts, "spki": g.spki_sha256, "spki_sha256": g.spki_sha256,
    });
    println!("{out}");
    Ok(())
}

/// rustls crypto provider used everywhere (ring: small, quick to build).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

pub fn load_certs(path: &Path) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    let data = std::fs::read(path).with_context(|| format!("cannot read certificate file {}", path.display()))?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut &data[..])
        .collect::<Result<_, _>>()
        .with_context(|| format!("bad PEM in {}", path.display()))?;
    if certs.is_empty() {
        bail!("no certificate in {}", path.display());
    }
    Ok(certs)
}

pub fn load_key(path: &Path) -> Result<rustls::pki_types::PrivateKeyDer<'static>> {
    let data = std::fs::read(path).with_context(|| format!("cannot read key file {}", path.display()))?;
    rustls_pemfile::private_key(&mut &data[..])
        .with_context(|| format!("bad PEM in {}", path.display()))?
        .with_context(|| format!("no private key in {}", path.display()))
}

/// Server config: one certificate chain for every host; `alpn`: the protocols offered, in
/// preference order (the server picks its first one the client also offers). TLS 1.3 as a CDN
/// front end does it: 2 session tickets per connection (OpenSSL's default), stateful (a
/// ticket is a key into `sessions`, single use: what rustls needs to accept early data),
/// early data up to `max_early_data` bytes (0: refused) answered at once ("0.5-RTT" data).
pub fn server_config(
    cert: &Path,
    key: &Path,
    alpn: &[&str],
    sessions: Arc<dyn rustls::server::StoresServerSessions>,
    max_early_data: u32,
) -> Result<Arc<rustls::ServerConfig>> {
    let certs = load_certs(cert)?;
    let key = load_key(key)?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("certificate and key do not match")?;
    cfg.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    cfg.session_storage = sessions;
    cfg.send_tls13_tickets = 2;
    cfg.max_early_data_size = max_early_data;
    cfg.send_half_rtt_data = true;
    Ok(Arc::new(cfg))
}

/// The server's session cache: rustls' in-memory one, which can be emptied (what a ticket key
/// rotation does to the tickets clients hold: their resumption and early data are refused).
#[derive(Debug)]
pub struct Sessions(std::sync::RwLock<Arc<rustls::server::ServerSessionMemoryCache>>);

/// Sessions kept: far more than the tickets one load's connections are given.
const SESSIONS: usize = 1 << 16;

impl Default for Sessions {
    fn default() -> Self {
        Sessions(std::sync::RwLock::new(rustls::server::ServerSessionMemoryCache::new(SESSIONS)))
    }
}

impl Sessions {
    pub fn clear(&self) {
        *self.0.write().unwrap() = rustls::server::ServerSessionMemoryCache::new(SESSIONS);
    }
    fn cache(&self) -> Arc<rustls::server::ServerSessionMemoryCache> {
        self.0.read().unwrap().clone()
    }
}

impl rustls::server::StoresServerSessions for Sessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.cache().put(key, value)
    }
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.cache().get(key)
    }
    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.cache().take(key)
    }
    fn can_cache(&self) -> bool {
        true
    }
}

/// How the client resumes: never (every handshake full), or from the tickets of `store`
/// (resumption; `early_data`: the first request of a resumed connection as 0-RTT data).
#[derive(Clone, Default)]
pub enum ClientResumption {
    #[default]
    Off,
    Tickets {
        store: Arc<dyn rustls::client::ClientSessionStore>,
        early_data: bool,
    },
}

/// The CA certificate(s) in `ca`, as the roots a client trusts.
fn root_store(ca: &Path) -> Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    for c in load_certs(ca)? {
        roots.add(c).with_context(|| format!("bad CA certificate in {}", ca.display()))?;
    }
    Ok(roots)
}

/// Client config trusting exactly the CA(s) in `ca`; `alpn`: the protocols offered, in order.
#[cfg(test)]
pub fn client_config(ca: &Path, alpn: &[&str]) -> Result<Arc<rustls::ClientConfig>> {
    client_config_with(ca, alpn, &ClientResumption::Off)
}

/// As `client_config`, resuming as `resumption` says.
pub fn client_config_with(
    ca: &Path,
    alpn: &[&str],
    resumption: &ClientResumption,
) -> Result<Arc<rustls::ClientConfig>> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(root_store(ca)?)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    match resumption {
        ClientResumption::Off => cfg.resumption = rustls::client::Resumption::disabled(),
        ClientResumption::Tickets { store, early_data } => {
            cfg.resumption = rustls::client::Resumption::store(store.clone());
            cfg.enable_early_data = *early_data;
        }
    }
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_ca_and_leaf_with_sans() {
        let g = generate(&["www.example.com".into(), "static.example.com".into(), "10.0.0.1".into()]).unwrap();
        assert!(g.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(g.leaf_pem.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(g.leaf_key_pem.contains("PRIVATE KEY"));
        let raw = base64::engine::general_purpose::STANDARD.decode(&g.spki_sha256).unwrap();
        assert_eq!(raw.len(), 32);
        // rustls accepts the pair and verifies the leaf against the CA.
        let dir = std::env::temp_dir().join(format!("pltlab-ca-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), &g.ca_pem).unwrap();
        std::fs::write(dir.join("hosts.pem"), &g.leaf_pem).unwrap();
        std::fs::write(dir.join("hosts.key"), &g.leaf_key_pem).unwrap();
        server_config(
            &dir.join("hosts.pem"),
            &dir.join("hosts.key"),
            &["h2", "http/1.1"],
            Arc::new(Sessions::default()),
            0,
        )
        .unwrap();
        client_config(&dir.join("ca.pem"), &["http/1.1"]).unwrap();
        let certs = load_certs(&dir.join("hosts.pem")).unwrap();
        let roots = {
            let mut r = rustls::RootCertStore::empty();
            r.add(load_certs(&dir.join("ca.pem")).unwrap().remove(0)).unwrap();
            Arc::new(r)
        };
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider()).build().unwrap();
        use rustls::client::danger::ServerCertVerifier;
        let now = rustls::pki_types::UnixTime::now();
        for h in ["www.example.com", "static.example.com"] {
            let name = rustls::pki_types::ServerName::try_from(h).unwrap();
            verifier.verify_server_cert(&certs[0], &certs[1..], &name, &[], now).unwrap();
        }
        let bad = rustls::pki_types::ServerName::try_from("other.example.com").unwrap();
        assert!(verifier.verify_server_cert(&certs[0], &certs[1..], &bad, &[], now).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn unwritable_dir_is_a_clear_error() {
        let e = run(Args { out: "/proc/pltlab-nope/x".into(), hosts: vec!["a.example".into()] }).unwrap_err();
        assert!(format!("{e:#}").contains("cannot create output directory"), "{e:#}");
    }
}
