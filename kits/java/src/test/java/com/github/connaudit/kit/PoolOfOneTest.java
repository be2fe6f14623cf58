package com.github.connaudit.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.github.connaudit.kit.Harness.Variant;
import com.github.connaudit.kit.RawServer.Hang;
import com.github.connaudit.kit.RawServer.PartialBody;
import com.github.connaudit.kit.RawServer.Respond;
import com.github.connaudit.kit.RawServer.Trickle;
import java.time.Duration;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * What the Go audit cannot express of the source's clients: the pool of one's pendingAcquireTimeout,
 * the read interval during the body, and a cancel seen by the server with its handler entered once.
 */
class PoolOfOneTest {

    private static RawServer holdOthers200() throws Exception {
        return new RawServer(r -> r.path().equals("/hold") ? new Hang() : new Respond(200, "ok", 0));
    }

    /**
     * ConnectionProvider maxConnections 1, pendingAcquireTimeout 1 s: while a first caller holds
     * the one connection, a second is refused by the pool (PoolAcquireTimeoutException) and never
     * reaches the server; once the first is cancelled, /ok is served on a new connection. The
     * calls have no attempt or total timeout here, so that the pool's is the only timer running.
     */
    @ParameterizedTest
    @EnumSource(value = Variant.class, names = {"WEBCLIENT", "WEBCLIENT_INTERFACE"})
    void secondCallerIsRefusedAfterThePendingAcquireTimeout(Variant v) throws Exception {
        Policy p = Policy.source().withTimeouts(null, null);
        try (RawServer s = holdOthers200(); AuditedClient c = v.make(p, Set.of())) {
            AuditedClient.Call first = c.start(Request.get(s.url("/hold")));
            assertTrue(s.awaitEntered(1, Harness.SIGNAL), s.evidence());
            Outcome second = c.send(Request.get(s.url("/fault")), Harness.GUARD);
            assertEquals(Outcome.Kind.POOL, second.kind(), second + " | " + s.evidence());
            assertTrue(second.message().contains("PoolAcquireTimeoutException"), second.toString());
            assertEquals(1, s.requests(), "the second caller never reached the server: " + s.evidence());
            assertEquals(1, s.connections(), s.evidence());
            first.cancel();
            assertEquals(Outcome.Kind.CANCELED, first.await(Harness.GUARD).kind());
            assertTrue(s.awaitCancels(1, Harness.SIGNAL), s.evidence());
            Outcome ok = c.recover(s.url("/ok"), Harness.GUARD);
            assertEquals(200, ok.status(), ok + " | " + s.evidence());
            assertEquals(2, s.connections(), s.evidence());
            assertEquals(1, s.maxOpen(), "never more than one connection open: " + s.evidence());
        }
    }

    /**
     * The JDK HttpClient has no bound on connections per host: the second caller gets a
     * connection of its own and its answer, while the first still waits.
     */
    @Test
    void jdkHttpClientOpensASecondConnectionForASecondCaller() throws Exception {
        try (RawServer s = holdOthers200(); AuditedClient c = Variant.RESTCLIENT.make(Policy.source(), Set.of())) {
            AuditedClient.Call first = c.start(Request.get(s.url("/hold")));
            assertTrue(s.awaitEntered(1, Harness.SIGNAL), s.evidence());
            Outcome second = c.send(Request.get(s.url("/fault")), Harness.GUARD);
            assertEquals(200, second.status(), second + " | " + s.evidence());
            assertEquals(2, s.maxOpen(), s.evidence());
            first.cancel();
            first.await(Harness.GUARD);
        }
    }

    /** responseTimeout 250 ms fires while the body stalls after 1000 of 10000 bytes. */
    @ParameterizedTest
    @EnumSource(value = Variant.class, names = {"WEBCLIENT", "WEBCLIENT_INTERFACE"})
    void readIntervalFiresDuringTheBody(Variant v) throws Exception {
        try (RawServer s = RawServer.always(new PartialBody(10_000, 1_000, false))) {
            Policy p = Policy.source().withReadTimeout(Duration.ofMillis(250));
            Harness.run(v, p, Set.of(), s, false, srv -> Request.get(srv.url("/fault")))
                    .attempts(1).counts(1, 2).error(Outcome.Kind.TIMEOUT, "ReadTimeoutException");
            assertTrue(s.awaitCancels(1, Harness.SIGNAL), s.evidence());
        }
    }

    /** responseTimeout 250 ms is an interval, not a deadline: a byte every 50 ms for 1 s is read whole. */
    @ParameterizedTest
    @EnumSource(value = Variant.class, names = {"WEBCLIENT", "WEBCLIENT_INTERFACE"})
    void readIntervalIsNotATotalDeadline(Variant v) throws Exception {
        try (RawServer s = RawServer.always(new Trickle(20, 50))) {
            Policy p = Policy.source().withReadTimeout(Duration.ofMillis(250));
            Harness.Run r = Harness.run(v, p, Set.of(), s, false, srv -> Request.get(srv.url("/fault")))
                    .attempts(1).status(200).counts(1, 1);
            assertEquals("x".repeat(20), r.outcome().body(), r.toString());
        }
    }

    /** A body cut short (Content-Length 10000, 1000 sent, FIN) is a connection error, never a status. */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void bodyCutShortIsAConnectionError(Variant v) throws Exception {
        try (RawServer s = RawServer.always(new PartialBody(10_000, 1_000, true))) {
            Harness.run(v, Policy.source(), Set.of(), s, false, srv -> Request.get(srv.url("/fault")))
                    .attempts(1).counts(1, 2).error(Outcome.Kind.CONNECTION, v.web() ? "DURING response" : "fixed content-length: 10000, bytes received: 1000");
        }
    }

    /**
     * Cancelling (WebClient: the subscription disposed; RestClient: the calling thread
     * interrupted) is seen by the server: the client closes the connection while the handler,
     * entered once, waits; /ok is then served on a new connection.
     */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void cancelIsSeenByTheServerWithTheHandlerEnteredOnce(Variant v) throws Exception {
        try (RawServer s = RawServer.always(new Hang()); AuditedClient c = v.make(Policy.source(), Set.of())) {
            AuditedClient.Call call = c.start(Request.get(s.url("/fault")));
            assertTrue(s.awaitEntered(1, Harness.SIGNAL), s.evidence());
            call.cancel();
            Outcome o = call.await(Harness.GUARD);
            assertEquals(Outcome.Kind.CANCELED, o.kind(), o + " | " + s.evidence());
            assertTrue(s.awaitCancels(1, Harness.SIGNAL), "the server saw the client go: " + s.evidence());
            Outcome ok = c.recover(s.url("/ok"), Harness.GUARD);
            assertEquals(200, ok.status(), ok + " | " + s.evidence());
            assertEquals(1, s.handlersEntered(), s.evidence());
            assertEquals(1, s.requests(), s.evidence());
            assertEquals(2, s.connections(), s.evidence());
        }
    }
}
