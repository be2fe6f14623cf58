package com.github.connaudit.kit;

import java.io.IOException;
import java.io.InputStream;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpTimeoutException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.OptionalDouble;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.core.SpringVersion;
import org.springframework.http.HttpMethod;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.http.client.JdkClientHttpRequestFactory;
import org.springframework.web.client.RestClient;
import org.springframework.web.client.RestClientResponseException;
import org.springframework.web.client.support.RestClientAdapter;
import org.springframework.web.service.invoker.HttpServiceProxyFactory;

/**
 * Spring RestClient on the JDK {@code java.net.http.HttpClient}, as the chapter runs it:
 *
 * <pre>{@code
 * HttpClient.newBuilder().connectTimeout(1s).version(HTTP_1_1)
 * JdkClientHttpRequestFactory(httpClient).setReadTimeout(attempt)   // through the body, per request
 * RestClient.builder().requestFactory(factory)
 *     .requestInterceptor(BoundedRetry: 503 on a replayable request, retries times, delay apart,
 *                         the total budget checked before each attempt and bounding each delay)
 * }</pre>
 *
 * The JDK client has no read interval (a bound between two reads of the body): a policy with one
 * is not configurable here. Its own replay of a GET or HEAD on a pooled connection that fails
 * before any byte of the response (JDK {@code ConnectionExpiredException}) cannot be turned off.
 */
public final class JdkRestClient implements AuditedClient {

    private final Policy policy;
    private final Set<Mutation> mutations;
    private final HttpClient jdk;
    private final RestClient rest;
    private final RestClient bare;
    private final BlockingTarget target;
    private final AtomicInteger attempts = new AtomicInteger();
    private final ExecutorService callers = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "connaudit-restclient-caller");
        t.setDaemon(true);
        return t;
    });

    /**
     * Makes a client with its own JDK HttpClient (and so its own pool).
     *
     * @param policy the numbers
     * @param mutations changes to the chapter's configuration; only {@link Mutation#RETRY_500} applies
     * @param viaInterface whether GETs and POSTs go through an HTTP Interface proxy
     * @throws NotConfigurableException when the policy asks for a read interval or a pool bound
     */
    public JdkRestClient(Policy policy, Set<Mutation> mutations, boolean viaInterface) throws NotConfigurableException {
        this(policy, mutations, viaInterface, null);
    }

    /**
     * Makes a client with its own JDK HttpClient, speaking HTTPS to listeners the CA signs. The
     * JDK HttpClient has one connect bound: it takes the larger of the connect and TLS bounds.
     *
     * @param policy the numbers
     * @param mutations changes to the chapter's configuration; only {@link Mutation#RETRY_500} applies
     * @param viaInterface whether GETs and POSTs go through an HTTP Interface proxy
     * @param tls the CA of the HTTPS listeners, or null for plain HTTP
     * @throws NotConfigurableException when the policy asks for a read interval or a pool bound
     */
    public JdkRestClient(Policy policy, Set<Mutation> mutations, boolean viaInterface, Tls tls)
            throws NotConfigurableException {
        if (policy.readTimeout() != null) {
            throw new NotConfigurableException("the JDK HttpClient has no read interval (Reactor Netty's responseTimeout);"
                    + " JdkClientHttpRequestFactory.setReadTimeout bounds the whole exchange");
        }
        if (policy.poolMaxPerHost() > 0 || policy.poolAcquireTimeout() != null) {
            throw new NotConfigurableException("the JDK HttpClient has no bound on its connections per host"
                    + " nor an acquire timeout");
        }
        this.policy = policy;
        this.mutations = mutations.isEmpty() ? EnumSet.noneOf(Mutation.class) : EnumSet.copyOf(mutations);
        HttpClient.Builder builder = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1);
        Duration connect = connectBound(policy);
        if (connect != null) {
            builder.connectTimeout(connect);
        }
        if (tls != null) {
            builder.sslContext(tls.jdk());
        }
        this.jdk = builder.build();
        JdkClientHttpRequestFactory factory = new JdkClientHttpRequestFactory(jdk);
        if (policy.attemptTimeout() != null) {
            factory.setReadTimeout(policy.attemptTimeout());
        }
        this.rest = RestClient.builder()
                .requestFactory(factory)
                .requestInterceptor(new BoundedRetry(policy, this.mutations.contains(Mutation.RETRY_500), attempts))
                .build();
        this.bare = RestClient.builder().requestFactory(new JdkClientHttpRequestFactory(jdk)).build();
        this.target = viaInterface
                ? HttpServiceProxyFactory.builderFor(RestClientAdapter.create(rest)).build().createClient(BlockingTarget.class)
                : null;
    }

    @Override
    public String name() {
        return "restclient";
    }

    @Override
    public String version() {
        return versions();
    }

    /**
     * The JDK's feature version first (a table's column), then its full version and Spring's.
     *
     * @return one line
     */
    static String versions() {
        return "JDK " + Runtime.version().feature() + " (" + Runtime.version() + ", spring-web " + SpringVersion.getVersion() + ")";
    }

    @Override
    public String config() {
        return "HttpClient.newBuilder().connectTimeout(" + ReactorWebClient.ms(connectBound(policy))
                + ").version(HTTP_1_1); JdkClientHttpRequestFactory.setReadTimeout(" + ReactorWebClient.ms(policy.attemptTimeout())
                + "); " + (target != null ? "HTTP Interface, " : "") + "interceptor: retry " + policy.retryStatuses()
                + (mutations.contains(Mutation.RETRY_500) ? "+500" : "") + " " + policy.maxRetries() + " times "
                + ReactorWebClient.ms(policy.delay()) + " apart within " + ReactorWebClient.ms(policy.totalTimeout())
                + "; " + KeepAlive.current() + (policy.hasPing() ? "; " + NO_PING : "");
    }

    /**
     * What the kit does with HTTP/2's health check: the JDK HttpClient answers a server's PING but
     * sends none of its own, and has no setting for one.
     */
    static final String NO_PING = "no HTTP/2 health check: the JDK HttpClient sends no PING of its own"
            + " (no setting): send_ping_timeout_ms, ping_timeout_ms not applied";

    /**
     * The JDK HttpClient's keep-alive timeout, {@code jdk.httpclient.keepalive.timeout}: how long
     * it keeps an idle HTTP/1.1 connection before it closes it itself (a response's
     * {@code Keep-Alive: timeout=N} overrides it for that connection). The JDK reads it as a
     * networking property: the system property, else {@code $JAVA_HOME/conf/net.properties}, else
     * its default, 1200 s up to JDK 19 and 30 s from JDK 20 (JDK-8297030); a value it cannot
     * parse gives the default.
     *
     * @param seconds the timeout, or -1 when the value is not a positive number of seconds
     * @param source where it came from
     */
    record KeepAlive(long seconds, String source) {

        /** The property's name. */
        static final String PROPERTY = "jdk.httpclient.keepalive.timeout";

        /**
         * The running JVM's keep-alive timeout.
         *
         * @return the timeout and its source
         */
        static KeepAlive current() {
            long fallback = Runtime.version().feature() >= 20 ? 30 : 1200;
            String v = System.getProperty(PROPERTY);
            String source = "-D" + PROPERTY;
            if (v == null) {
                Properties net = new Properties();
                try (InputStream in = Files.newInputStream(Path.of(System.getProperty("java.home"), "conf", "net.properties"))) {
                    net.load(in);
                } catch (IOException e) {
                    // no net.properties: the JDK's default
                }
                v = net.getProperty(PROPERTY);
                source = "net.properties " + PROPERTY;
            }
            if (v == null) {
                return new KeepAlive(fallback, PROPERTY + " unset: JDK " + Runtime.version().feature() + "'s default");
            }
            try {
                long s = Long.parseLong(v.trim());
                return new KeepAlive(s > 0 ? s : -1, source);
            } catch (NumberFormatException e) {
                return new KeepAlive(fallback, source + " unparsable: JDK " + Runtime.version().feature() + "'s default");
            }
        }

        /**
         * The timeout as client.idle_timeout_ms declares it.
         *
         * @return the timeout in ms, or empty when unknown
         */
        OptionalDouble millis() {
            return seconds > 0 ? OptionalDouble.of(seconds * 1000.0) : OptionalDouble.empty();
        }

        @Override
        public String toString() {
            return "keep-alive timeout " + (seconds > 0 ? seconds + "s" : "not a positive number") + " (" + source + ")";
        }
    }

    @Override
    public int attempts() {
        return attempts.get();
    }

    @Override
    public Call start(Request request) {
        long started = System.nanoTime();
        AtomicBoolean cancelled = new AtomicBoolean();
        int before = attempts.get();
        CompletableFuture<Outcome> outcome = new CompletableFuture<>();
        Future<?> running = callers.submit(() -> {
            Outcome o;
            try {
                o = exchange(request);
            } catch (RuntimeException e) {
                o = cancelled.get() ? Outcome.error(Outcome.Kind.CANCELED, e) : classify(e);
            }
            outcome.complete(o.timed(FutureCall.millisSince(started), attempts.get() - before));
        });
        return new FutureCall(outcome, () -> {
            cancelled.set(true);
            running.cancel(true);
        }, started);
    }

    /**
     * Not configurable: the JDK HttpClient writes a POST's headers (chunked) before it asks for a
     * streamed body (measured with a raw socket: the server reads the request line and headers
     * while Spring's {@code StreamingHttpOutputMessage.Body} is still held), so holding the body
     * does not hold the request back.
     */
    @Override
    public Call startHeld(Request request, Runnable onFirstAsk) throws NotConfigurableException {
        throw new NotConfigurableException("the JDK HttpClient writes a POST's headers (Transfer-Encoding: chunked)"
                + " before it asks for a streamed body: the server reads the request before it closes the connection");
    }

    @Override
    public Outcome recover(URI ok, Duration guard) {
        long started = System.nanoTime();
        CompletableFuture<Outcome> outcome = new CompletableFuture<>();
        Future<?> running = callers.submit(() -> {
            Outcome o;
            try {
                ResponseEntity<String> e = bare.get().uri(ok).retrieve().toEntity(String.class);
                o = Outcome.response(e.getStatusCode().value(), e.getBody() == null ? "" : e.getBody());
            } catch (RuntimeException e) {
                o = classify(e);
            }
            outcome.complete(o.timed(FutureCall.millisSince(started), 1));
        });
        return new FutureCall(outcome, () -> running.cancel(true), started).await(guard);
    }

    private Outcome exchange(Request request) {
        boolean hasBody = !request.body().isEmpty();
        if (target != null && request.readBytes() < 0 && request.keyPerAttempt() == null
                && (request.method().equals("GET") || (request.method().equals("POST") && hasBody))) {
            ResponseEntity<String> e = request.method().equals("GET")
                    ? target.get(request.url(), request.headers())
                    : target.post(request.url(), request.headers(), request.body());
            return Outcome.response(e.getStatusCode().value(), e.getBody() == null ? "" : e.getBody());
        }
        RestClient.RequestBodySpec spec = rest.method(HttpMethod.valueOf(request.method())).uri(request.url());
        request.headers().forEach(spec::header);
        if (request.keyPerAttempt() != null) {
            spec.attribute(BoundedRetry.KEY_PER_ATTEMPT, request.keyPerAttempt());
        }
        if (hasBody) {
            spec.contentType(MediaType.APPLICATION_JSON).body(request.body());
        }
        if (request.readBytes() < 0) {
            ResponseEntity<String> e = spec.retrieve().toEntity(String.class);
            return Outcome.response(e.getStatusCode().value(), e.getBody() == null ? "" : e.getBody());
        }
        int want = request.readBytes();
        return spec.exchange((req, resp) -> {
            int status = resp.getStatusCode().value();
            int read = resp.getBody().readNBytes(want).length;
            resp.close();
            return Outcome.response(status, "(" + read + " bytes read)");
        }, true);
    }

    /** What the caller got, in the protocol's kinds, from the exception RestClient threw. */
    static Outcome classify(Throwable e) {
        if (e instanceof RestClientResponseException r) {
            return Outcome.response(r.getStatusCode().value(), r.getResponseBodyAsString());
        }
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof HttpTimeoutException || c instanceof SocketTimeoutException) {
                return Outcome.error(Outcome.Kind.TIMEOUT, e);
            }
        }
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof IOException) {
                return Outcome.error(Outcome.Kind.CONNECTION, e);
            }
        }
        return Outcome.error(Outcome.Kind.OTHER, e);
    }

    /**
     * The JDK HttpClients that could not be closed, kept referenced until the JVM exits: the JDK 17
     * HttpClient has no close() (it came in JDK 21), and one no longer referenced is shut down,
     * its connections with it, whenever the garbage collector finds it. Kept, what it leaves open
     * is the JDK's own doing, the same in every run (its keep-alive timeout is 1200 s), not the
     * collector's.
     */
    private static final List<HttpClient> UNCLOSABLE = new CopyOnWriteArrayList<>();

    /**
     * Stops the callers' threads and closes the HttpClient where the JDK can (21 and later);
     * otherwise keeps it (see {@link #UNCLOSABLE}), its idle connections open, as the JDK leaves
     * them.
     */
    @Override
    public void close() {
        callers.shutdownNow();
        if (jdk instanceof AutoCloseable c) {
            try {
                c.close();
            } catch (Exception e) {
                // closing is best effort: the connections are the server's to count
            }
        } else {
            UNCLOSABLE.add(jdk);
        }
    }

    /** The larger of the connect and TLS bounds, the JDK HttpClient having one for both. */
    static Duration connectBound(Policy p) {
        if (p.connectTimeout() == null) {
            return p.tlsTimeout();
        }
        if (p.tlsTimeout() == null) {
            return p.connectTimeout();
        }
        return p.connectTimeout().compareTo(p.tlsTimeout()) >= 0 ? p.connectTimeout() : p.tlsTimeout();
    }
}
