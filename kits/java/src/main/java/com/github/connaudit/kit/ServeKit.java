package com.github.connaudit.kit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.OptionalDouble;
import java.util.Set;

/**
 * The Java kit of {@code connaudit serve} (protocol {@code connaudit.serve/v1}, docs/serve.md):
 * opens a session for one client, fetches the scenarios, configures a new client from each
 * scenario's policy, runs the scenario's steps through it, sends /ok through the same client,
 * reports what the caller got, and says done. It never judges: the verdicts are the server's.
 * Its control requests go through a JDK HttpClient of its own, never the client under test.
 */
public final class ServeKit {

    /** The protocol this kit speaks. */
    public static final String PROTOCOL = "connaudit.serve/v1";

    /** Makes the client under test for one scenario. */
    public interface ClientFactory {
        /**
         * The client's name in the protocol ({@code webclient}, {@code restclient}).
         *
         * @return the name
         */
        String name();

        /**
         * The versions of the client's libraries.
         *
         * @return one short line
         */
        String version();

        /**
         * How the client is configured, for the session.
         *
         * @return one line
         */
        String config();

        /**
         * A new client (its own pool) configured from a scenario's policy.
         *
         * @param policy the scenario's numbers
         * @param tls the CA that signs the HTTPS listeners, or null for plain HTTP
         * @return the client
         * @throws NotConfigurableException when the client has no equivalent of a setting
         */
        AuditedClient create(Policy policy, Tls tls) throws NotConfigurableException;

        /**
         * How long the client keeps an idle connection before it closes it itself, as the kit
         * configures it (client.idle_timeout_ms): 0 when it never does.
         *
         * @return the timeout in ms, or empty when unknown
         */
        OptionalDouble idleTimeoutMillis();

        /**
         * What fixes each failure in the client's own terms (client.terms, docs/serve.md): by
         * default the resource {@code /NAME.terms.json} (src/main/resources), none when absent.
         *
         * @return the resource's path on the class path
         */
        default String termsResource() {
            return "/" + name() + ".terms.json";
        }
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    private final URI control;
    private final String caFile;
    private final HttpClient ctl = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5)).build();

    /**
     * A kit for one server.
     *
     * @param controlUrl the control API's URL, CONNAUDIT_URL
     * @param caFile the CA file of the HTTPS listeners, CONNAUDIT_CA (may be null)
     */
    public ServeKit(String controlUrl, String caFile) {
        if (controlUrl == null || controlUrl.isEmpty()) {
            throw new IllegalArgumentException("CONNAUDIT_URL is not set: run under connaudit serve -- CMD");
        }
        this.control = URI.create(controlUrl.endsWith("/") ? controlUrl.substring(0, controlUrl.length() - 1) : controlUrl);
        this.caFile = caFile;
    }

    /**
     * Runs one session: every scenario the server offers, through clients the factory makes.
     *
     * @param factory the client under test
     * @return the server's report of the session (the response to done)
     * @throws IOException when the server refuses a control request, or cannot be reached
     * @throws InterruptedException when interrupted
     */
    public JsonNode run(ClientFactory factory) throws IOException, InterruptedException {
        ObjectNode open = JSON.createObjectNode().put("protocol", PROTOCOL).put("kit", "java");
        ObjectNode client = open.putObject("client").put("name", factory.name()).put("version", cut(factory.version(), 200))
                .put("config", cut(factory.config(), 200));
        OptionalDouble idle = factory.idleTimeoutMillis();
        if (idle.isPresent()) {
            client.put("idle_timeout_ms", idle.getAsDouble());
        }
        try (var terms = ServeKit.class.getResourceAsStream(factory.termsResource())) {
            if (terms != null) {
                client.set("terms", JSON.readTree(terms));
            }
        }
        open.putArray("protocols").add("http1");
        // CONNAUDIT_URL has a path of its own (its key): append, never resolve "/v1/…".
        JsonNode session = call("POST", URI.create(control + "/v1/sessions"), open);
        URI scenariosUrl = URI.create(session.path("scenarios_url").asText());
        JsonNode scenarios = call("GET", scenariosUrl, null);
        warmUp(factory, scenariosUrl);
        URI reports = URI.create(session.path("report_url").asText());
        for (JsonNode sc : scenarios.path("scenarios")) {
            call("POST", reports, scenario(factory, sc));
        }
        return call("POST", URI.create(session.path("done_url").asText()), JSON.createObjectNode());
    }

    /**
     * Loads the client's classes and starts its event loops before the first scenario, through a
     * throwaway client of the same kind and the control API (never a fault listener, so nothing of
     * it is counted): a fresh JVM's first request can take over a second, longer than the
     * catalogue's 150 ms bounds, and a verdict must not depend on which scenario comes first.
     */
    private static void warmUp(ClientFactory factory, URI control) {
        try (AuditedClient c = factory.create(Policy.source().withPool(0, null), null)) {
            c.send(Request.get(control), Duration.ofSeconds(30));
        } catch (NotConfigurableException e) {
            // a client that cannot take the source's policy warms up on its first scenario
        }
    }

    /** Runs one scenario and makes its report. */
    private ObjectNode scenario(ClientFactory factory, JsonNode sc) throws IOException, InterruptedException {
        ObjectNode report = JSON.createObjectNode().put("scenario", sc.path("name").asText());
        Policy policy = policy(sc.path("policy"));
        URI url = URI.create(sc.path("url").asText());
        Tls tls = url.getScheme().equals("https") ? Tls.fromPem(caFile) : null;
        AuditedClient client;
        try {
            client = factory.create(policy, tls);
        } catch (NotConfigurableException e) {
            return report.put("not_configurable", e.getMessage());
        }
        try (client) {
            Duration guard = Duration.ofMillis(sc.path("guard_ms").asLong(8000) + 5000);
            Request request = request(sc.path("request"), url);
            String steps = sc.path("steps").asText();
            Outcome outcome;
            switch (steps) {
                case "request" -> outcome = client.send(request, guard);
                case "read-then-close" -> outcome = client.send(request.readingOnly(sc.path("read_bytes").asInt()), guard);
                case "warm-then-request" -> {
                    warm(client, sc, url, guard);
                    outcome = client.send(request, guard);
                }
                case "warm-close-then-request" -> {
                    warm(client, sc, url, guard);
                    call("POST", URI.create(sc.path("close_url").asText()), JSON.createObjectNode());
                    outcome = client.send(request, guard);
                }
                case "warm-then-held-body" -> {
                    warm(client, sc, url, guard);
                    URI close = URI.create(sc.path("close_url").asText());
                    AuditedClient.Call call;
                    try {
                        call = client.startHeld(request, () -> closeQuietly(close));
                    } catch (NotConfigurableException e) {
                        return report.put("not_configurable", e.getMessage());
                    }
                    outcome = call.await(guard);
                }
                case "cancel-when-entered" -> {
                    AuditedClient.Call call = client.start(request);
                    entered(sc);
                    call.cancel();
                    outcome = call.await(guard);
                }
                case "second-caller" -> {
                    AuditedClient.Call first = client.start(Request.get(URI.create(sc.path("hold_url").asText())));
                    entered(sc);
                    outcome = client.send(request, guard);
                    first.await(guard);
                }
                default -> {
                    return report.put("skipped", "steps " + steps + " unknown to this kit");
                }
            }
            settle(sc);
            Outcome ok = client.recover(URI.create(sc.path("ok_url").asText()), guard);
            put(report.putObject("outcome"), outcome);
            report.put("elapsed_ms", outcome.elapsedMillis());
            report.put("attempts", outcome.attempts());
            ObjectNode o = report.putObject("ok");
            put(o, ok);
            o.put("elapsed_ms", ok.elapsedMillis());
            report.put("config", cut(client.config(), 1000));
        }
        return report;
    }

    /**
     * Sends the scenario's warm-ups: warm_requests GETs (1 if absent) of warm_url (url if absent),
     * each read to its end, which leave a kept-alive connection.
     */
    private static void warm(AuditedClient client, JsonNode sc, URI url, Duration guard) {
        URI warm = sc.hasNonNull("warm_url") ? URI.create(sc.path("warm_url").asText()) : url;
        int n = Math.max(1, sc.path("warm_requests").asInt(1));
        for (int i = 0; i < n; i++) {
            client.send(Request.get(warm), guard);
        }
    }

    /**
     * POSTs the scenario's settle_url, when it has one, after the faulted call and before /ok: the
     * server answers once the client has closed the connection the fault made unusable, or after
     * its bound, so that /ok does not race the client's own close.
     */
    private void settle(JsonNode sc) throws IOException, InterruptedException {
        if (sc.hasNonNull("settle_url")) {
            call("POST", URI.create(sc.path("settle_url").asText()), JSON.createObjectNode());
        }
    }

    /**
     * Asks the server to close the held connection (close_url), from the client's first asking for
     * the body; a failure is printed, and the call then ends with the server's guard.
     */
    private void closeQuietly(URI close) {
        try {
            call("POST", close, JSON.createObjectNode());
        } catch (IOException e) {
            System.err.println("kits/java: close_url: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Long-polls the scenario's entered_url until the handler is entered. */
    private void entered(JsonNode sc) throws IOException, InterruptedException {
        call("GET", URI.create(sc.path("entered_url").asText()), null);
    }

    private static void put(ObjectNode into, Outcome o) {
        if (o.isStatus()) {
            into.put("status", o.status());
        } else {
            into.putObject("error").put("kind", o.kind().wire()).put("message", cut(o.message(), 1024));
        }
    }

    /**
     * A scenario's policy object, as a {@link Policy}: 0 is "not set".
     *
     * @param p the policy object
     * @return the policy
     */
    static Policy policy(JsonNode p) {
        Set<Integer> statuses = new HashSet<>();
        p.path("retry_statuses").forEach(s -> statuses.add(s.asInt()));
        Set<String> methods = new HashSet<>();
        p.path("retry_methods").forEach(m -> methods.add(m.asText()));
        return new Policy(ms(p, "attempt_timeout_ms"), ms(p, "total_timeout_ms"), p.path("max_retries").asInt(),
                ms(p, "delay_ms"), statuses, p.path("retry_errors").asBoolean(), methods,
                p.path("retry_with_idempotency_key").asBoolean(), p.path("retry_any_method").asBoolean(),
                ms(p, "connect_timeout_ms"), ms(p, "tls_timeout_ms"), ms(p, "read_timeout_ms"),
                p.path("pool_max_per_host").asInt(), ms(p, "pool_acquire_timeout_ms"), ms(p, "send_ping_timeout_ms"),
                ms(p, "ping_timeout_ms"));
    }

    private static Duration ms(JsonNode p, String field) {
        double v = p.path(field).asDouble();
        return v > 0 ? Duration.ofNanos((long) (v * 1e6)) : null;
    }

    private static Request request(JsonNode r, URI url) {
        Map<String, String> headers = new LinkedHashMap<>();
        r.path("headers").properties().forEach(e -> headers.put(e.getKey(), e.getValue().asText()));
        String key = r.hasNonNull("key_per_attempt") ? r.path("key_per_attempt").asText() : null;
        return new Request(r.path("method").asText("GET"), url, headers, r.path("body").asText(""), key, -1);
    }

    /** One control request; a 4xx or 5xx is the server's refusal, with its error. */
    private JsonNode call(String method, URI uri, JsonNode body) throws IOException, InterruptedException {
        HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30))
                .header("Content-Type", "application/json");
        b.method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                : HttpRequest.BodyPublishers.ofByteArray(JSON.writeValueAsBytes(body)));
        HttpResponse<String> resp = ctl.send(b.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        if (resp.statusCode() / 100 != 2) {
            throw new IOException("connaudit serve refused " + method + " " + redact(uri) + ": " + resp.statusCode()
                    + " " + cut(resp.body(), 300));
        }
        return JSON.readTree(resp.body());
    }

    /** The URI without its query, whose values the kit does not print. */
    private static String redact(URI uri) {
        return uri.getScheme() + "://" + uri.getRawAuthority() + uri.getRawPath();
    }

    static String cut(String s, int max) {
        if (s == null) {
            return "";
        }
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        if (b.length <= max) {
            return s;
        }
        String c = new String(b, 0, max, StandardCharsets.UTF_8);
        return c.endsWith("\uFFFD") ? c.substring(0, c.length() - 1) : c;
    }

    /**
     * The line every kit prints when its session is done (the Python, Node and curl kits' format):
     * {@code connaudit kit: NAME: N passed, N failed, N not configurable}.
     *
     * @param done the response to done
     * @return the line
     */
    public static String line(JsonNode done) {
        return "connaudit kit: " + done.path("client").path("name").asText() + ": " + done.path("passed").asInt()
                + " passed, " + done.path("failed").asInt() + " failed, " + done.path("not_configurable").asInt()
                + " not configurable";
    }

    /**
     * One line of a session's report: its counts, as the server gave them.
     *
     * @param done the response to done
     * @return the line
     */
    public static String summary(JsonNode done) {
        return done.path("client").path("name").asText() + " " + done.path("session").asText() + ": "
                + done.path("passed").asInt() + " passed, " + done.path("failed").asInt() + " failed, "
                + done.path("not_configurable").asInt() + " not configurable, "
                + done.path("not_reported").asInt() + " not reported"
                + (done.path("ok").asBoolean() ? "" : " (not ok)");
    }
}
