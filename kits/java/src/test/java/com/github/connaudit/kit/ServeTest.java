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
 */
@EnabledIfEnvironmentVariable(named = "CONNAUDIT_URL", matches = ".+")
class ServeTest {

    @Test
    void bothClientsThroughServe() throws Exception {
        ServeKit kit = new ServeKit(System.getenv("CONNAUDIT_URL"), System.getenv("CONNAUDIT_CA"));
        String groups = System.getProperty("connaudit.mutations", "");
        for (String group : groups.split(";", -1)) {
            Set<Mutation> m = SourceClients.mutations(group);
            List<ServeKit.ClientFactory> clients = new ArrayList<>(List.of(SourceClients.webclient(m)));
            if (m.isEmpty() || !m.stream().allMatch(Mutation::webClientOnly)) {
                clients.add(SourceClients.restclient(m));
            }
            for (ServeKit.ClientFactory f : clients) {
                JsonNode done = kit.run(f);
                System.out.println(ServeKit.line(done));
                assertTrue(done.path("not_reported").asInt() == 0, ServeKit.summary(done));
            }
        }
    }
}
