//! The trust the kit gives the client under test: the CA certificate
//! connaudit serve writes in CONNAUDIT_CA, added to reqwest as any client
//! adds a root (`ClientBuilder::add_root_certificate`). serve's HTTPS
//! listeners present a certificate of their own signed by that CA, which
//! rustls verifies as it would any server's; reqwest sets ALPN itself.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// The CA certificate the client trusts.
#[derive(Debug, Clone)]
pub struct Trust {
    cert: CertificateDer<'static>,
}

impl Trust {
    /// The first certificate of a PEM text; an error when it holds none.
    pub fn from_pem(pem: &[u8]) -> Result<Trust, String> {
        let cert = CertificateDer::from_pem_slice(pem).map_err(|e| format!("not a PEM certificate: {e}"))?;
        Ok(Trust { cert })
    }

    /// CONNAUDIT_CA's certificate; None when the variable is not set.
    pub fn from_env() -> Result<Option<Trust>, String> {
        let Ok(path) = std::env::var("CONNAUDIT_CA") else { return Ok(None) };
        let pem = std::fs::read(&path).map_err(|e| format!("CONNAUDIT_CA {path}: {e}"))?;
        Trust::from_pem(&pem).map(Some).map_err(|e| format!("CONNAUDIT_CA {path}: {e}"))
    }

    /// The certificate as reqwest takes it, for add_root_certificate.
    pub fn certificate(&self) -> Result<reqwest::Certificate, String> {
        reqwest::Certificate::from_der(self.cert.as_ref()).map_err(|e| format!("CONNAUDIT_CA: {e}"))
    }
}
