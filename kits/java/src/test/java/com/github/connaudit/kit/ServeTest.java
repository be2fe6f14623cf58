package com.github.connaudit.kit;

import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * The kit under {@code connaudit serve -- mvn -q -B -f kits/java test -Dtest=ServeTest}: a session
 * for WebClient and one for RestClient, each configured from every scenario's policy. The verdicts
 * are the server's (it prints them and sets its exit status); this test fails only when the
 * protocol does (a refused request, a scenario left unreported).
 *
 * <p>{@code -Dconnaudit.mutations=RETRY_500} runs a mutated configuration instead; groups
 * separated by {@code ;} run one after another in the same JVM ({@code ;RETRY_500;KEEP_HIDDEN_RETRY}:
 * the source's, then each mutation), each group with both clients, or WebClient alone when every
 * mutation of the group is WebClient's only.
 *
 * <p>Without {@code -Dconnaudit.mutations}, four sessions follow: OkHttp and Apache HttpClient 5
 * configured from each policy, then both with their users' defaults at once ({@link ShippedClients});
 * {@code -Dconnaudit.shipped=false} leaves them out.
 */
@EnabledIfEnvironmentVariable(named = "CONNAUDIT_URL", matches = ".+")
class ServeTest {

    /**
     * The sessions of the clients' defaults, at once: most of their time is spent waiting on a
     * fault the defaults do not bound (a handler that never answers, until the server's guard).
     */
    private static void defaults(ServeKit kit) throws Exception {
        List<java.util.concurrent.CompletableFuture<JsonNode>> runs = new ArrayList<>();
        for (ServeKit.ClientFactory f : ShippedClients.defaults()) {
            runs.add(java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                try {
                    return kit.run(f);
                } catch (Exception e) {
                    throw new java.util.concurrent.CompletionException(e);
                }
            }));
        }
        for (var r : runs) {
            JsonNode done = r.get(10, java.util.concurrent.TimeUnit.MINUTES);
            System.out.println(ServeKit.line(done));
            assertTrue(done.path("not_reported").asInt() == 0, ServeKit.summary(done));
        }
    }

    @Test
    void bothClientsThroughServe() throws Exception {
        ServeKit kit = new ServeKit(System.getenv("CONNAUDIT_URL"), System.getenv("CONNAUDIT_CA"));
        String groups = System.getProperty("connaudit.mutations", "");
        boolean mutated = System.getProperty("connaudit.mutations") != null;
        for (String group : groups.split(";", -1)) {
            Set<Mutation> m = SourceClients.mutations(group);
            List<ServeKit.ClientFactory> clients = new ArrayList<>(List.of(SourceClients.webclient(m)));
            if (m.isEmpty() || !m.stream().allMatch(Mutation::webClientOnly)) {
                clients.add(SourceClients.restclient(m));
            }
            if (!mutated && Boolean.parseBoolean(System.getProperty("connaudit.shipped", "true"))) {
                clients.addAll(ShippedClients.configured());
            }
            for (ServeKit.ClientFactory f : clients) {
                JsonNode done = kit.run(f);
                System.out.println(ServeKit.line(done));
                assertTrue(done.path("not_reported").asInt() == 0, ServeKit.summary(done));
            }
            if (!mutated && Boolean.parseBoolean(System.getProperty("connaudit.shipped", "true"))) {
                defaults(kit);
            }
        }
    }
}
