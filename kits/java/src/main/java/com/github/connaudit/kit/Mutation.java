package com.github.connaudit.kit;

/**
 * A deliberate change to the source's configuration; the kit's own tests run them to show that
 * the audit catches each contract one breaks, and what the one that breaks none changes.
 */
public enum Mutation {
    /** Retry 500 as well as 503: breaks A5 (500 must reach the caller after one request). */
    RETRY_500(false),
    /**
     * Leave Reactor Netty's own retry on ({@code disableRetry(false)}, its default): when the
     * connection it holds for a request not yet written is reset, Reactor Netty sends the request
     * again on a new connection behind the retry layer's back (serve's reset-before-send: 1
     * request where the source's configuration makes none), which is safe. A request it has
     * written is never sent again, so the H1 and stale-reuse scenarios do not change. Breaks no
     * contract. WebClient only.
     */
    KEEP_HIDDEN_RETRY(true),
    /**
     * Put the total timeout before {@code retryWhen}, where it is resubscribed with every attempt
     * and no longer bounds the delays: breaks A8. WebClient only.
     */
    TOTAL_BEFORE_RETRY(true);

    private final boolean webClientOnly;

    Mutation(boolean webClientOnly) {
        this.webClientOnly = webClientOnly;
    }

    /**
     * Whether only WebClient's configuration has what this changes.
     *
     * @return true for a change RestClient ignores
     */
    public boolean webClientOnly() {
        return webClientOnly;
    }
}
