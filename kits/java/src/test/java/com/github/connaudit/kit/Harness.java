package com.github.connaudit.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Set;
import java.util.function.Function;

/** Runs one call through a client against a {@link RawServer}, then /ok through the same client. */
final class Harness {

    /** How long a call may take before it is reported unbounded: well past every bound in the tests. */
    static final Duration GUARD = Duration.ofSeconds(15);

    /** How long a test waits for a server-side signal (a handler entered, a cancel seen). */
    static final Duration SIGNAL = Duration.ofSeconds(10);

    private Harness() {}

    static {
        warmUp();
    }

    /**
     * Loads every variant's classes and starts its event loops once per JVM, against a server of
     * its own: a fresh JVM's first request can take over half a second on a loaded machine, which
     * the contracts' bounds (A8's 1.5 s budget after a 1 s delay, A9's 100 ms of slack) would
     * otherwise count against whichever test happens to run first.
     */
    static void warmUp() {
        try (RawServer s = RawServer.always(new RawServer.Respond(200, "ok", 0))) {
            for (Variant v : Variant.values()) {
                try (AuditedClient c = v.make(Policy.source(), Set.of())) {
                    c.send(Request.get(s.url("/warm")), GUARD);
                    c.send(Request.post(s.url("/warm"), java.util.Map.of(), "{}"), GUARD);
                    c.recover(s.url("/ok"), GUARD);
                }
            }
        } catch (Exception e) {
            throw new IllegalStateException("warm-up failed", e);
        }
    }

    /** The clients under audit, each directly and through an HTTP Interface proxy. */
    enum Variant {
        WEBCLIENT("webclient", false),
        WEBCLIENT_INTERFACE("webclient", true),
        RESTCLIENT("restclient", false),
        RESTCLIENT_INTERFACE("restclient", true);

        final String client;
        final boolean viaInterface;

        Variant(String client, boolean viaInterface) {
            this.client = client;
            this.viaInterface = viaInterface;
        }

        boolean web() {
            return client.equals("webclient");
        }

        /**
         * Makes the client. The JDK HttpClient has no pool bound: the restclient variants take the
         * policy without it, as the chapter runs RestClient.
         */
        AuditedClient make(Policy p, Set<Mutation> m) throws NotConfigurableException {
            return web() ? new ReactorWebClient(p, m, viaInterface) : new JdkRestClient(p.withPool(0, null), m, viaInterface);
        }
    }

    /** What one run saw: the caller's outcome, /ok's, and the server's evidence. */
    record Run(Outcome outcome, Outcome ok, RawServer server, int attempts) {

        /** Asserts the server's counts and /ok, with the whole evidence in the message. */
        Run counts(int requests, int connections) {
            assertEquals(requests, server.requests(), "requests: " + this);
            assertEquals(connections, server.connections(), "connections (with /ok's): " + this);
            return recovered();
        }

        Run recovered() {
            assertTrue(ok.isStatus() && ok.status() == 200 && "ok".equals(ok.body()), "/ok after: " + this);
            return this;
        }

        Run status(int status) {
            assertTrue(outcome.isStatus() && outcome.status() == status, "caller: " + this);
            return this;
        }

        Run error(Outcome.Kind kind, String text) {
            assertEquals(kind, outcome.kind(), "caller: " + this);
            assertTrue(outcome.message().contains(text), "caller's message has \"" + text + "\": " + this);
            return this;
        }

        Run attempts(int n) {
            assertEquals(n, attempts, "retry layer's attempts: " + this);
            return this;
        }

        @Override
        public String toString() {
            return "caller=" + outcome + " attempts=" + attempts + " ok=" + ok + " | " + server.evidence();
        }
    }

    /**
     * Sends {@code request(server)} through a new client, optionally after a warm-up GET of /ok
     * (not counted in the server's requests; it leaves a kept-alive connection, and the faulted
     * request is then the 2nd on it), then GETs /ok through the same pool, outside the retry layer.
     */
    static Run run(Variant v, Policy p, Set<Mutation> m, RawServer server, boolean warm,
            Function<RawServer, Request> request) throws Exception {
        try (AuditedClient c = v.make(p, m)) {
            if (warm) {
                Outcome w = c.send(Request.get(server.url("/ok")), GUARD);
                assertTrue(w.isStatus() && w.status() == 200, "warm-up: " + w + " | " + server.evidence());
            }
            int before = c.attempts();
            Outcome o = c.send(request.apply(server), GUARD);
            int attempts = c.attempts() - before;
            Outcome ok = c.recover(server.url("/ok"), GUARD);
            return new Run(o, ok, server, attempts);
        }
    }
}
