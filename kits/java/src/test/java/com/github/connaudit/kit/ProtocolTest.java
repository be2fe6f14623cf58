package com.github.connaudit.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The kit's side of the protocol's additions, against a stand-in for connaudit serve (the JDK's
 * HttpServer on loopback): the client's idle timeout declared at open, the warm-ups (warm_url,
 * warm_requests), settle_url POSTed after the faulted call and before /ok, and HTTP/2's health
 * check said in the report's config.
 */
class ProtocolTest {

    private static final ObjectMapper JSON = new ObjectMapper();

    /** The requests the stand-in saw, in order ("METHOD /path"), and the bodies it was sent. */
    private final List<String> seen = new CopyOnWriteArrayList<>();
    private final List<JsonNode> opens = new CopyOnWriteArrayList<>();
    private final List<JsonNode> reports = new CopyOnWriteArrayList<>();

    private HttpServer standIn() throws IOException {
        HttpServer h = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        String base = "http://127.0.0.1:" + h.getAddress().getPort();
        h.createContext("/", x -> {
            String what = x.getRequestMethod() + " " + x.getRequestURI().getPath();
            byte[] body = x.getRequestBody().readAllBytes();
            String answer = "ok";
            switch (what) {
                case "POST /key/v1/sessions" -> {
                    opens.add(JSON.readTree(body));
                    answer = "{\"session\":\"s1\",\"scenarios_url\":\"" + base + "/scenarios\",\"report_url\":\"" + base
                            + "/report\",\"done_url\":\"" + base + "/done\"}";
                }
                case "GET /scenarios" -> answer = "{\"scenarios\":[{\"name\":\"x\",\"steps\":\"warm-then-request\","
                        + "\"url\":\"" + base + "/fault\",\"ok_url\":\"" + base + "/ok\",\"warm_url\":\"" + base + "/warm\","
                        + "\"warm_requests\":2,\"settle_url\":\"" + base + "/settle\",\"request\":{\"method\":\"GET\"},"
                        + "\"policy\":{\"attempt_timeout_ms\":1000,\"send_ping_timeout_ms\":300,\"ping_timeout_ms\":300},"
                        + "\"guard_ms\":2000}]}";
                case "POST /report" -> {
                    reports.add(JSON.readTree(body));
                    answer = "{}";
                }
                case "POST /settle" -> answer = "{\"client_closed\":true}";
                case "POST /done" -> answer = "{\"client\":{\"name\":\"x\"},\"passed\":1}";
                default -> {
                    // the warm-ups, the faulted request and /ok
                }
            }
            if (!what.equals("GET /scenarios") || !seen.contains(what)) {
                seen.add(what);
            }
            reply(x, answer);
        });
        h.start();
        return h;
    }

    private static void reply(HttpExchange x, String answer) throws IOException {
        byte[] b = answer.getBytes(StandardCharsets.UTF_8);
        x.getResponseHeaders().add("Content-Type", answer.startsWith("{") ? "application/json" : "text/plain");
        x.sendResponseHeaders(200, b.length);
        x.getResponseBody().write(b);
        x.close();
    }

    /**
     * Each client's session: the open declares its idle timeout; the scenario's two warm-ups of
     * warm_url come before the faulted request, settle_url after it and before /ok; the report's
     * config says the health check is not applied, and by which client.
     */
    @ParameterizedTest
    @ValueSource(strings = {"webclient", "restclient"})
    void additionsOfTheProtocol(String name) throws Exception {
        HttpServer h = standIn();
        try {
            ServeKit kit = new ServeKit("http://127.0.0.1:" + h.getAddress().getPort() + "/key", null);
            ServeKit.ClientFactory f = name.equals("webclient") ? SourceClients.webclient(Set.of())
                    : SourceClients.restclient(Set.of());
            kit.run(f);
        } finally {
            h.stop(0);
        }
        assertEquals(List.of("POST /key/v1/sessions", "GET /scenarios", "GET /warm", "GET /warm", "GET /fault",
                "POST /settle", "GET /ok", "POST /report", "POST /done"), seen);
        JsonNode idle = opens.get(0).path("client").path("idle_timeout_ms");
        JsonNode report = reports.get(0);
        assertEquals(200, report.path("outcome").path("status").asInt(), report.toString());
        if (name.equals("webclient")) {
            assertEquals(0.0, idle.asDouble(-1), "Reactor Netty's default: no idle timeout");
            assertTrue(report.path("config").asText().contains(ReactorWebClient.NO_PING), report.toString());
        } else {
            assertEquals(JdkRestClient.KeepAlive.current().millis().getAsDouble(), idle.asDouble(-1));
            assertTrue(report.path("config").asText().contains(JdkRestClient.NO_PING), report.toString());
        }
    }

    /** A scenario's ping settings reach the policy; without them it has none. */
    @Test
    void pingSettingsAreParsed() throws Exception {
        Policy p = ServeKit.policy(JSON.readTree("{\"send_ping_timeout_ms\":300,\"ping_timeout_ms\":250}"));
        assertEquals(Duration.ofMillis(300), p.sendPingTimeout());
        assertEquals(Duration.ofMillis(250), p.pingTimeout());
        assertTrue(p.hasPing());
        assertFalse(ServeKit.policy(JSON.readTree("{}")).hasPing());
    }

    /**
     * The JDK's keep-alive timeout as the running JVM has it: 1200 s on JDK 17 and 30 s from JDK
     * 20 unless set; the system property when set; unknown when it is not a positive number.
     */
    @Test
    void jdkKeepAliveTimeoutIsTheRunningJvms() {
        String was = System.getProperty(JdkRestClient.KeepAlive.PROPERTY);
        try {
            System.clearProperty(JdkRestClient.KeepAlive.PROPERTY);
            long want = Runtime.version().feature() >= 20 ? 30 : 1200;
            assertEquals(want, JdkRestClient.KeepAlive.current().seconds());
            assertEquals(want * 1000.0, JdkRestClient.KeepAlive.current().millis().getAsDouble());
            System.setProperty(JdkRestClient.KeepAlive.PROPERTY, "45");
            assertEquals(45, JdkRestClient.KeepAlive.current().seconds());
            System.setProperty(JdkRestClient.KeepAlive.PROPERTY, "0");
            assertTrue(JdkRestClient.KeepAlive.current().millis().isEmpty());
            System.setProperty(JdkRestClient.KeepAlive.PROPERTY, "soon");
            assertEquals(want, JdkRestClient.KeepAlive.current().seconds());
        } finally {
            if (was == null) {
                System.clearProperty(JdkRestClient.KeepAlive.PROPERTY);
            } else {
                System.setProperty(JdkRestClient.KeepAlive.PROPERTY, was);
            }
        }
    }
}
