package com.github.connaudit.kit;

import com.github.connaudit.kit.Harness.Variant;
import com.github.connaudit.kit.RawServer.Respond;
import java.time.Duration;
import java.util.Set;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Each mutation of the source's configuration fails the contract it breaks, with the server's
 * counts; ContractsTest holds the same contracts at the source's configuration. Dropping
 * disableRetry(true) is HiddenRetryTest's and StaleReuseTest's: it breaks no contract, and changes
 * only a request none of which was written.
 */
class MutationsTest {

    /** Retrying 500 breaks A5: 3 requests instead of 1 (the 500 still reaches the caller at the end). */
    @ParameterizedTest
    @EnumSource(Variant.class)
    void retrying500BreaksA5(Variant v) throws Exception {
        try (RawServer s = RawServer.always(new Respond(500, "status 500", 0))) {
            Harness.run(v, Policy.source(), Set.of(Mutation.RETRY_500), s, false, srv -> Request.get(srv.url("/fault")))
                    .status(500).attempts(3).counts(3, 1);
        }
    }

    /**
     * The total timeout before retryWhen is resubscribed with every attempt, so it bounds each
     * attempt, not the delays: A8's budget never fires, a third attempt starts after the second
     * delay, and the caller gets the last 503 instead of the budget's timeout.
     */
    @ParameterizedTest
    @EnumSource(value = Variant.class, names = {"WEBCLIENT", "WEBCLIENT_INTERFACE"})
    void totalTimeoutBeforeRetryWhenBreaksA8(Variant v) throws Exception {
        try (RawServer s = RawServer.always(new Respond(503, "status 503", 0))) {
            Policy p = Policy.source().withTimeouts(Duration.ofSeconds(1), Duration.ofMillis(1500))
                    .withRetries(2, Duration.ofSeconds(1));
            Harness.run(v, p, Set.of(Mutation.TOTAL_BEFORE_RETRY), s, false, srv -> Request.get(srv.url("/fault")))
                    .status(503).attempts(3).counts(3, 1);
        }
    }
}
