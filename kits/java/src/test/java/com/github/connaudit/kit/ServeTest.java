package com.github.connaudit.kit;

import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * The kit under {@code connaudit serve -- mvn -q -B -f kits/java test -Dtest=ServeTest}: a session
 * for WebClient and one for RestClient, each configured from every scenario's policy. The verdicts
 * are the server's (it prints them and sets its exit status); this test fails only when the
 * protocol does (a refused request, a scenario left unreported). {@code -Dconnaudit.mutations=
 * RETRY_500,KEEP_HIDDEN_RETRY,TOTAL_BEFORE_RETRY} runs mutated configurations instead.
 */
@EnabledIfEnvironmentVariable(named = "CONNAUDIT_URL", matches = ".+")
class ServeTest {

    @Test
    void bothClientsThroughServe() throws Exception {
        ServeKit kit = new ServeKit(System.getenv("CONNAUDIT_URL"), System.getenv("CONNAUDIT_CA"));
        Set<Mutation> m = SourceClients.mutations(System.getProperty("connaudit.mutations"));
        for (ServeKit.ClientFactory f : new ServeKit.ClientFactory[] {SourceClients.webclient(m), SourceClients.restclient(m)}) {
            JsonNode done = kit.run(f);
            System.out.println("kit: " + ServeKit.summary(done));
            assertTrue(done.path("not_reported").asInt() == 0, ServeKit.summary(done));
        }
    }
}
