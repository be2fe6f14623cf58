package com.github.connaudit.kit;

import java.io.IOException;
import java.io.InputStream;
import java.net.http.HttpTimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpRequest;
import org.springframework.http.client.ClientHttpRequestExecution;
import org.springframework.http.client.ClientHttpRequestInterceptor;
import org.springframework.http.client.ClientHttpResponse;
import org.springframework.http.client.support.HttpRequestWrapper;

/**
 * RestClient's bounded retry: a request interceptor that replays a retried status (503) at most
 * {@code maxRetries} times, {@code delay} apart, on a request the policy allows to replay. The
 * total budget is checked before each attempt and bounds each delay: a budget that ends during a
 * delay ends the call there with an {@link HttpTimeoutException}. When retries run out the caller
 * gets the last response itself. Every discarded response is drained (64 KiB at most) and closed,
 * so that its connection can serve the next attempt.
 */
final class BoundedRetry implements ClientHttpRequestInterceptor {

    /** The request attribute asking for a new Idempotency-Key on each attempt: its prefix. */
    static final String KEY_PER_ATTEMPT = "connaudit.key-per-attempt";

    private final Policy policy;
    private final boolean retry500;
    private final AtomicInteger attempts;

    BoundedRetry(Policy policy, boolean retry500, AtomicInteger attempts) {
        this.policy = policy;
        this.retry500 = retry500;
        this.attempts = attempts;
    }

    @Override
    public ClientHttpResponse intercept(HttpRequest request, byte[] body, ClientHttpRequestExecution execution)
            throws IOException {
        long deadline = policy.totalTimeout() == null ? Long.MAX_VALUE
                : System.nanoTime() + policy.totalTimeout().toNanos();
        Object keyPrefix = request.getAttributes().get(KEY_PER_ATTEMPT);
        boolean hasKey = keyPrefix != null || request.getHeaders().containsKey("Idempotency-Key");
        boolean replayable = policy.mayReplay(request.getMethod().name(), hasKey);
        for (int attempt = 1; ; attempt++) {
            if (System.nanoTime() >= deadline) {
                throw budget(attempt);
            }
            HttpRequest sent = keyPrefix == null ? request : withKey(request, keyPrefix + "-attempt-" + attempt);
            attempts.incrementAndGet();
            ClientHttpResponse response;
            try {
                response = execution.execute(sent, body);
            } catch (IOException e) {
                if (!(policy.retryErrors() && replayable && attempt <= policy.maxRetries())) {
                    throw e;
                }
                pause(deadline, attempt);
                continue;
            }
            int status = response.getStatusCode().value();
            boolean retried = policy.retryStatuses().contains(status) || (retry500 && status == 500);
            if (!retried || !replayable || attempt > policy.maxRetries()) {
                return response;
            }
            discard(response);
            pause(deadline, attempt);
        }
    }

    /** Sleeps the delay, or until the budget ends, which ends the call. */
    private void pause(long deadline, int attempt) throws IOException {
        long delay = policy.delay() == null ? 0 : policy.delay().toNanos();
        long left = deadline - System.nanoTime();
        try {
            if (delay >= left) {
                Thread.sleep(Math.max(0, left / 1_000_000), (int) Math.max(0, left % 1_000_000));
                throw new HttpTimeoutException("total timeout of " + policy.totalTimeout().toMillis()
                        + "ms ran out in the delay before attempt " + (attempt + 1));
            }
            Thread.sleep(delay / 1_000_000, (int) (delay % 1_000_000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted in the delay before attempt " + (attempt + 1), e);
        }
    }

    private HttpTimeoutException budget(int next) {
        return new HttpTimeoutException("total timeout of " + policy.totalTimeout().toMillis()
                + "ms ran out before attempt " + next);
    }

    private static void discard(ClientHttpResponse response) {
        try (response; InputStream in = response.getBody()) {
            in.readNBytes(64 << 10);
        } catch (IOException e) {
            // the next attempt takes another connection
        }
    }

    private static HttpRequest withKey(HttpRequest request, String key) {
        HttpHeaders headers = new HttpHeaders();
        headers.putAll(request.getHeaders());
        headers.set("Idempotency-Key", key);
        return new HttpRequestWrapper(request) {
            @Override
            public HttpHeaders getHeaders() {
                return headers;
            }
        };
    }
}
