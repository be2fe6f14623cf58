//! The trust the kit gives the client under test: exactly the certificate
//! connaudit serve writes in CONNAUDIT_CA.
//!
//! That certificate is self-signed and marked a CA, and the fault listeners
//! present it as their own (internal/loopback.SelfSigned): webpki, which
//! rustls verifies with, refuses a CA certificate as a server's end-entity
//! (`CaUsedAsEndEntity`), so `ClientBuilder::add_root_certificate` with it
//! fails every HTTPS scenario (measured: tests/truth.rs,
//! ca_as_end_entity_is_refused). The kit therefore hands reqwest a rustls
//! `ClientConfig` of its own (`use_preconfigured_tls`) whose verifier
//! accepts the one certificate given, byte for byte, and checks the
//! handshake's signatures with it, as webpki would; the protocols offered by
//! ALPN are set here, as reqwest sets them for a configuration it builds.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, SignatureScheme};

/// The certificate the client trusts.
#[derive(Debug, Clone)]
pub struct Trust {
    cert: CertificateDer<'static>,
}

impl Trust {
    /// The first certificate of a PEM text.
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

    /// A rustls configuration trusting this certificate, offering alpn.
    pub fn config(&self, alpn: &[&str]) -> Result<rustls::ClientConfig, String> {
        // ring's provider, the one reqwest 0.12's rustls-tls features build
        // (rustls 0.23 marks it deprecated for its lack of post-quantum key
        // exchange, which a loopback audit does not need).
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = Pinned {
            cert: self.cert.clone(),
            algs: provider.signature_verification_algorithms,
        };
        let mut c = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("rustls: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        c.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        Ok(c)
    }
}

/// Accepts exactly cert as the server's, and checks signatures with it.
#[derive(Debug)]
struct Pinned {
    cert: CertificateDer<'static>,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if end_entity.as_ref() == self.cert.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(Error::InvalidCertificate(CertificateError::UnknownIssuer))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}
