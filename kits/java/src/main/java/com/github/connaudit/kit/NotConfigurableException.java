package com.github.connaudit.kit;

/** A policy asks for a setting the client has no equivalent of; the scenario gets no verdict. */
public final class NotConfigurableException extends Exception {

    private static final long serialVersionUID = 1L;

    /**
     * Makes the exception.
     *
     * @param why which setting, and what the client has instead
     */
    public NotConfigurableException(String why) {
        super(why);
    }
}
