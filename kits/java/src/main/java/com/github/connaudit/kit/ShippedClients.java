package com.github.connaudit.kit;

import java.util.List;
import java.util.OptionalDouble;

/**
 * Two more clients people ship, as {@link ServeKit.ClientFactory}s: OkHttp and Apache HttpClient 5
 * classic, each configured from every scenario's policy ({@code okhttp}, {@code httpclient5}) and
 * as its users usually build it, whatever the policy ({@code okhttp-defaults},
 * {@code httpclient5-defaults}): what a user's default gets, beside what the policy asks.
 */
public final class ShippedClients {

    private ShippedClients() {}

    /**
     * The sessions configured from each policy.
     *
     * @return okhttp, httpclient5
     */
    public static List<ServeKit.ClientFactory> configured() {
        return List.of(okhttp(false), httpclient5(false));
    }

    /**
     * The sessions of the clients' own defaults.
     *
     * @return okhttp-defaults, httpclient5-defaults
     */
    public static List<ServeKit.ClientFactory> defaults() {
        return List.of(okhttp(true), httpclient5(true));
    }

    /**
     * OkHttp from each policy, or {@code new OkHttpClient()}'s defaults.
     *
     * @param defaults whether to ignore the policy
     * @return the factory
     */
    public static ServeKit.ClientFactory okhttp(boolean defaults) {
        return new ServeKit.ClientFactory() {
            @Override
            public String name() {
                return defaults ? "okhttp-defaults" : "okhttp";
            }

            @Override
            public String version() {
                return OkHttpAudited.versions();
            }

            @Override
            public String config() {
                return defaults ? "new OkHttpClient(): 10 s connect/read/write timeouts, retryOnConnectionFailure true"
                        : "from each policy: timeouts, callTimeout(total), retryOnConnectionFailure(false), a retry interceptor";
            }

            @Override
            public AuditedClient create(Policy policy, Tls tls) throws NotConfigurableException {
                return new OkHttpAudited(policy, defaults, tls);
            }

            /** ConnectionPool(5, 5, MINUTES), OkHttp's default, in both. */
            @Override
            public OptionalDouble idleTimeoutMillis() {
                return OptionalDouble.of(5 * 60 * 1000);
            }

            /** The client's terms, the same for both: what to change is the same setting. */
            @Override
            public String termsResource() {
                return "/okhttp.terms.json";
            }
        };
    }

    /**
     * HttpClient 5 classic from each policy, or {@code HttpClients.custom().build()}'s defaults.
     *
     * @param defaults whether to ignore the policy
     * @return the factory
     */
    public static ServeKit.ClientFactory httpclient5(boolean defaults) {
        return new ServeKit.ClientFactory() {
            @Override
            public String name() {
                return defaults ? "httpclient5-defaults" : "httpclient5";
            }

            @Override
            public String version() {
                return ApacheAudited.versions();
            }

            @Override
            public String config() {
                return defaults ? "HttpClients.custom().build(): DefaultHttpRequestRetryStrategy, validateAfterInactivity 2 s"
                        : "from each policy: ConnectionConfig, RequestConfig, a DefaultHttpRequestRetryStrategy of its numbers";
            }

            @Override
            public AuditedClient create(Policy policy, Tls tls) {
                return new ApacheAudited(policy, defaults, tls, null);
            }

            /** No evictIdleConnections: the pool keeps an idle connection until the server closes it. */
            @Override
            public OptionalDouble idleTimeoutMillis() {
                return OptionalDouble.of(0);
            }

            /** The client's terms, the same for both: what to change is the same setting. */
            @Override
            public String termsResource() {
                return "/httpclient5.terms.json";
            }
        };
    }
}
