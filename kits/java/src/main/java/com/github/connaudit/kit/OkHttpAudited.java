package com.github.connaudit.kit;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import okhttp3.Call;
import okhttp3.Callback;
import okhttp3.ConnectionPool;
import okhttp3.Dispatcher;
import okhttp3.Interceptor;
import okhttp3.MediaType;
import okhttp3.OkHttpClient;
import okhttp3.Protocol;
import okhttp3.RequestBody;
import okhttp3.Response;
import okhttp3.ResponseBody;

/**
 * OkHttp, configured from a policy, or as its users usually build it ({@code new OkHttpClient()}):
 *
 * <pre>{@code
 * new OkHttpClient.Builder()
 *     .connectTimeout(connect, or tls when larger).readTimeout(read, or tls when smaller: it bounds
 *         the TLS handshake).writeTimeout(default)
 *     .callTimeout(total)                           // the whole call: every attempt and delay
 *     .connectionPool(new ConnectionPool(5, 5, MINUTES))
 *     .dispatcher(maxRequestsPerHost = pool_max_per_host, else 5)
 *     .retryOnConnectionFailure(retry_errors)       // its default, true, replays by itself
 *     .addInterceptor(the policy's retries: retry_statuses, max_retries, delay, methods;
 *                     an attempt bound that cancels the call)
 *     .protocols(HTTP_1_1)
 * }</pre>
 *
 * Every call is enqueued, so that the Dispatcher's per-host limit applies, and its body is read
 * in the callback, holding that limit. A value the policy leaves at 0 is OkHttp's default (10 s
 * connect, read and write timeouts; no call timeout). OkHttp has no bound on the wait for the
 * Dispatcher's per-host limit: a policy with a pool acquire timeout is not configurable. The
 * attempt bound is a timer of the interceptor's that cancels the call (OkHttp's only way to end
 * one attempt, body included): an attempt that times out ends the call, with no retry.
 */
public final class OkHttpAudited implements AuditedClient {

    private static final MediaType JSON = MediaType.get("application/json");

    private final Policy policy;
    private final boolean defaults;
    private final OkHttpClient client;
    private final OkHttpClient bare;
    private final ExecutorService dispatch;
    private final ScheduledExecutorService timers;
    private final AtomicInteger attempts = new AtomicInteger();

    /**
     * Makes a client with its own pool and dispatcher.
     *
     * @param policy the numbers; ignored when {@code defaults}
     * @param defaults build it as {@code new OkHttpClient()} does, with the client's own defaults
     * @param tls the CA of the HTTPS listeners, or null for plain HTTP
     * @throws NotConfigurableException when the policy asks for a pool acquire timeout
     */
    public OkHttpAudited(Policy policy, boolean defaults, Tls tls) throws NotConfigurableException {
        if (!defaults && policy.poolAcquireTimeout() != null) {
            throw new NotConfigurableException("OkHttp's Dispatcher queues a call over maxRequestsPerHost with no bound"
                    + " on its wait (callTimeout starts once it runs): no pool acquire timeout");
        }
        this.policy = policy;
        this.defaults = defaults;
        this.dispatch = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "connaudit-okhttp-dispatcher");
            t.setDaemon(true);
            return t;
        });
        this.timers = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "connaudit-okhttp-attempt-timer");
            t.setDaemon(true);
            return t;
        });
        Dispatcher dispatcher = new Dispatcher(dispatch);
        OkHttpClient.Builder b = new OkHttpClient.Builder().dispatcher(dispatcher)
                .connectionPool(new ConnectionPool(5, 5, TimeUnit.MINUTES))
                .protocols(List.of(Protocol.HTTP_1_1));
        if (!defaults) {
            Duration connect = JdkRestClient.connectBound(policy);
            if (connect != null) {
                b.connectTimeout(connect);
            }
            // OkHttp bounds the TLS handshake with the read timeout, not the connect timeout
            // (measured under connaudit serve: a stalled handshake ended at readTimeout's 10 s).
            Duration read = policy.readTimeout();
            if (policy.tlsTimeout() != null && (read == null || policy.tlsTimeout().compareTo(read) < 0)) {
                read = policy.tlsTimeout();
            }
            if (read != null) {
                b.readTimeout(read);
            }
            if (policy.totalTimeout() != null) {
                b.callTimeout(policy.totalTimeout());
            } else if (policy.attemptTimeout() != null && policy.maxRetries() == 0) {
                b.callTimeout(policy.attemptTimeout());
            }
            if (policy.poolMaxPerHost() > 0) {
                dispatcher.setMaxRequestsPerHost(policy.poolMaxPerHost());
            }
            b.retryOnConnectionFailure(policy.retryErrors());
            b.addInterceptor(new Retry());
        }
        if (tls != null) {
            b.sslSocketFactory(tls.jdk().getSocketFactory(), tls.trustManager());
        }
        this.client = b.build();
        OkHttpClient.Builder outside = client.newBuilder().callTimeout(Duration.ZERO);
        outside.interceptors().clear();
        this.bare = outside.build();
    }

    /**
     * The OkHttpClient itself, for a truth test that uses it as a user does.
     *
     * @return the client, with the policy's interceptor when not {@code defaults}
     */
    OkHttpClient okhttp() {
        return client;
    }

    @Override
    public String name() {
        return defaults ? "okhttp-defaults" : "okhttp";
    }

    @Override
    public String version() {
        return versions();
    }

    /**
     * OkHttp's version first (a table's column), then Okio's and Kotlin's.
     *
     * @return one line
     */
    static String versions() {
        return okhttp3.OkHttp.VERSION + " (okhttp-jvm, kotlin-stdlib " + kotlin.KotlinVersion.CURRENT + ")";
    }

    @Override
    public String config() {
        String common = "ConnectionPool(5, 5 min); protocols HTTP_1_1; Dispatcher.maxRequestsPerHost "
                + client.dispatcher().getMaxRequestsPerHost();
        if (defaults) {
            return "new OkHttpClient(): connect/read/write timeouts 10000ms, no callTimeout, retryOnConnectionFailure true,"
                    + " no retry interceptor; " + common;
        }
        return "connectTimeout " + client.connectTimeoutMillis() + "ms, readTimeout " + client.readTimeoutMillis()
                + "ms, writeTimeout " + client.writeTimeoutMillis() + "ms, callTimeout " + client.callTimeoutMillis()
                + "ms (0: none); retryOnConnectionFailure " + client.retryOnConnectionFailure() + "; " + common
                + "; interceptor: retry " + policy.retryStatuses() + " " + policy.maxRetries() + " times "
                + ReactorWebClient.ms(policy.delay()) + " apart, attempt " + ReactorWebClient.ms(policy.attemptTimeout())
                + " (Call.cancel())" + (policy.hasPing() ? "; HTTP/1.1 only: send_ping_timeout_ms not applied" : "");
    }

    @Override
    public int attempts() {
        return attempts.get();
    }

    /** What one call carries through the interceptor: its attempt timer, and who cancelled it. */
    private static final class CallState {
        final AtomicBoolean cancelledByCaller = new AtomicBoolean();
        final AtomicBoolean attemptTimedOut = new AtomicBoolean();
        volatile ScheduledFuture<?> timer;
        final String keyPrefix;

        CallState(String keyPrefix) {
            this.keyPrefix = keyPrefix;
        }

        void disarm() {
            ScheduledFuture<?> t = timer;
            if (t != null) {
                t.cancel(false);
            }
        }
    }

    @Override
    public Call start(Request request) {
        return enqueue(client, request, true);
    }

    @Override
    public Outcome recover(URI ok, Duration guard) {
        return enqueue(bare, Request.get(ok), false).await(guard);
    }

    private AuditedClient.Call enqueue(OkHttpClient via, Request request, boolean counted) {
        long started = System.nanoTime();
        CallState state = new CallState(request.keyPerAttempt());
        okhttp3.Request.Builder rb = new okhttp3.Request.Builder().url(request.url().toString()).tag(CallState.class, state);
        request.headers().forEach(rb::header);
        RequestBody body = request.body().isEmpty() ? null : RequestBody.create(request.body(), JSON);
        if (body == null && (request.method().equals("POST") || request.method().equals("PUT"))) {
            body = RequestBody.create(new byte[0], null);
        }
        rb.method(request.method(), body);
        okhttp3.Call call = via.newCall(rb.build());
        int before = attempts.get();
        if (defaults && counted) {
            attempts.incrementAndGet(); // no retry layer: one attempt per call, whatever OkHttp does below
        }
        CompletableFuture<Outcome> outcome = new CompletableFuture<>();
        call.enqueue(new Callback() {
            @Override
            public void onResponse(okhttp3.Call c, Response response) {
                Outcome o;
                try (response; ResponseBody rbody = response.body()) {
                    if (request.readBytes() < 0) {
                        o = Outcome.response(response.code(), rbody.string());
                    } else {
                        long read = readAtMost(rbody, request.readBytes());
                        o = Outcome.response(response.code(), "(" + read + " bytes read)");
                    }
                } catch (IOException e) {
                    o = classify(e, state);
                } finally {
                    state.disarm();
                }
                done(o);
            }

            @Override
            public void onFailure(okhttp3.Call c, IOException e) {
                state.disarm();
                done(classify(e, state));
            }

            private void done(Outcome o) {
                outcome.complete(o.timed(FutureCall.millisSince(started), counted ? attempts.get() - before : 1));
            }
        });
        return new FutureCall(outcome, () -> {
            state.cancelledByCaller.set(true);
            call.cancel();
        }, started, () -> counted ? attempts.get() - before : 1);
    }

    /** Reads at most {@code n} bytes of a body, fewer at its end; returns how many. */
    static long readAtMost(ResponseBody body, long n) throws IOException {
        okio.Buffer sink = new okio.Buffer();
        long got = 0;
        for (int i = 0; i < 1_000_000 && got < n; i++) {
            long r = body.source().read(sink, n - got);
            if (r < 0) {
                break;
            }
            got += r;
            sink.clear();
        }
        return got;
    }

    /** What the caller got, in the protocol's kinds, from the exception OkHttp gave. */
    private static Outcome classify(IOException e, CallState state) {
        if (state.cancelledByCaller.get()) {
            return Outcome.error(Outcome.Kind.CANCELED, e);
        }
        if (state.attemptTimedOut.get()) {
            return Outcome.error(Outcome.Kind.TIMEOUT, "attempt timeout: the interceptor's timer cancelled the call <- "
                    + Outcome.describe(e));
        }
        if (e instanceof InterruptedIOException) {
            return Outcome.error(Outcome.Kind.TIMEOUT, e);
        }
        return Outcome.error(Outcome.Kind.CONNECTION, e);
    }

    /**
     * The policy's retries, as an application interceptor: a retried status on a request the
     * policy lets replay is sent again {@code max_retries} times at most, {@code delay} apart,
     * within the call timeout (the total), the last response handed back when they run out; each
     * attempt under a timer that cancels the call ({@code attempt_timeout_ms}) until its body is read.
     */
    private final class Retry implements Interceptor {
        @Override
        public Response intercept(Chain chain) throws IOException {
            okhttp3.Request request = chain.request();
            CallState state = request.tag(CallState.class);
            if (state == null) {
                return chain.proceed(request);
            }
            long deadline = policy.totalTimeout() == null ? Long.MAX_VALUE : System.nanoTime() + policy.totalTimeout().toNanos();
            boolean hasKey = state.keyPrefix != null || request.header("Idempotency-Key") != null;
            boolean replayable = policy.mayReplay(request.method(), hasKey);
            for (int attempt = 1; ; attempt++) {
                okhttp3.Request sent = state.keyPrefix == null ? request
                        : request.newBuilder().header("Idempotency-Key", state.keyPrefix + "-attempt-" + attempt).build();
                attempts.incrementAndGet();
                state.disarm();
                if (policy.attemptTimeout() != null) {
                    okhttp3.Call call = chain.call();
                    state.timer = timers.schedule(() -> {
                        state.attemptTimedOut.set(true);
                        call.cancel();
                    }, policy.attemptTimeout().toNanos(), TimeUnit.NANOSECONDS);
                }
                Response response = chain.proceed(sent);
                boolean retried = policy.retryStatuses().contains(response.code());
                if (!retried || !replayable || attempt > policy.maxRetries()) {
                    return response;
                }
                try (response; ResponseBody b = response.body()) {
                    readAtMost(b, 64 << 10);
                } catch (IOException e) {
                    // the next attempt takes another connection
                }
                state.disarm();
                long delay = policy.delay() == null ? 0 : policy.delay().toNanos();
                long left = deadline - System.nanoTime();
                try {
                    if (delay >= left) {
                        TimeUnit.NANOSECONDS.sleep(Math.max(0, left));
                        throw new InterruptedIOException("total timeout of " + policy.totalTimeout().toMillis()
                                + "ms ran out in the delay before attempt " + (attempt + 1));
                    }
                    TimeUnit.NANOSECONDS.sleep(delay);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new InterruptedIOException("interrupted in the delay before attempt " + (attempt + 1));
                }
            }
        }
    }

    /** Cancels what is running, closes the pool's connections and stops the dispatcher's threads. */
    @Override
    public void close() {
        client.dispatcher().cancelAll();
        client.connectionPool().evictAll();
        dispatch.shutdownNow();
        timers.shutdownNow();
    }
}
