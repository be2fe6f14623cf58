package com.github.connaudit.kit;

import java.net.URI;
import java.time.Duration;

/**
 * A client under audit, configured from one {@link Policy}, with its own connection pool. Every
 * call goes through the client's retry layer; {@link #attempts()} counts the attempts that layer
 * made, so that a server that saw more requests can tell a hidden replay.
 */
public interface AuditedClient extends AutoCloseable {

    /**
     * The client's name in the serve protocol ({@code webclient}, {@code restclient}).
     *
     * @return the name
     */
    String name();

    /**
     * The versions of the libraries the client is made of.
     *
     * @return the versions, as one short line
     */
    String version();

    /**
     * How the client is configured, in its own terms.
     *
     * @return the configuration, as one line
     */
    String config();

    /**
     * Starts a call.
     *
     * @param request what to send
     * @return the call in flight
     */
    Call start(Request request);

    /**
     * Starts a call whose body the client gets only when it asks for it, once it holds a
     * connection: the first asking runs {@code onFirstAsk} (off the client's own threads) and is
     * never answered; a later asking (the client sending the request again) gets the body at once.
     *
     * @param request what to send, a request with a body
     * @param onFirstAsk what to do when the client first asks for the body
     * @return the call in flight
     * @throws NotConfigurableException when the client cannot take such a body
     */
    default Call startHeld(Request request, Runnable onFirstAsk) throws NotConfigurableException {
        throw new NotConfigurableException(name() + " takes no body it asks for once it holds a connection");
    }

    /**
     * Sends a request and waits for what the caller gets, at most {@code guard}.
     *
     * @param request what to send
     * @param guard how long to wait before the call is cancelled as unbounded
     * @return what the caller got
     */
    default Outcome send(Request request, Duration guard) {
        return start(request).await(guard);
    }

    /**
     * GETs a recovery URL through the same pool, outside the retry layer and its bounds (the
     * pool's own proof of health after a fault), and reads its body.
     *
     * @param ok the recovery URL
     * @param guard how long to wait before the call is cancelled as unbounded
     * @return what the caller got
     */
    Outcome recover(URI ok, Duration guard);

    /**
     * The attempts the retry layer has started over the client's life.
     *
     * @return the count
     */
    int attempts();

    /** Closes the client's pool and its connections. */
    @Override
    void close();

    /** A call in flight. */
    interface Call {

        /**
         * Waits for the call's outcome. A call still running after {@code guard} is cancelled and
         * reported as an error of kind {@link Outcome.Kind#OTHER} that says it was unbounded.
         *
         * @param guard the longest wait
         * @return what the caller got
         */
        Outcome await(Duration guard);

        /** Cancels the call as the client cancels (a subscription disposed, a thread interrupted). */
        void cancel();
    }
}
