package com.github.connaudit.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;

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
 * <p>Reactor Netty 1.2's "retry once" ({@code disableRetry(false)}, its default) replays only a
 * request whose headers were never written (reactor-netty #1626: "support retry only in case no
 * headers are sent"; #1183: a close seen between the pool's acquire and the send, a race its
 * authors call not reliably reproducible). A server therefore never sees it: with it on or off,
 * every count here is the same — one request for one attempt, the error to the caller. The JDK
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
