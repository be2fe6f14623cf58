package com.github.connaudit.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.github.connaudit.kit.Harness.Run;
import com.github.connaudit.kit.Harness.Variant;
import com.github.connaudit.kit.RawServer.CloseBeforeResponse;
import com.github.connaudit.kit.RawServer.Hang;
import com.github.connaudit.kit.RawServer.Respond;
import com.github.connaudit.kit.RawServer.Write;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The retry contracts A1–A9, W1–W4, H1 and P1 (every run ends with /ok through the same client),
 * at the source's own numbers, for WebClient on Reactor Netty and RestClient on the JDK
 * HttpClient, each directly and through an HTTP Interface proxy. Every count is what a raw-socket
 * server saw.
 */
class ContractsTest {

    private static final Set<Mutation> SOURCE = Set.of();
    private static final String ORDER = "{\"order\":7}";

    private static Respond status(int code) {
        return new Respond(code, code == 200 ? "ok" : "status " + code, 0);
    }

    private static Run get(Variant v, Policy p, RawServer s) throws Exception {
        return Harness.run(v, p, SOURCE, s, false, srv -> Request.get(srv.url("/fault")));
    }

    @ParameterizedTest
    @EnumSource(Variant.class)
    void a1ImmediateSuccess(Variant v) throws Exception {
        try (RawServer s = RawServer.always(status(200))) {
            get(v, Policy.source(), s).status(200).attempts(1).counts(1, 1);
        }
    }

    @ParameterizedTest
    @EnumSource(Variant.class)
    void a2TwoUnavailableThenOk(Variant v) throws Exception {
        try (RawServer s = RawServer.sequence(status(503), status(503), status(200))) {
            get(v, Policy.source(), s).status(200).attempts(3).counts(3, 1);
        }
    }

    /** onRetryExhaustedThrow hands back the last 503 itself (WebClient); the interceptor returns it (RestClient). */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void a3AlwaysUnavailableTheLast503ReachesTheCaller(Variant v) throws Exception {
        try (RawServer s = RawServer.always(status(503))) {
            get(v, Policy.source(), s).status(503).attempts(3).counts(3, 1);
        }
    }

    @ParameterizedTest
    @EnumSource(Variant.class)
    void a4NotFoundIsNotRetried(Variant v) throws Exception {
        try (RawServer s = RawServer.always(status(404))) {
            get(v, Policy.source(), s).status(404).attempts(1).counts(1, 1);
        }
    }

    @ParameterizedTest
    @EnumSource(Variant.class)
    void a5ServerErrorIsNotRetried(Variant v) throws Exception {
        try (RawServer s = RawServer.always(status(500))) {
            get(v, Policy.source(), s).status(500).attempts(1).counts(1, 1);
        }
    }

    /**
     * A6, attempt 1 s: the attempt's timeout ends the call (Reactor's TimeoutException names the
     * 1000 ms; Spring's JDK TimeoutHandler an HttpTimeoutException), the server sees the client
     * close the connection while its handler waits, and /ok needs a new connection.
     */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void a6AttemptTimeout(Variant v) throws Exception {
        try (RawServer s = RawServer.always(new Hang())) {
            Policy p = Policy.source().withTimeouts(Duration.ofSeconds(1), Duration.ofSeconds(8));
            Run r = get(v, p, s).attempts(1).counts(1, 2);
            r.error(Outcome.Kind.TIMEOUT, v.web() ? "within 1000ms" : "HttpTimeoutException");
            assertTrue(s.awaitCancels(1, Harness.SIGNAL), "the server saw the client go: " + r);
            assertEquals(1, s.handlersEntered(), r.toString());
        }
    }

    /**
     * A7, responseTimeout 250 ms under an attempt of 3 s: Reactor Netty's read interval fires
     * (ReadTimeoutException), not the attempt's timeout. The JDK HttpClient has no read interval:
     * the policy is not configurable for RestClient.
     */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void a7ReadIntervalFiresBeforeTheAttempt(Variant v) throws Exception {
        Policy p = Policy.source().withReadTimeout(Duration.ofMillis(250));
        if (!v.web()) {
            assertThrows(NotConfigurableException.class, () -> v.make(p, SOURCE).close());
            return;
        }
        try (RawServer s = RawServer.always(new Hang())) {
            Run r = get(v, p, s).attempts(1).counts(1, 2).error(Outcome.Kind.TIMEOUT, "ReadTimeoutException");
            assertTrue(s.awaitCancels(1, Harness.SIGNAL), "the server saw the client go: " + r);
        }
    }

    /**
     * A8, attempt 1 s, total 1.5 s, delay 1 s, 503 at once: two attempts, and the total timeout
     * ends the call in the second delay: Reactor's TimeoutException names the total's 1500 ms
     * (the timeout after retryWhen; the 503s come at once, so it fired in the delay); the
     * interceptor says it ended in the delay, not at the start of a third attempt.
     */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void a8TotalTimeoutEndsTheSecondDelay(Variant v) throws Exception {
        try (RawServer s = RawServer.always(status(503))) {
            Policy p = Policy.source().withTimeouts(Duration.ofSeconds(1), Duration.ofMillis(1500))
                    .withRetries(2, Duration.ofSeconds(1));
            get(v, p, s).attempts(2).counts(2, 1)
                    .error(Outcome.Kind.TIMEOUT, v.web() ? "within 1500ms in 'retryWhen'"
                            : "total timeout of 1500ms ran out in the delay before attempt 3");
        }
    }

    /**
     * A9, each answer after 400 ms (503, then 200), delay 200 ms, total 2 s: the attempt's
     * timeout restarts with the retry, so the 200 arrives (at about 1 s). The article's attempt
     * limit is 500 ms; that leaves 100 ms for client and server together, which a loaded 2-core
     * machine overran in 2 of 8 runs (the first attempt cut at 500 ms). 700 ms keeps the
     * contract's point — one answer fits in an attempt, two answers and the delay (1000 ms) do
     * not — with 300 ms of slack either way.
     */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void a9AttemptTimeoutRestartsWithEachRetry(Variant v) throws Exception {
        try (RawServer s = RawServer.sequence(new Respond(503, "slow 503", 400), new Respond(200, "ok", 400))) {
            Policy p = Policy.source().withTimeouts(Duration.ofMillis(700), Duration.ofSeconds(2))
                    .withRetries(2, Duration.ofMillis(200));
            Harness.run(v, p, SOURCE, s, true, srv -> Request.get(srv.url("/fault")))
                    .status(200).attempts(2).counts(2, 1);
        }
    }

    /** W1: a POST retried on purpose (any method replayed): two requests, two writes. */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void w1PostRetriedWithoutAKeyWritesTwice(Variant v) throws Exception {
        try (RawServer s = RawServer.sequence(new Write(503), new Write(200))) {
            Policy p = Policy.source().withRetries(1, Duration.ofMillis(10)).withReplay(true, false);
            Harness.run(v, p, SOURCE, s, false, srv -> Request.post(srv.url("/fault"), Map.of(), ORDER))
                    .status(200).attempts(2).counts(2, 1);
            assertEquals(2, s.writes(), s.evidence());
            assertEquals(ORDER, s.seen().get(1).body(), "the replay carries the body: " + s.evidence());
        }
    }

    /** W2: the same Idempotency-Key on the replay: two requests, one write. */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void w2PostWithAKeptKeyWritesOnce(Variant v) throws Exception {
        try (RawServer s = RawServer.sequence(new Write(503), new Write(200))) {
            Policy p = Policy.source().withRetries(1, Duration.ofMillis(10)).withReplay(false, true);
            Harness.run(v, p, SOURCE, s, false,
                    srv -> Request.post(srv.url("/fault"), Map.of("Idempotency-Key", "order-7"), ORDER))
                    .status(200).attempts(2).counts(2, 1);
            assertEquals(1, s.writes(), s.evidence());
            assertEquals(List.of("order-7", "order-7"), s.keys());
        }
    }

    /** W3: a new key made per attempt: two requests, two writes, both keys received. */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void w3PostWithAKeyPerAttemptWritesTwice(Variant v) throws Exception {
        try (RawServer s = RawServer.sequence(new Write(503), new Write(200))) {
            Policy p = Policy.source().withRetries(1, Duration.ofMillis(10)).withReplay(false, true);
            Harness.run(v, p, SOURCE, s, false,
                    srv -> Request.post(srv.url("/fault"), Map.of(), ORDER).withKeyPerAttempt("order-7"))
                    .status(200).attempts(2).counts(2, 1);
            assertEquals(2, s.writes(), s.evidence());
            assertEquals(List.of("order-7-attempt-1", "order-7-attempt-2"), s.keys());
        }
    }

    /** W4: the default policy never replays a POST: one request, one write, the 503 to the caller. */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void w4PostIsNotRetriedByDefault(Variant v) throws Exception {
        try (RawServer s = RawServer.sequence(new Write(503), new Write(200))) {
            Harness.run(v, Policy.source(), SOURCE, s, false, srv -> Request.post(srv.url("/fault"), Map.of(), ORDER))
                    .status(503).attempts(1).counts(1, 1);
            assertEquals(1, s.writes(), s.evidence());
        }
    }

    /**
     * H1: the kept-alive connection is closed (FIN) after the server read the request, before
     * any response byte. WebClient with disableRetry(true) hands the PrematureCloseException to
     * the caller: the server saw 1 request for 1 attempt. The JDK HttpClient replays the GET by
     * itself on a new connection (its ConnectionExpiredException): the server saw 2 requests for
     * the retry layer's 1 attempt, and the caller got the replay's 200 — a hidden retry.
     */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void h1KeptAliveConnectionLostBeforeTheResponse(Variant v) throws Exception {
        try (RawServer s = new RawServer(r -> r.conn() == 1 ? new CloseBeforeResponse() : status(200))) {
            Run r = Harness.run(v, Policy.source(), SOURCE, s, true, srv -> Request.get(srv.url("/fault")));
            if (v.web()) {
                r.attempts(1).counts(1, 2).error(Outcome.Kind.CONNECTION, "Connection prematurely closed BEFORE response");
            } else {
                r.attempts(1).counts(2, 2).status(200);
                assertEquals(List.of(1, 2), s.seen().stream().map(RawServer.Seen::conn).toList(), r.toString());
            }
            // The server's thread records the close after the socket's: the client may have gone on.
            assertTrue(s.await(() -> s.closedBy(1) != null, Harness.SIGNAL), "connection 1 not ended: " + s.evidence());
            assertEquals(Map.of(1, "server"), Map.of(1, s.closedBy().get(1)), r.toString());
        }
    }
}
