package com.github.connaudit.kit;

import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

/**
 * The trust of the HTTPS listeners: the one CA certificate (PEM) that signs them, as the JDK
 * HttpClient, OkHttp and Apache HttpClient 5 take it (an {@link SSLContext}, with its
 * {@link X509TrustManager}) and as Reactor Netty takes it (a Netty
 * {@link SslContext}). Nothing else is trusted.
 */
public final class Tls {

    private final X509Certificate ca;
    private final SSLContext jdk;
    private final X509TrustManager trust;

    private Tls(X509Certificate ca, SSLContext jdk, X509TrustManager trust) {
        this.ca = ca;
        this.jdk = jdk;
        this.trust = trust;
    }

    /**
     * Reads the CA file.
     *
     * @param pemFile the path of a PEM file holding the CA certificate (CONNAUDIT_CA)
     * @return the trust
     * @throws IOException when the file is missing or holds no certificate
     */
    public static Tls fromPem(String pemFile) throws IOException {
        if (pemFile == null || pemFile.isEmpty()) {
            throw new IOException("an HTTPS scenario needs CONNAUDIT_CA, the CA file of its listener");
        }
        try (InputStream in = Files.newInputStream(Path.of(pemFile))) {
            Certificate c = CertificateFactory.getInstance("X.509").generateCertificate(in);
            KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            store.setCertificateEntry("connaudit-ca", c);
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(store);
            SSLContext ctx = SSLContext.getInstance("TLS");
            ctx.init(null, tmf.getTrustManagers(), null);
            X509TrustManager trust = null;
            for (TrustManager m : tmf.getTrustManagers()) {
                if (m instanceof X509TrustManager x) {
                    trust = x;
                }
            }
            if (trust == null) {
                throw new IOException("CONNAUDIT_CA " + pemFile + ": the JDK gave no X509TrustManager for it");
            }
            return new Tls((X509Certificate) c, ctx, trust);
        } catch (GeneralSecurityException e) {
            throw new IOException("CONNAUDIT_CA " + pemFile + ": " + e.getMessage(), e);
        }
    }

    /**
     * The JDK's view.
     *
     * @return an SSLContext trusting the CA only
     */
    public SSLContext jdk() {
        return jdk;
    }

    /**
     * The trust manager of {@link #jdk()}, as OkHttp's {@code sslSocketFactory(factory, trustManager)} takes it.
     *
     * @return the X509TrustManager trusting the CA only
     */
    public X509TrustManager trustManager() {
        return trust;
    }

    /**
     * Netty's view, for Reactor Netty's {@code secure(spec -> spec.sslContext(...))}.
     *
     * @return a client SslContext trusting the CA only
     * @throws IOException when Netty refuses it
     */
    public SslContext netty() throws IOException {
        return SslContextBuilder.forClient().trustManager(ca).build();
    }
}
