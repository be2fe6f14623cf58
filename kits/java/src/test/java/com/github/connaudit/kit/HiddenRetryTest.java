package com.github.connaudit.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.github.connaudit.kit.Harness.Run;
import com.github.connaudit.kit.Harness.Variant;
import com.github.connaudit.kit.RawServer.Action;
import com.github.connaudit.kit.RawServer.CloseBeforeResponse;
import com.github.connaudit.kit.RawServer.ResetBeforeResponse;
import com.github.connaudit.kit.RawServer.Respond;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The clients' own replays, behind the retry layer's back, for every disconnect a server can make
 * before its response: FIN or RST right after reading the request, on a fresh connection or on a
 * kept-alive one (the request is then the 2nd on it), for a GET and a POST. The faulted request
 * is the first the server counts; every later one is answered 200.
 *
 * <p>Reactor Netty 1.2's "retry once" ({@code disableRetry(false)}, its default) sends again only a
 * request none of which was written (reactor-netty #1626: "Do not retry the request when the
 * headers/body were sent"), and only after a reset (AbortedException.isConnectionReset): so with it
 * on or off, every count of a request the server read is the same — one request for one attempt,
 * the error to the caller. It fires when the connection it holds for a request not yet written is
 * reset: a body not ready yet holds the headers back, and the server then reads the request once,
 * on a new connection, where with the retry off it reads nothing (the held-body test). The JDK
 * HttpClient does replay: a GET (or HEAD) that fails before any response byte is sent once more
 * on a new connection (its ConnectionExpiredException), fresh connection or not; a POST is not.
 */
class HiddenRetryTest {

    enum Fault {
        FIN(new CloseBeforeResponse(), "Connection prematurely closed BEFORE response", "EOF"),
        RST(new ResetBeforeResponse(), "Connection reset by peer", "Connection reset");

        final Action action;
        final String reactorText;
        final String jdkText;

        Fault(Action action, String reactorText, String jdkText) {
            this.action = action;
            this.reactorText = reactorText;
            this.jdkText = jdkText;
        }
    }

    static List<Arguments> webclientCases() {
        List<Arguments> cases = new ArrayList<>();
        for (boolean disableRetry : new boolean[] {true, false}) {
            for (Fault f : Fault.values()) {
                for (boolean keptAlive : new boolean[] {false, true}) {
                    for (String method : new String[] {"GET", "POST"}) {
                        cases.add(Arguments.of(disableRetry, f, keptAlive, method));
                    }
                }
            }
        }
        return cases;
    }

    static List<Arguments> jdkCases() {
        List<Arguments> cases = new ArrayList<>();
        for (Fault f : Fault.values()) {
            for (boolean keptAlive : new boolean[] {false, true}) {
                for (String method : new String[] {"GET", "POST"}) {
                    cases.add(Arguments.of(f, keptAlive, method));
                }
            }
        }
        return cases;
    }

    private static Function<RawServer, Request> request(String method) {
        return s -> method.equals("GET") ? Request.get(s.url("/fault"))
                : Request.post(s.url("/fault"), Map.of(), "{\"order\":7}");
    }

    private static RawServer firstFaulted(Fault f) throws Exception {
        return new RawServer(r -> r.index() == 1 ? f.action : new Respond(200, "ok", 0));
    }

    @ParameterizedTest(name = "disableRetry({0}) {1} kept-alive={2} {3}")
    @MethodSource("webclientCases")
    void reactorNettyNeverReplaysARequestTheServerRead(boolean disableRetry, Fault f, boolean keptAlive, String method)
            throws Exception {
        Set<Mutation> m = disableRetry ? Set.of() : Set.of(Mutation.KEEP_HIDDEN_RETRY);
        try (RawServer s = firstFaulted(f)) {
            Run r = Harness.run(Variant.WEBCLIENT, Policy.source(), m, s, keptAlive, request(method));
            // the faulted connection, and a new one for /ok
            r.attempts(1).counts(1, 2).error(Outcome.Kind.CONNECTION, f.reactorText);
            assertEquals(keptAlive ? 2 : 1, s.seen().get(0).onConn(), r.toString());
        }
    }

    static List<Arguments> heldCases() {
        List<Arguments> cases = new ArrayList<>();
        for (boolean disableRetry : new boolean[] {true, false}) {
            for (Fault f : Fault.values()) {
                cases.add(Arguments.of(disableRetry, f));
            }
        }
        return cases;
    }

    /**
     * Where Reactor Netty's retry does fire: the kept-alive connection it holds for a POST whose
     * body is not ready yet (a publisher that has not emitted: the headers wait for it) is reset
     * by the server before anything of the POST was written. With {@code disableRetry(false)}
     * Reactor Netty acquires a new connection and sends the POST there, once: the caller gets the
     * 200 and the server reads the POST on connection 2, which with {@code disableRetry(true)} it
     * never sees (the caller gets the reset). After a FIN in the same place nothing is sent again
     * either way: HttpClientOperations.onInboundClose marks the request sent before the retry's
     * check (HttpClientConnect.HttpObserver: "the request cannot be retried as the headers/body
     * were sent"), and the caller gets "Connection has been closed BEFORE send operation".
     */
    @ParameterizedTest(name = "disableRetry({0}) {1} while the POST's body is held")
    @MethodSource("heldCases")
    void reactorNettyResendsAPostNotYetWrittenOnlyAfterAResetAndOnlyWithItsRetryOn(boolean disableRetry, Fault f)
            throws Exception {
        Set<Mutation> m = disableRetry ? Set.of() : Set.of(Mutation.KEEP_HIDDEN_RETRY);
        try (RawServer s = RawServer.always(new Respond(200, "ok", 0));
                ReactorWebClient c = new ReactorWebClient(Policy.source(), m, false)) {
            Outcome warm = c.send(Request.get(s.url("/warm")), Harness.GUARD);
            assertEquals(200, warm.status(), s.evidence());
            int before = c.attempts();
            Outcome o = c.startHeld(Request.post(s.url("/fault"), Map.of(), "{\"order\":7}"), () -> {
                try {
                    s.closeConnection(1, f == Fault.RST);
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }).await(Harness.GUARD);
            Outcome ok = c.recover(s.url("/ok"), Harness.GUARD);
            Run r = new Run(o, ok, s, c.attempts() - before);
            r.attempts(1).recovered();
            // The server's thread records the close after the socket's: the client may have gone on.
            assertTrue(s.await(() -> s.closedBy(1) != null, Harness.SIGNAL), "connection 1 not ended: " + s.evidence());
            assertEquals("server", s.closedBy().get(1), r.toString());
            if (!disableRetry && f == Fault.RST) {
                r.status(200);
                assertEquals(List.of("GET /warm@1", "POST /fault@2"), seen(s), r.toString());
            } else {
                r.error(Outcome.Kind.CONNECTION, f == Fault.RST ? "Connection reset by peer"
                        : "Connection has been closed BEFORE send operation");
                assertEquals(List.of("GET /warm@1"), seen(s), r.toString());
            }
        }
    }

    private static List<String> seen(RawServer s) {
        return s.seen().stream().map(x -> x.method() + " " + x.path() + "@" + x.conn()).toList();
    }

    @ParameterizedTest(name = "{0} kept-alive={1} {2}")
    @MethodSource("jdkCases")
    void jdkHttpClientReplaysAGetOnceOnANewConnection(Fault f, boolean keptAlive, String method) throws Exception {
        try (RawServer s = firstFaulted(f)) {
            Run r = Harness.run(Variant.RESTCLIENT, Policy.source(), Set.of(), s, keptAlive, request(method));
            if (method.equals("GET")) {
                // 2 requests for 1 attempt; the replay's 200 reaches the caller; /ok reuses its connection
                r.attempts(1).counts(2, 2).status(200);
                assertEquals(List.of(1, 2), s.seen().stream().map(RawServer.Seen::conn).toList(), r.toString());
            } else {
                r.attempts(1).counts(1, 2).error(Outcome.Kind.CONNECTION, f.jdkText);
            }
        }
    }
}
