package com.github.connaudit.kit;

import io.netty.channel.ChannelOption;
import io.netty.channel.ConnectTimeoutException;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslHandshakeTimeoutException;
import io.netty.handler.timeout.ReadTimeoutException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpMethod;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.http.client.reactive.ReactorClientHttpConnector;
import org.springframework.web.reactive.function.BodyInserters;
import org.springframework.web.reactive.function.client.WebClient;
import org.springframework.web.reactive.function.client.WebClientRequestException;
import org.springframework.web.reactive.function.client.WebClientResponseException;
import org.springframework.web.reactive.function.client.support.WebClientAdapter;
import org.springframework.web.service.invoker.HttpServiceProxyFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.channel.AbortedException;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;
import reactor.util.retry.Retry;

/**
 * Spring WebClient on Reactor Netty, configured as the source configures it:
 *
 * <pre>{@code
 * ConnectionProvider.builder(name).maxConnections(1).pendingAcquireTimeout(1s)
 * HttpClient.create(provider)
 *     .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 1000)
 *     .responseTimeout(read interval)        // only when the policy has one
 *     .disableRetry(true)                    // no replay behind the retry layer's back
 * webClient.get().uri(url).retrieve().toEntity(String.class)
 *     .timeout(attempt)                      // per attempt: before retryWhen, resubscribed each retry
 *     .retryWhen(Retry.fixedDelay(retries, delay)
 *         .filter(503 on a replayable request)
 *         .onRetryExhaustedThrow((spec, signal) -> signal.failure()))   // the last 503 itself
 *     .timeout(total)                        // after retryWhen: attempts and delays together
 * }</pre>
 *
 * Every number comes from the {@link Policy}. A {@link Mutation} changes one thing of this, so
 * that a test can show the contract it breaks.
 */
public final class ReactorWebClient implements AuditedClient {

    private final Policy policy;
    private final Set<Mutation> mutations;
    private final ConnectionProvider provider;
    private final WebClient web;
    private final ReactiveTarget target;
    private final AtomicInteger attempts = new AtomicInteger();

    /**
     * Makes a client with its own pool.
     *
     * @param policy the numbers
     * @param mutations changes to the source's configuration (none for the source's own)
     * @param viaInterface whether GETs and POSTs go through an HTTP Interface proxy
     */
    public ReactorWebClient(Policy policy, Set<Mutation> mutations, boolean viaInterface) {
        this(policy, mutations, viaInterface, null);
    }

    /**
     * Makes a client with its own pool, speaking HTTPS to listeners the CA signs.
     *
     * @param policy the numbers
     * @param mutations changes to the source's configuration (none for the source's own)
     * @param viaInterface whether GETs and POSTs go through an HTTP Interface proxy
     * @param tls the CA of the HTTPS listeners, or null for plain HTTP
     */
    public ReactorWebClient(Policy policy, Set<Mutation> mutations, boolean viaInterface, Tls tls) {
        this.policy = policy;
        this.mutations = mutations.isEmpty() ? EnumSet.noneOf(Mutation.class) : EnumSet.copyOf(mutations);
        ConnectionProvider.Builder pool = ConnectionProvider.builder("connaudit");
        if (policy.poolMaxPerHost() > 0) {
            pool.maxConnections(policy.poolMaxPerHost());
        }
        if (policy.poolAcquireTimeout() != null) {
            pool.pendingAcquireTimeout(policy.poolAcquireTimeout());
        }
        this.provider = pool.build();
        HttpClient http = HttpClient.create(provider)
                .disableRetry(!this.mutations.contains(Mutation.KEEP_HIDDEN_RETRY));
        if (policy.connectTimeout() != null) {
            http = http.option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) policy.connectTimeout().toMillis());
        }
        if (policy.readTimeout() != null) {
            http = http.responseTimeout(policy.readTimeout());
        }
        if (tls != null) {
            SslContext ssl;
            try {
                ssl = tls.netty();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            Duration handshake = policy.tlsTimeout();
            http = http.secure(spec -> {
                var next = spec.sslContext(ssl);
                if (handshake != null) {
                    next.handshakeTimeout(handshake);
                }
            });
        }
        this.web = WebClient.builder().clientConnector(new ReactorClientHttpConnector(http)).build();
        this.target = viaInterface
                ? HttpServiceProxyFactory.builderFor(WebClientAdapter.create(web)).build().createClient(ReactiveTarget.class)
                : null;
    }

    @Override
    public String name() {
        return "webclient";
    }

    @Override
    public String version() {
        return versions();
    }

    /**
     * The libraries' versions: Reactor Netty's first, the others in parentheses.
     *
     * @return one line
     */
    static String versions() {
        return "reactor-netty-http " + HttpClient.class.getPackage().getImplementationVersion()
                + " (spring-webflux " + WebClient.class.getPackage().getImplementationVersion()
                + ", reactor-core " + Mono.class.getPackage().getImplementationVersion() + ")";
    }

    @Override
    public String config() {
        List<String> http = new ArrayList<>();
        http.add("ConnectionProvider(maxConnections=" + (policy.poolMaxPerHost() > 0 ? policy.poolMaxPerHost() : "default")
                + ", pendingAcquireTimeout=" + ms(policy.poolAcquireTimeout()) + ")");
        if (policy.connectTimeout() != null) {
            http.add("CONNECT_TIMEOUT_MILLIS=" + policy.connectTimeout().toMillis());
        }
        if (policy.tlsTimeout() != null) {
            http.add("handshakeTimeout(" + ms(policy.tlsTimeout()) + ")");
        }
        if (policy.readTimeout() != null) {
            http.add("responseTimeout(" + ms(policy.readTimeout()) + ")");
        }
        http.add("disableRetry(" + !mutations.contains(Mutation.KEEP_HIDDEN_RETRY) + ")");
        StringBuilder chain = new StringBuilder();
        if (policy.attemptTimeout() != null) {
            chain.append(".timeout(").append(ms(policy.attemptTimeout())).append(')');
        }
        if (mutations.contains(Mutation.TOTAL_BEFORE_RETRY) && policy.totalTimeout() != null) {
            chain.append(".timeout(").append(ms(policy.totalTimeout())).append(')');
        }
        chain.append(".retryWhen(Retry.fixedDelay(").append(policy.maxRetries()).append(", ")
                .append(ms(policy.delay())).append(").filter(").append(statuses())
                .append(").onRetryExhaustedThrow(last))");
        if (!mutations.contains(Mutation.TOTAL_BEFORE_RETRY) && policy.totalTimeout() != null) {
            chain.append(".timeout(").append(ms(policy.totalTimeout())).append(')');
        }
        return "HttpClient " + String.join(", ", http) + "; " + (target != null ? "HTTP Interface, " : "")
                + "Mono" + chain + "; " + idleTimeoutSource() + (policy.hasPing() ? "; " + NO_PING : "");
    }

    /**
     * What the kit does with HTTP/2's health check: Reactor Netty 1.2.11 has none for its client
     * (its Http2SettingsSpec has no PING setting; Http2ConnectionLiveness, pingAckTimeout, came in
     * 1.2.12), so a policy's send_ping_timeout_ms and ping_timeout_ms are not applied.
     */
    static final String NO_PING = "no HTTP/2 health check: Reactor Netty 1.2.11 sends no PING"
            + " (Http2SettingsSpec.pingAckTimeout came in 1.2.12): send_ping_timeout_ms, ping_timeout_ms not applied";

    /**
     * How long the pool keeps an idle connection, in ms: the kit never sets the builder's
     * maxIdleTime, so it is Reactor Netty's default, {@link ConnectionProvider#DEFAULT_POOL_MAX_IDLE_TIME}
     * (the system property {@code reactor.netty.pool.maxIdleTime}; -1 when unset: no idle
     * timeout, a connection kept until the server closes it). A connection idle longer is closed
     * when it is next acquired, never sent on (without evictInBackground, not before).
     *
     * @return the timeout in ms, 0 when there is none
     */
    static long idleTimeoutMillis() {
        long v = ConnectionProvider.DEFAULT_POOL_MAX_IDLE_TIME;
        return v > 0 ? v : 0;
    }

    /**
     * Where {@link #idleTimeoutMillis()} comes from, in Reactor Netty's terms.
     *
     * @return one phrase
     */
    static String idleTimeoutSource() {
        long v = idleTimeoutMillis();
        return v > 0 ? "ConnectionProvider maxIdleTime " + v + "ms (reactor.netty.pool.maxIdleTime)"
                : "ConnectionProvider maxIdleTime unset (Reactor Netty's default: no idle timeout)";
    }

    @Override
    public int attempts() {
        return attempts.get();
    }

    @Override
    public Call start(Request request) {
        return start(request, null);
    }

    /**
     * The body is a publisher Reactor Netty subscribes to once it holds a connection (Spring's
     * {@code BodyInserters.fromPublisher}); its headers wait for the body's first item, so a held
     * body holds the whole request back. A first subscription runs {@code onFirstAsk} on a worker
     * thread (never the event loop) and never emits; a later one (Reactor Netty's own retry
     * subscribing again) emits the body at once.
     */
    @Override
    public Call startHeld(Request request, Runnable onFirstAsk) {
        AtomicInteger asked = new AtomicInteger();
        Mono<String> body = Mono.defer(() -> {
            if (asked.incrementAndGet() == 1) {
                Schedulers.boundedElastic().schedule(onFirstAsk);
                return Mono.never();
            }
            return Mono.just(request.body());
        });
        return start(request, body);
    }

    private Call start(Request request, Mono<String> heldBody) {
        long started = System.nanoTime();
        AtomicInteger mine = new AtomicInteger();
        Mono<Outcome> attempt = Mono.defer(() -> {
            int n = mine.incrementAndGet();
            attempts.incrementAndGet();
            return exchange(request, n, heldBody);
        });
        CompletableFuture<Outcome> outcome = new CompletableFuture<>();
        Disposable subscription = bounded(attempt, request).subscribe(
                o -> outcome.complete(o.timed(FutureCall.millisSince(started), mine.get())),
                e -> outcome.complete(classify(e).timed(FutureCall.millisSince(started), mine.get())));
        return new FutureCall(outcome, () -> {
            subscription.dispose();
            outcome.complete(Outcome.error(Outcome.Kind.CANCELED, "the subscription was disposed")
                    .timed(FutureCall.millisSince(started), mine.get()));
        }, started);
    }

    @Override
    public Outcome recover(URI ok, Duration guard) {
        long started = System.nanoTime();
        CompletableFuture<Outcome> outcome = new CompletableFuture<>();
        Disposable subscription = web.get().uri(ok).retrieve().toEntity(String.class)
                .map(e -> Outcome.response(e.getStatusCode().value(), e.getBody() == null ? "" : e.getBody()))
                .subscribe(o -> outcome.complete(o.timed(FutureCall.millisSince(started), 1)),
                        e -> outcome.complete(classify(e).timed(FutureCall.millisSince(started), 1)));
        return new FutureCall(outcome, subscription::dispose, started).await(guard);
    }

    /** The attempt bound, the retry and the total bound, in the source's order (or a mutation's). */
    private Mono<Outcome> bounded(Mono<Outcome> attempt, Request request) {
        Retry retry = Retry.fixedDelay(policy.maxRetries(), policy.delay() == null ? Duration.ZERO : policy.delay())
                .filter(e -> retryable(e, request))
                .onRetryExhaustedThrow((spec, signal) -> signal.failure());
        Mono<Outcome> m = attempt;
        if (policy.attemptTimeout() != null) {
            m = m.timeout(policy.attemptTimeout());
        }
        boolean totalFirst = mutations.contains(Mutation.TOTAL_BEFORE_RETRY);
        if (totalFirst && policy.totalTimeout() != null) {
            m = m.timeout(policy.totalTimeout());
        }
        m = m.retryWhen(retry);
        if (!totalFirst && policy.totalTimeout() != null) {
            m = m.timeout(policy.totalTimeout());
        }
        return m;
    }

    private boolean retryable(Throwable e, Request request) {
        if (!policy.mayReplay(request.method(), request.hasKey())) {
            return false;
        }
        if (e instanceof WebClientResponseException w && w.getCause() == null) {
            int status = w.getStatusCode().value();
            return policy.retryStatuses().contains(status) || (status == 500 && mutations.contains(Mutation.RETRY_500));
        }
        return policy.retryErrors() && (e instanceof WebClientRequestException || e instanceof TimeoutException);
    }

    /** One attempt: a 4xx or 5xx is a WebClientResponseException, as retrieve() makes it. */
    private Mono<Outcome> exchange(Request request, int n, Mono<String> heldBody) {
        Map<String, String> headers = new HashMap<>(request.headers());
        if (request.keyPerAttempt() != null) {
            headers.put("Idempotency-Key", request.keyPerAttempt() + "-attempt-" + n);
        }
        boolean hasBody = !request.body().isEmpty();
        if (target != null && heldBody == null && request.readBytes() < 0 && (request.method().equals("GET")
                || (request.method().equals("POST") && hasBody))) {
            Mono<ResponseEntity<String>> m = request.method().equals("GET")
                    ? target.get(request.url(), headers)
                    : target.post(request.url(), headers, request.body());
            return m.map(e -> Outcome.response(e.getStatusCode().value(), e.getBody() == null ? "" : e.getBody()));
        }
        WebClient.RequestBodySpec spec = web.method(HttpMethod.valueOf(request.method())).uri(request.url());
        headers.forEach(spec::header);
        WebClient.RequestHeadersSpec<?> ready = heldBody != null
                ? spec.contentType(MediaType.APPLICATION_JSON).body(BodyInserters.fromPublisher(heldBody, String.class))
                : hasBody ? spec.contentType(MediaType.APPLICATION_JSON).bodyValue(request.body()) : spec;
        if (request.readBytes() < 0) {
            return ready.retrieve().toEntity(String.class)
                    .map(e -> Outcome.response(e.getStatusCode().value(), e.getBody() == null ? "" : e.getBody()));
        }
        int want = request.readBytes();
        return ready.retrieve().toEntityFlux(DataBuffer.class).flatMap(e -> e.getBody()
                .map(b -> {
                    int k = b.readableByteCount();
                    DataBufferUtils.release(b);
                    return k;
                })
                .scan(0, Integer::sum)
                .takeUntil(read -> read >= want)
                .last()
                .map(read -> Outcome.response(e.getStatusCode().value(), "(" + Math.min(read, want) + " bytes read)")));
    }

    /** What the caller got, in the protocol's kinds, from the exception the chain ended with. */
    static Outcome classify(Throwable e) {
        // A response whose body then failed is a WebClientResponseException too ("200 OK from GET
        // …, but response failed with cause: …"): it is the cause's error, not a status.
        if (e instanceof WebClientResponseException w && w.getCause() == null) {
            return Outcome.response(w.getStatusCode().value(), w.getResponseBodyAsString());
        }
        for (Throwable c = e; c != null; c = c.getCause()) {
            String n = c.getClass().getSimpleName();
            if (n.equals("PoolAcquireTimeoutException") || n.equals("PoolAcquirePendingLimitException")) {
                return Outcome.error(Outcome.Kind.POOL, e);
            }
        }
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof TimeoutException || c instanceof ReadTimeoutException || c instanceof SslHandshakeTimeoutException
                    || c instanceof ConnectTimeoutException || c instanceof SocketTimeoutException) {
                return Outcome.error(Outcome.Kind.TIMEOUT, e);
            }
        }
        for (Throwable c = e; c != null; c = c.getCause()) {
            // AbortedException: the connection closed before the request was sent
            if (c instanceof IOException || c instanceof AbortedException) {
                return Outcome.error(Outcome.Kind.CONNECTION, e);
            }
        }
        return Outcome.error(Outcome.Kind.OTHER, e);
    }

    private String statuses() {
        List<Integer> s = new ArrayList<>(policy.retryStatuses());
        if (mutations.contains(Mutation.RETRY_500) && !s.contains(500)) {
            s.add(500);
        }
        s.sort(null);
        return s.toString();
    }

    static String ms(Duration d) {
        return d == null ? "default" : d.toMillis() + "ms";
    }

    @Override
    public void close() {
        provider.disposeLater().block(Duration.ofSeconds(5));
    }
}
