package com.github.connaudit.kit;

import java.util.EnumSet;
import java.util.OptionalDouble;
import java.util.Set;
import java.util.stream.Collectors;

/** The two clients of the source documents as {@link ServeKit.ClientFactory}s, with mutations if asked. */
public final class SourceClients {

    private SourceClients() {}

    /**
     * WebClient on Reactor Netty, configured from each policy as the article configures it.
     *
     * @param mutations changes to the article's configuration (none for its own)
     * @return the factory
     */
    public static ServeKit.ClientFactory webclient(Set<Mutation> mutations) {
        return new ServeKit.ClientFactory() {
            @Override
            public String name() {
                return "webclient";
            }

            @Override
            public String version() {
                return ReactorWebClient.versions();
            }

            @Override
            public String config() {
                return mutationNote(mutations) + "the article's, the chapter's pool of one where the policy sets none:"
                        + " Mono.timeout(attempt).retryWhen(Retry.fixedDelay(n, delay).filter(503)"
                        + ".onRetryExhaustedThrow(last)).timeout(total), disableRetry(true), responseTimeout";
            }

            @Override
            public AuditedClient create(Policy policy, Tls tls) {
                return new ReactorWebClient(sourceDefaults(policy, true), mutations, false, tls);
            }

            @Override
            public OptionalDouble idleTimeoutMillis() {
                return OptionalDouble.of(ReactorWebClient.idleTimeoutMillis());
            }
        };
    }

    /**
     * RestClient on the JDK HttpClient, configured from each policy as the chapter runs it.
     *
     * @param mutations changes to the chapter's configuration (only retrying 500 applies)
     * @return the factory
     */
    public static ServeKit.ClientFactory restclient(Set<Mutation> mutations) {
        return new ServeKit.ClientFactory() {
            @Override
            public String name() {
                return "restclient";
            }

            @Override
            public String version() {
                return JdkRestClient.versions();
            }

            @Override
            public String config() {
                return mutationNote(mutations) + "the chapter's: JdkClientHttpRequestFactory.setReadTimeout(attempt),"
                        + " a bounded 503 retry interceptor";
            }

            @Override
            public AuditedClient create(Policy policy, Tls tls) throws NotConfigurableException {
                return new JdkRestClient(sourceDefaults(policy, false), mutations, false, tls);
            }

            @Override
            public OptionalDouble idleTimeoutMillis() {
                return JdkRestClient.KeepAlive.current().millis();
            }
        };
    }

    /**
     * The mutations a comma-separated list names (such as {@code RETRY_500,TOTAL_BEFORE_RETRY}).
     *
     * @param list the names, or null or empty for none
     * @return the mutations
     * @throws IllegalArgumentException when a name is unknown
     */
    public static Set<Mutation> mutations(String list) {
        Set<Mutation> m = EnumSet.noneOf(Mutation.class);
        if (list == null || list.isBlank()) {
            return m;
        }
        for (String name : list.split(",")) {
            try {
                m.add(Mutation.valueOf(name.trim()));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("unknown mutation " + name.trim() + ": one of "
                        + EnumSet.allOf(Mutation.class), e);
            }
        }
        return m;
    }

    /**
     * The policy with the source's settings where it leaves them at 0 ("the client's default"): the
     * article's CONNECT_TIMEOUT_MILLIS 1000 and, for WebClient, the chapter's pool of one refusing a
     * second caller after 1 s. Reactor Netty's own default pool (500 connections) would make a
     * verdict differ from run to run: its Mono completes before the connection is back in the pool,
     * so an immediate next request sometimes opens a second connection.
     */
    static Policy sourceDefaults(Policy p, boolean poolOfOne) {
        Policy source = Policy.source();
        Policy q = p.connectTimeout() == null ? new Policy(p.attemptTimeout(), p.totalTimeout(), p.maxRetries(), p.delay(),
                p.retryStatuses(), p.retryErrors(), p.retryMethods(), p.retryWithIdempotencyKey(), p.retryAnyMethod(),
                source.connectTimeout(), p.tlsTimeout(), p.readTimeout(), p.poolMaxPerHost(), p.poolAcquireTimeout(),
                p.sendPingTimeout(), p.pingTimeout()) : p;
        if (poolOfOne && q.poolMaxPerHost() == 0) {
            q = q.withPool(source.poolMaxPerHost(), q.poolAcquireTimeout() != null ? q.poolAcquireTimeout() : source.poolAcquireTimeout());
        }
        return q;
    }

    private static String mutationNote(Set<Mutation> mutations) {
        return mutations.isEmpty() ? "" : "MUTATED: " + mutations.stream().map(Enum::name).collect(Collectors.joining(",")) + "; ";
    }
}
