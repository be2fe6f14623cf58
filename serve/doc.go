// Package serve runs connaudit's fault catalogue as a standalone server for
// clients of any language, speaking the versioned protocol
// connaudit.serve/v1 (JSON over HTTP, docs/serve.md): a kit opens a
// session, fetches the scenarios with each one's policy in plain numbers,
// runs each through the client under test, reports what the caller got,
// sends /ok through the same client, and says when it is done.
//
// The server keeps a session per client, so one server audits several
// clients at once, each with its own accounting, and the evidence of each
// scenario as the server saw it: requests, handler entries and
// cancellations, writes and idempotency keys, the connections the
// requests came on (reused, closed by which side, FIN or RST, and how long
// after the last request), the time between attempts, which connection
// served /ok, and the connections the client still holds open when its
// kit says it is done. Its verdicts ([Result], [SessionReport]) combine the
// kit's report with that evidence in the audit's vocabulary (outcome
// classes, stages, close reasons, contract ids), with a fix in the
// client's own terms for the clients it knows (curl, requests, httpx,
// fetch, axios, webclient, restclient).
//
// Every listener is on loopback; bad input from a kit gets a clear error
// (package doc of docs/serve.md, "Limits": memory per session is bounded).
// Nothing here prints or exits: cmd/connaudit's serve command does.
package serve
