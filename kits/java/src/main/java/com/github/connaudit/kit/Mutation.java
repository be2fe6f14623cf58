package com.github.connaudit.kit;

/**
 * A deliberate change to the source's configuration, each breaking one contract; the kit's own
 * tests run them to show that the audit catches each.
 */
public enum Mutation {
    /** Retry 500 as well as 503: breaks A5 (500 must reach the caller after one request). */
    RETRY_500,
    /**
     * Leave Reactor Netty's own retry on ({@code disableRetry(false)}, its default): a reset
     * connection is replayed behind the retry layer's back. WebClient only.
     */
    KEEP_HIDDEN_RETRY,
    /**
     * Put the total timeout before {@code retryWhen}, where it is resubscribed with every attempt
     * and no longer bounds the delays: breaks A8. WebClient only.
     */
    TOTAL_BEFORE_RETRY
}
