package com.github.connaudit.kit;

import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hc.client5.http.classic.ExecChainHandler;
import org.apache.hc.client5.http.classic.methods.HttpUriRequestBase;
import org.apache.hc.client5.http.config.ConnectionConfig;
import org.apache.hc.client5.http.config.RequestConfig;
import org.apache.hc.client5.http.config.TlsConfig;
import org.apache.hc.client5.http.impl.ChainElement;
import org.apache.hc.client5.http.impl.DefaultHttpRequestRetryStrategy;
import org.apache.hc.client5.http.impl.classic.CloseableHttpClient;
import org.apache.hc.client5.http.impl.classic.HttpClientBuilder;
import org.apache.hc.client5.http.impl.classic.HttpClients;
import org.apache.hc.client5.http.impl.io.PoolingHttpClientConnectionManager;
import org.apache.hc.client5.http.impl.io.PoolingHttpClientConnectionManagerBuilder;
import org.apache.hc.client5.http.protocol.HttpClientContext;
import org.apache.hc.client5.http.ssl.DefaultClientTlsStrategy;
import org.apache.hc.core5.http.ClassicHttpResponse;
import org.apache.hc.core5.http.ConnectionRequestTimeoutException;
import org.apache.hc.core5.http.ContentType;
import org.apache.hc.core5.http.HttpEntity;
import org.apache.hc.core5.http.HttpRequest;
import org.apache.hc.core5.http.HttpResponse;
import org.apache.hc.core5.http.io.entity.EntityUtils;
import org.apache.hc.core5.http.io.entity.StringEntity;
import org.apache.hc.core5.http.protocol.HttpContext;
import org.apache.hc.core5.io.CloseMode;
import org.apache.hc.core5.util.TimeValue;
import org.apache.hc.core5.util.Timeout;
import org.apache.hc.core5.util.VersionInfo;

/**
 * Apache HttpClient 5 classic, with a {@link PoolingHttpClientConnectionManager}, configured from a
 * policy, or as its users usually build it ({@code HttpClients.custom().build()}: HttpClient 5's
 * defaults):
 *
 * <pre>{@code
 * PoolingHttpClientConnectionManagerBuilder.create()
 *     .setDefaultConnectionConfig(ConnectionConfig.custom()
 *         .setConnectTimeout(connect).setSocketTimeout(read)
 *         .setValidateAfterInactivity(2 s: HttpClient 5's default stale check))
 *     .setDefaultTlsConfig(TlsConfig.custom().setHandshakeTimeout(tls))
 *     .setMaxConnPerRoute(pool_max_per_host).setMaxConnTotal(pool_max_per_host)
 * HttpClients.custom()
 *     .setDefaultRequestConfig(RequestConfig.custom()
 *         .setResponseTimeout(read).setConnectionRequestTimeout(pool_acquire))
 *     .setRetryStrategy(DefaultHttpRequestRetryStrategy(max_retries, delay) with retry_statuses,
 *         retry_methods, and IOExceptions retried only when retry_errors)
 *     .addExecInterceptorAfter(RETRY, each attempt: counted, under the attempt bound, the total
 *         checked before it)
 * }</pre>
 *
 * HttpClient 5 bounds no whole exchange: the attempt bound and the total are the kit's timer,
 * which cancels the request ({@code HttpUriRequestBase.cancel()}, what a user's timer calls): a
 * cancelled request is not retried. The retry strategy bounds each delay by what is left of the
 * total, and the next attempt then ends the call. A value the policy leaves at 0 is HttpClient 5's
 * default (connect 3 min, no socket or response timeout, pool wait 3 min).
 */
public final class ApacheAudited implements AuditedClient {

    /** The context attribute holding a call's {@link CallState}. */
    private static final String STATE = "connaudit.call";

    private final Policy policy;
    private final boolean defaults;
    private final PoolingHttpClientConnectionManager pool;
    private final CloseableHttpClient client;
    private final ConnectionConfig connection;
    private final RequestConfig requests;
    private final AtomicInteger attempts = new AtomicInteger();
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "connaudit-httpclient5-timer");
        t.setDaemon(true);
        return t;
    });
    private final ExecutorService callers = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "connaudit-httpclient5-caller");
        t.setDaemon(true);
        return t;
    });

    /**
     * Makes a client with its own connection manager.
     *
     * @param policy the numbers; ignored when {@code defaults}
     * @param defaults build it with HttpClient 5's defaults, its default retry strategy included
     * @param tls the CA of the HTTPS listeners, or null for plain HTTP
     * @param validateAfterInactivity the stale check's idle time (null: HttpClient 5's default, 2 s;
     *     negative: none)
     */
    public ApacheAudited(Policy policy, boolean defaults, Tls tls, Duration validateAfterInactivity) {
        this.policy = policy;
        this.defaults = defaults;
        PoolingHttpClientConnectionManagerBuilder cm = PoolingHttpClientConnectionManagerBuilder.create();
        ConnectionConfig.Builder cc = ConnectionConfig.custom();
        if (validateAfterInactivity != null) {
            cc.setValidateAfterInactivity(validateAfterInactivity.isNegative() ? TimeValue.NEG_ONE_MILLISECOND
                    : TimeValue.ofMilliseconds(validateAfterInactivity.toMillis()));
        }
        RequestConfig.Builder rc = RequestConfig.custom();
        if (!defaults) {
            if (policy.connectTimeout() != null) {
                cc.setConnectTimeout(timeout(policy.connectTimeout()));
            }
            if (policy.readTimeout() != null) {
                cc.setSocketTimeout(timeout(policy.readTimeout()));
                rc.setResponseTimeout(timeout(policy.readTimeout()));
            }
            if (policy.tlsTimeout() != null) {
                cm.setDefaultTlsConfig(TlsConfig.custom().setHandshakeTimeout(timeout(policy.tlsTimeout())).build());
            }
            if (policy.poolMaxPerHost() > 0) {
                cm.setMaxConnPerRoute(policy.poolMaxPerHost()).setMaxConnTotal(policy.poolMaxPerHost());
            }
            if (policy.poolAcquireTimeout() != null) {
                rc.setConnectionRequestTimeout(timeout(policy.poolAcquireTimeout()));
            }
        }
        this.connection = cc.build();
        this.requests = rc.build();
        cm.setDefaultConnectionConfig(connection);
        if (tls != null) {
            cm.setTlsSocketStrategy(new DefaultClientTlsStrategy(tls.jdk()));
        }
        this.pool = cm.build();
        HttpClientBuilder b = HttpClients.custom().setConnectionManager(pool).setDefaultRequestConfig(requests)
                .addExecInterceptorAfter(ChainElement.RETRY.name(), "connaudit-attempts", attempt());
        if (!defaults) {
            b.setRetryStrategy(new PolicyRetry());
        }
        this.client = b.build();
    }

    private static Timeout timeout(Duration d) {
        return Timeout.ofMilliseconds(Math.max(1, d.toMillis()));
    }

    /**
     * The CloseableHttpClient itself, for a truth test that uses it as a user does.
     *
     * @return the client
     */
    CloseableHttpClient httpClient() {
        return client;
    }

    @Override
    public String name() {
        return defaults ? "httpclient5-defaults" : "httpclient5";
    }

    @Override
    public String version() {
        return versions();
    }

    /**
     * HttpClient 5's version first (a table's column), then HttpCore 5's.
     *
     * @return one line
     */
    static String versions() {
        ClassLoader cl = ApacheAudited.class.getClassLoader();
        VersionInfo client = VersionInfo.loadVersionInfo("org.apache.hc.client5", cl);
        VersionInfo core = VersionInfo.loadVersionInfo("org.apache.hc.core5", cl);
        return (client == null ? "unknown" : client.getRelease()) + " (classic, httpcore5 "
                + (core == null ? "unknown" : core.getRelease()) + ")";
    }

    @Override
    public String config() {
        String conn = "ConnectionConfig connectTimeout " + connection.getConnectTimeout() + ", socketTimeout "
                + connection.getSocketTimeout() + ", validateAfterInactivity " + connection.getValidateAfterInactivity()
                + "; RequestConfig responseTimeout " + requests.getResponseTimeout() + ", connectionRequestTimeout "
                + requests.getConnectionRequestTimeout() + "; maxConnPerRoute " + pool.getDefaultMaxPerRoute()
                + "; no evictIdleConnections";
        if (defaults) {
            return "HttpClients.custom().build(): DefaultHttpRequestRetryStrategy(1, 1s: 429 and 503, any method;"
                    + " an IOException of an idempotent method); " + conn;
        }
        return conn + "; DefaultHttpRequestRetryStrategy(" + policy.maxRetries() + ", " + ReactorWebClient.ms(policy.delay())
                + ") retrying " + policy.retryStatuses() + (policy.retryErrors() ? " and IOExceptions" : ", no IOException")
                + " of a replayable request; the kit's timer cancels the request at attempt "
                + ReactorWebClient.ms(policy.attemptTimeout()) + " or total " + ReactorWebClient.ms(policy.totalTimeout())
                + (policy.hasPing() ? "; HTTP/1.1 only: send_ping_timeout_ms not applied" : "");
    }

    @Override
    public int attempts() {
        return attempts.get();
    }

    /** One call's state: its request (to cancel), its deadline, its timer, who cancelled it. */
    private static final class CallState {
        final HttpUriRequestBase request;
        final boolean replayable;
        final String keyPrefix;
        final long deadline;
        final AtomicBoolean cancelledByCaller = new AtomicBoolean();
        final AtomicBoolean timedOut = new AtomicBoolean();
        volatile String timeoutWhy;
        volatile ScheduledFuture<?> timer;
        int attempt;

        CallState(HttpUriRequestBase request, boolean replayable, String keyPrefix, long deadline) {
            this.request = request;
            this.replayable = replayable;
            this.keyPrefix = keyPrefix;
            this.deadline = deadline;
        }

        void disarm() {
            ScheduledFuture<?> t = timer;
            if (t != null) {
                t.cancel(false);
            }
        }
    }

    /**
     * Runs each attempt, after HttpClient 5's retry: counts it, ends the call when the total is
     * spent, gives it its Idempotency-Key when one per attempt is asked, and arms the timer of the
     * attempt bound (or of the total, when that comes first), which cancels the request.
     */
    private ExecChainHandler attempt() {
        return (request, scope, chain) -> {
            Object s = scope.clientContext.getAttribute(STATE);
            if (!(s instanceof CallState state)) {
                return chain.proceed(request, scope);
            }
            state.attempt++;
            if (state.attempt > 1 && System.nanoTime() >= state.deadline) {
                throw new InterruptedIOException("total timeout of " + policy.totalTimeout().toMillis()
                        + "ms ran out before attempt " + state.attempt);
            }
            attempts.incrementAndGet();
            if (state.keyPrefix != null) {
                request.setHeader("Idempotency-Key", state.keyPrefix + "-attempt-" + state.attempt);
            }
            state.disarm();
            if (!defaults) {
                long now = System.nanoTime();
                long attemptEnd = policy.attemptTimeout() == null ? Long.MAX_VALUE : now + policy.attemptTimeout().toNanos();
                long end = Math.min(attemptEnd, state.deadline);
                if (end != Long.MAX_VALUE) {
                    String why = end == attemptEnd ? "attempt timeout of " + policy.attemptTimeout().toMillis() + "ms"
                            : "total timeout of " + policy.totalTimeout().toMillis() + "ms";
                    state.timer = timers.schedule(() -> {
                        state.timeoutWhy = why;
                        state.timedOut.set(true);
                        state.request.cancel();
                    }, end - now, TimeUnit.NANOSECONDS);
                }
            }
            return chain.proceed(request, scope);
        };
    }

    /**
     * HttpClient 5's own retry strategy, given the policy's numbers: {@code max_retries}, a fixed
     * {@code delay} (no Retry-After) bounded by what is left of the total, the policy's statuses,
     * the policy's methods, and an IOException retried only when {@code retry_errors}.
     */
    private final class PolicyRetry extends DefaultHttpRequestRetryStrategy {
        PolicyRetry() {
            super(policy.maxRetries(), TimeValue.ofMilliseconds(policy.delay() == null ? 0 : policy.delay().toMillis()),
                    List.of(), policy.retryStatuses());
        }

        @Override
        public boolean retryRequest(HttpRequest request, IOException e, int execCount, HttpContext context) {
            return policy.retryErrors() && !(e instanceof InterruptedIOException) && replayable(context)
                    && super.retryRequest(request, e, execCount, context);
        }

        /** A retried response ends its attempt: its timer must not fire in the delay. */
        @Override
        public boolean retryRequest(HttpResponse response, int execCount, HttpContext context) {
            boolean retry = replayable(context) && super.retryRequest(response, execCount, context);
            if (retry && context.getAttribute(STATE) instanceof CallState state) {
                state.disarm();
            }
            return retry;
        }

        @Override
        public TimeValue getRetryInterval(HttpResponse response, int execCount, HttpContext context) {
            long delay = policy.delay() == null ? 0 : policy.delay().toNanos();
            if (context.getAttribute(STATE) instanceof CallState state) {
                delay = Math.min(delay, Math.max(0, state.deadline - System.nanoTime()));
            }
            return TimeValue.of(delay, TimeUnit.NANOSECONDS);
        }

        @Override
        protected boolean handleAsIdempotent(HttpRequest request) {
            return policy.mayReplay(request.getMethod(), request.containsHeader("Idempotency-Key"));
        }

        private boolean replayable(HttpContext context) {
            return context.getAttribute(STATE) instanceof CallState state && state.replayable;
        }
    }

    @Override
    public Call start(Request request) {
        return run(request, true);
    }

    @Override
    public Outcome recover(URI ok, Duration guard) {
        return run(Request.get(ok), false).await(guard);
    }

    private Call run(Request request, boolean counted) {
        long started = System.nanoTime();
        HttpUriRequestBase r = new HttpUriRequestBase(request.method(), request.url());
        request.headers().forEach(r::setHeader);
        if (!request.body().isEmpty()) {
            r.setEntity(new StringEntity(request.body(), ContentType.APPLICATION_JSON));
        }
        HttpClientContext context = HttpClientContext.create();
        CallState state = null;
        if (counted) {
            long deadline = defaults || policy.totalTimeout() == null ? Long.MAX_VALUE
                    : started + policy.totalTimeout().toNanos();
            boolean replayable = defaults || policy.mayReplay(request.method(), request.hasKey());
            state = new CallState(r, replayable, request.keyPerAttempt(), deadline);
            context.setAttribute(STATE, state);
        }
        CallState st = state;
        AtomicBoolean cancelled = new AtomicBoolean();
        int before = attempts.get();
        CompletableFuture<Outcome> outcome = new CompletableFuture<>();
        Future<?> running = callers.submit(() -> {
            Outcome o;
            try (ClassicHttpResponse resp = client.executeOpen(null, r, context)) {
                HttpEntity entity = resp.getEntity();
                if (request.readBytes() < 0) {
                    o = Outcome.response(resp.getCode(), entity == null ? "" : EntityUtils.toString(entity));
                } else {
                    int read = 0;
                    if (entity != null) {
                        InputStream in = entity.getContent();
                        read = in.readNBytes(request.readBytes()).length;
                    }
                    o = Outcome.response(resp.getCode(), "(" + read + " bytes read)");
                }
            } catch (Exception e) {
                o = classify(e, cancelled.get(), st);
            } finally {
                if (st != null) {
                    st.disarm();
                }
            }
            outcome.complete(o.timed(FutureCall.millisSince(started), counted ? attempts.get() - before : 1));
        });
        return new FutureCall(outcome, () -> {
            cancelled.set(true);
            if (st != null) {
                st.cancelledByCaller.set(true);
            }
            r.cancel();
            running.cancel(true);
        }, started, () -> counted ? attempts.get() - before : 1);
    }

    /** What the caller got, in the protocol's kinds, from the exception HttpClient 5 threw. */
    private static Outcome classify(Exception e, boolean cancelled, CallState state) {
        if (cancelled) {
            return Outcome.error(Outcome.Kind.CANCELED, e);
        }
        if (state != null && state.timedOut.get()) {
            return Outcome.error(Outcome.Kind.TIMEOUT, state.timeoutWhy + ": the kit's timer cancelled the request <- "
                    + Outcome.describe(e));
        }
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof ConnectionRequestTimeoutException) {
                return Outcome.error(Outcome.Kind.POOL, e);
            }
        }
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof InterruptedIOException) {
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

    /** Closes the client and its pool, its connections at once. */
    @Override
    public void close() {
        callers.shutdownNow();
        timers.shutdownNow();
        client.close(CloseMode.IMMEDIATE);
    }
}
