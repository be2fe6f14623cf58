package com.github.connaudit.kit;

import java.net.URI;
import java.util.Map;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.service.annotation.GetExchange;
import org.springframework.web.service.annotation.PostExchange;

/** An HTTP Interface over RestClient: the audited calls made through a proxy, as the chapter does. */
public interface BlockingTarget {

    /**
     * GETs a URL.
     *
     * @param url the absolute URL
     * @param headers headers to set
     * @return the response; 4xx and 5xx throw a RestClientResponseException
     */
    @GetExchange
    ResponseEntity<String> get(URI url, @RequestHeader Map<String, String> headers);

    /**
     * POSTs a JSON body to a URL.
     *
     * @param url the absolute URL
     * @param headers headers to set
     * @param body the JSON body
     * @return the response; 4xx and 5xx throw a RestClientResponseException
     */
    @PostExchange(contentType = "application/json")
    ResponseEntity<String> post(URI url, @RequestHeader Map<String, String> headers, @RequestBody String body);
}
