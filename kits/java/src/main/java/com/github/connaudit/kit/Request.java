package com.github.connaudit.kit;

import java.net.URI;
import java.util.Map;

/**
 * The request a scenario sends through the client under audit.
 *
 * @param method the HTTP method
 * @param url the absolute URL, used as given
 * @param headers headers to set, such as Idempotency-Key
 * @param body the body, sent as application/json when not empty
 * @param keyPerAttempt when not null, every attempt carries a new Idempotency-Key:
 *     {@code keyPerAttempt + "-attempt-" + n}
 * @param readBytes how many bytes of the body to read before closing the response; negative
 *     reads it all
 */
public record Request(String method, URI url, Map<String, String> headers, String body, String keyPerAttempt,
        int readBytes) {

    /** Copies the headers and checks the method. */
    public Request {
        headers = Map.copyOf(headers);
        body = body == null ? "" : body;
        if (method == null || method.isEmpty() || url == null) {
            throw new IllegalArgumentException("a request needs a method and a URL");
        }
    }

    /**
     * A GET of a URL, its body read to the end.
     *
     * @param url the URL
     * @return the request
     */
    public static Request get(URI url) {
        return new Request("GET", url, Map.of(), "", null, -1);
    }

    /**
     * A POST of a JSON body, its response read to the end.
     *
     * @param url the URL
     * @param headers headers to set
     * @param body the JSON body
     * @return the request
     */
    public static Request post(URI url, Map<String, String> headers, String body) {
        return new Request("POST", url, headers, body, null, -1);
    }

    /**
     * Returns this request with a new Idempotency-Key on every attempt.
     *
     * @param key the key's prefix
     * @return the new request
     */
    public Request withKeyPerAttempt(String key) {
        return new Request(method, url, headers, body, key, readBytes);
    }

    /**
     * Returns this request, its response closed after reading so many bytes of the body.
     *
     * @param n the bytes to read
     * @return the new request
     */
    public Request readingOnly(int n) {
        return new Request(method, url, headers, body, keyPerAttempt, n);
    }

    /** The Idempotency-Key header's value, or null, whatever the letter case of its name. */
    String idempotencyKey() {
        for (Map.Entry<String, String> e : headers.entrySet()) {
            if (e.getKey().equalsIgnoreCase("Idempotency-Key")) {
                return e.getValue();
            }
        }
        return null;
    }

    /** Whether the request carries an Idempotency-Key, fixed or made per attempt. */
    boolean hasKey() {
        return keyPerAttempt != null || idempotencyKey() != null;
    }
}
