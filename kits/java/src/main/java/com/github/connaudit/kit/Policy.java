package com.github.connaudit.kit;

import java.time.Duration;
import java.util.Set;

/**
 * The configuration of a client under audit in plain numbers, as a scenario of
 * {@code connaudit serve} gives it (its {@code policy} object, field for field). A null
 * {@link Duration} means "not set", as 0 does in the protocol.
 *
 * @param attemptTimeout bound on one attempt, from sending the request through reading the whole
 *     body; restarts with each retry
 * @param totalTimeout bound on all attempts and the delays between them
 * @param maxRetries retries after the first attempt
 * @param delay fixed delay before each retry
 * @param retryStatuses response statuses retried
 * @param retryErrors whether a connection error or a timeout is retried
 * @param retryMethods methods that may be replayed
 * @param retryWithIdempotencyKey any method may be replayed when it carries an Idempotency-Key
 * @param retryAnyMethod any method may be replayed
 * @param connectTimeout bound on the TCP connect
 * @param tlsTimeout bound on the TLS handshake
 * @param readTimeout the read interval: the longest wait for the headers and between two reads of
 *     the body (Reactor Netty's {@code responseTimeout}), not a total deadline
 * @param poolMaxPerHost connections per host in the pool; 0 is the client's default
 * @param poolAcquireTimeout how long a caller waits for a free connection before it is refused
 * @param sendPingTimeout HTTP/2's health check: a PING after that long without a frame read
 * @param pingTimeout HTTP/2's health check: the connection closed when the PING's answer takes
 *     longer
 */
public record Policy(
        Duration attemptTimeout,
        Duration totalTimeout,
        int maxRetries,
        Duration delay,
        Set<Integer> retryStatuses,
        boolean retryErrors,
        Set<String> retryMethods,
        boolean retryWithIdempotencyKey,
        boolean retryAnyMethod,
        Duration connectTimeout,
        Duration tlsTimeout,
        Duration readTimeout,
        int poolMaxPerHost,
        Duration poolAcquireTimeout,
        Duration sendPingTimeout,
        Duration pingTimeout) {

    /** Copies the sets, so that a policy cannot change once made. */
    public Policy {
        retryStatuses = Set.copyOf(retryStatuses);
        retryMethods = Set.copyOf(retryMethods);
        if (maxRetries < 0 || poolMaxPerHost < 0) {
            throw new IllegalArgumentException("negative maxRetries or poolMaxPerHost");
        }
    }

    /**
     * The source's configuration for A1–A5: an attempt of 3 s, a total of 8 s, two retries of a
     * 503 (GET and HEAD) 10 ms apart, a connect timeout of 1 s, no read interval, and the
     * chapter's pool of one connection whose second caller is refused after 1 s.
     *
     * @return the policy
     */
    public static Policy source() {
        return new Policy(Duration.ofSeconds(3), Duration.ofSeconds(8), 2, Duration.ofMillis(10),
                Set.of(503), false, Set.of("GET", "HEAD"), false, false,
                Duration.ofMillis(1000), null, null, 1, Duration.ofSeconds(1), null, null);
    }

    /**
     * Returns this policy with other attempt and total bounds.
     *
     * @param attempt the attempt timeout, or null
     * @param total the total timeout, or null
     * @return the new policy
     */
    public Policy withTimeouts(Duration attempt, Duration total) {
        return new Policy(attempt, total, maxRetries, delay, retryStatuses, retryErrors, retryMethods,
                retryWithIdempotencyKey, retryAnyMethod, connectTimeout, tlsTimeout, readTimeout, poolMaxPerHost,
                poolAcquireTimeout, sendPingTimeout, pingTimeout);
    }

    /**
     * Returns this policy with another number of retries and delay.
     *
     * @param retries the retries after the first attempt
     * @param delayBetween the delay before each retry
     * @return the new policy
     */
    public Policy withRetries(int retries, Duration delayBetween) {
        return new Policy(attemptTimeout, totalTimeout, retries, delayBetween, retryStatuses, retryErrors,
                retryMethods, retryWithIdempotencyKey, retryAnyMethod, connectTimeout, tlsTimeout, readTimeout,
                poolMaxPerHost, poolAcquireTimeout, sendPingTimeout, pingTimeout);
    }

    /**
     * Returns this policy with a read interval.
     *
     * @param interval the read interval, or null for none
     * @return the new policy
     */
    public Policy withReadTimeout(Duration interval) {
        return new Policy(attemptTimeout, totalTimeout, maxRetries, delay, retryStatuses, retryErrors,
                retryMethods, retryWithIdempotencyKey, retryAnyMethod, connectTimeout, tlsTimeout, interval,
                poolMaxPerHost, poolAcquireTimeout, sendPingTimeout, pingTimeout);
    }

    /**
     * Returns this policy with other replay rules for methods.
     *
     * @param anyMethod any method may be replayed (W1)
     * @param withKey any method carrying an Idempotency-Key may be replayed (W2, W3)
     * @return the new policy
     */
    public Policy withReplay(boolean anyMethod, boolean withKey) {
        return new Policy(attemptTimeout, totalTimeout, maxRetries, delay, retryStatuses, retryErrors,
                retryMethods, withKey, anyMethod, connectTimeout, tlsTimeout, readTimeout, poolMaxPerHost,
                poolAcquireTimeout, sendPingTimeout, pingTimeout);
    }

    /**
     * Returns this policy with other retried statuses.
     *
     * @param statuses the statuses retried
     * @return the new policy
     */
    public Policy withRetryStatuses(Set<Integer> statuses) {
        return new Policy(attemptTimeout, totalTimeout, maxRetries, delay, statuses, retryErrors, retryMethods,
                retryWithIdempotencyKey, retryAnyMethod, connectTimeout, tlsTimeout, readTimeout, poolMaxPerHost,
                poolAcquireTimeout, sendPingTimeout, pingTimeout);
    }

    /**
     * Returns this policy with another pool.
     *
     * @param max connections per host, 0 for the client's default
     * @param acquire how long a caller waits for a connection, or null for the client's default
     * @return the new policy
     */
    public Policy withPool(int max, Duration acquire) {
        return new Policy(attemptTimeout, totalTimeout, maxRetries, delay, retryStatuses, retryErrors,
                retryMethods, retryWithIdempotencyKey, retryAnyMethod, connectTimeout, tlsTimeout, readTimeout, max, acquire,
                sendPingTimeout, pingTimeout);
    }

    /**
     * Returns this policy with HTTP/2's health check.
     *
     * @param sendPing a PING after that long without a frame read, or null
     * @param ping how long the PING's answer may take, or null
     * @return the new policy
     */
    public Policy withPing(Duration sendPing, Duration ping) {
        return new Policy(attemptTimeout, totalTimeout, maxRetries, delay, retryStatuses, retryErrors, retryMethods,
                retryWithIdempotencyKey, retryAnyMethod, connectTimeout, tlsTimeout, readTimeout, poolMaxPerHost,
                poolAcquireTimeout, sendPing, ping);
    }

    /**
     * Whether the policy asks for HTTP/2's health check.
     *
     * @return true when either of its settings is set
     */
    public boolean hasPing() {
        return sendPingTimeout != null || pingTimeout != null;
    }

    /**
     * Whether a request may be replayed under this policy's rules for methods.
     *
     * @param method the request's method
     * @param hasKey whether it carries an Idempotency-Key
     * @return true when it may be replayed
     */
    public boolean mayReplay(String method, boolean hasKey) {
        return retryAnyMethod || retryMethods.contains(method) || (retryWithIdempotencyKey && hasKey);
    }
}
