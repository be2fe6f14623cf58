package com.github.connaudit.kit;

/**
 * What the caller got from one call: a response (its status and body, read as far as asked), or
 * an error of one kind with the client's own message. Made by the clients, reported as it is:
 * a kit never judges.
 *
 * @param status the response status, or 0 for an error
 * @param body the body read (a response only)
 * @param kind the error's kind, or null for a response
 * @param message the client's own error text, or the exception's class when it has none
 * @param elapsedMillis wall time from before the first attempt until the outcome
 * @param attempts the attempts the retry layer made (0 when unknown)
 */
public record Outcome(int status, String body, Kind kind, String message, double elapsedMillis, int attempts) {

    /** The kinds of error of the serve protocol. */
    public enum Kind {
        /** A bound of the client fired (connect, read, attempt, total). */
        TIMEOUT,
        /** The connection failed: refused, reset, closed before a response, body cut short. */
        CONNECTION,
        /** The caller cancelled the call itself. */
        CANCELED,
        /** The pool refused the call: no connection was free in time. */
        POOL,
        /** Anything else. */
        OTHER;

        /**
         * The kind's name in the protocol.
         *
         * @return the lower-case name
         */
        public String wire() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    /**
     * Whether the caller got a response.
     *
     * @return true for a status
     */
    public boolean isStatus() {
        return kind == null;
    }

    /** Returns this outcome with its timing and attempts. */
    Outcome timed(double millis, int n) {
        return new Outcome(status, body, kind, message, millis, n);
    }

    static Outcome response(int status, String body) {
        return new Outcome(status, body, null, null, 0, 0);
    }

    static Outcome error(Kind kind, Throwable t) {
        return new Outcome(0, null, kind, describe(t), 0, 0);
    }

    static Outcome error(Kind kind, String message) {
        return new Outcome(0, null, kind, message, 0, 0);
    }

    /** The exception's class and message, and those of its causes, cut to 1 KiB. */
    static String describe(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = t; c != null && b.length() < 1024; c = c.getCause() == c ? null : c.getCause()) {
            if (b.length() > 0) {
                b.append(" <- ");
            }
            b.append(c.getClass().getName());
            if (c.getMessage() != null) {
                b.append(": ").append(c.getMessage());
            }
        }
        return b.length() > 1024 ? b.substring(0, 1024) : b.toString();
    }

    @Override
    public String toString() {
        return isStatus() ? "status " + status : kind.wire() + ": " + message;
    }
}
