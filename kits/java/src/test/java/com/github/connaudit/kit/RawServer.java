package com.github.connaudit.kit;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A raw-socket HTTP/1.1 server on 127.0.0.1 that counts what a client really does: connections
 * accepted, requests read (which connection, the how-many-th on it), fault handlers entered, the
 * client going away while a handler waited, writes committed and idempotency keys. Each request
 * but {@code /ok} (always 200 "ok") is answered by the {@link Script}.
 *
 * <p>Nothing here waits on time to synchronise: the tests wait on its semaphores (a handler
 * entered, a cancel seen, a connection closed by the client), each with a bound.
 */
final class RawServer implements AutoCloseable {

    /** What the server does with one request. */
    sealed interface Action {}

    /**
     * Answers a status with a body, after a pause (the fault's own timing).
     *
     * @param status the status
     * @param body the body
     * @param afterMillis how long to wait before answering
     */
    record Respond(int status, String body, long afterMillis) implements Action {}

    /** The handler is entered and never writes; it waits until the client goes away. */
    record Hang() implements Action {}

    /** Reads the request and closes the connection (FIN) before any response byte. */
    record CloseBeforeResponse() implements Action {}

    /** Reads the request and resets the connection (RST: SO_LINGER 0) before any response byte. */
    record ResetBeforeResponse() implements Action {}

    /**
     * Sends the headers with {@code Content-Length: length} and {@code sent} bytes of the body;
     * then closes the connection, or stalls until the client goes away.
     *
     * @param length the Content-Length announced
     * @param sent the bytes sent
     * @param thenClose close (FIN) rather than stall
     */
    record PartialBody(int length, int sent, boolean thenClose) implements Action {}

    /**
     * Sends a body of {@code bytes} bytes one byte at a time, {@code everyMillis} apart.
     *
     * @param bytes the body's length
     * @param everyMillis the gap between two bytes
     */
    record Trickle(int bytes, long everyMillis) implements Action {}

    /**
     * An endpoint with a side effect: commits a write unless the request's Idempotency-Key was
     * seen before, then answers the status with an empty body.
     *
     * @param status the status
     */
    record Write(int status) implements Action {}

    /**
     * Commits a write as {@link Write} does (once per Idempotency-Key), then closes the connection
     * before any response byte: a POST the server read and committed, whose answer is lost.
     *
     * @param reset RST (SO_LINGER 0) rather than FIN
     */
    record WriteThenCut(boolean reset) implements Action {}

    /**
     * Answers 200 "ok", then closes the connection as a keep-alive request limit does: the
     * response says {@code Connection: close} when {@code announce}, and says nothing otherwise;
     * either way the server then half-closes (FIN) and reads what the client still sends, unread,
     * until the client closes or 2 s pass.
     *
     * @param announce whether the response carries Connection: close
     */
    record RespondThenClose(boolean announce) implements Action {}

    /** What the server does on a kept-alive connection before it reads the next request on it. */
    sealed interface Before {}

    /**
     * Waits for the first byte of the next request, then closes the connection without reading
     * it: a server closing an idle kept-alive connection just as the client sends on it. A FIN is
     * a half-close, after which the server reads and discards what the client still sends until
     * the client closes or 2 s pass (so the client reads a clean EOF, not an RST for unread data);
     * an RST is a close with SO_LINGER 0. The request is counted in {@link #unread()}.
     *
     * @param reset RST rather than FIN
     */
    record CloseOnArrival(boolean reset) implements Before {}

    /**
     * The connection goes dark: the server reads and discards whatever the client sends (counted
     * in {@link #darkBytes(int)}), never answers and never closes it, until the client does.
     */
    record GoDark() implements Before {}

    /**
     * The server closes (FIN) the connection once it has been idle that long, as a server's
     * keep-alive timeout does, then reads what the client still sends, unread, until the client
     * closes or 2 s pass; a byte that comes first is activity, and the request is read as usual.
     *
     * @param idleMillis the server's idle timeout
     */
    record IdleClose(long idleMillis) implements Before {}

    /** Chooses what the server does on a connection before it reads its next request. */
    @FunctionalInterface
    interface Arm {
        /**
         * What to do before reading the next request.
         *
         * @param conn the connection, from 1
         * @param answered the requests it has read so far, /ok included
         * @return what to do, or null to read the request as usual
         */
        Before before(int conn, int answered);
    }

    /** Chooses the action for each request the server reads. */
    @FunctionalInterface
    interface Script {
        /**
         * The action for a request.
         *
         * @param request the request read
         * @return what to do
         */
        Action on(Seen request);
    }

    /**
     * A request the server read.
     *
     * @param index its number among all requests but /ok, from 1
     * @param conn the connection it came on, from 1
     * @param onConn the how-many-th request on that connection, from 1
     * @param method the method
     * @param path the path
     * @param headers the headers, names in lower case
     * @param body the body
     */
    record Seen(int index, int conn, int onConn, String method, String path, Map<String, String> headers,
            String body) {}

    private final ServerSocket listener;
    private final Script script;
    private final Arm arm;
    private final Thread acceptor;
    private final Set<Socket> sockets = ConcurrentHashMap.newKeySet();
    private final Map<Integer, Socket> byId = new ConcurrentHashMap<>();
    private final Set<Integer> closedByServer = ConcurrentHashMap.newKeySet();
    private final List<Thread> handlers = new CopyOnWriteArrayList<>();
    private final List<Seen> seen = new CopyOnWriteArrayList<>();
    private final List<Integer> okConns = new CopyOnWriteArrayList<>();
    private final List<String> keys = new CopyOnWriteArrayList<>();
    private final Set<String> committedKeys = Collections.synchronizedSet(new HashSet<>());
    private final Map<Integer, String> closedBy = new ConcurrentHashMap<>();
    private final AtomicInteger accepted = new AtomicInteger();
    private final AtomicInteger entered = new AtomicInteger();
    private final AtomicInteger cancels = new AtomicInteger();
    private final AtomicInteger writes = new AtomicInteger();
    private final AtomicInteger maxOpen = new AtomicInteger();
    private final AtomicInteger open = new AtomicInteger();
    private final Semaphore enteredSignal = new Semaphore(0);
    private final Semaphore cancelSignal = new Semaphore(0);
    private final Semaphore clientCloseSignal = new Semaphore(0);
    private final Map<Integer, Integer> unread = new ConcurrentHashMap<>();
    private final Map<Integer, Long> darkBytes = new ConcurrentHashMap<>();
    private final Set<Integer> clientClosedAfterServer = ConcurrentHashMap.newKeySet();
    private final Set<Integer> idleClosed = ConcurrentHashMap.newKeySet();
    private final Semaphore events = new Semaphore(0);
    private volatile boolean closing;

    RawServer(Script script) throws IOException {
        this(script, (conn, answered) -> null);
    }

    /**
     * A server whose connections {@code arm} may close, darken or time out between requests.
     *
     * @param script the action for each request
     * @param arm what to do before reading a connection's next request
     */
    RawServer(Script script, Arm arm) throws IOException {
        this.script = script;
        this.arm = arm;
        this.listener = new ServerSocket();
        listener.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 50);
        this.acceptor = new Thread(this::acceptLoop, "raw-server-accept");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    /** A server answering every request with the same action. */
    static RawServer always(Action action) throws IOException {
        return new RawServer(r -> action);
    }

    /** A server answering the n-th request (from 1) with the n-th action, the last one after that. */
    static RawServer sequence(Action... actions) throws IOException {
        return new RawServer(r -> actions[Math.min(r.index(), actions.length) - 1]);
    }

    URI url(String path) {
        return URI.create("http://127.0.0.1:" + listener.getLocalPort() + path);
    }

    // --- evidence -------------------------------------------------------------------------

    /** Connections accepted. */
    int connections() {
        return accepted.get();
    }

    /** The most connections open at once. */
    int maxOpen() {
        return maxOpen.get();
    }

    /** Requests read, /ok excluded. */
    int requests() {
        return seen.size();
    }

    /** The requests read, /ok excluded, in order. */
    List<Seen> seen() {
        return List.copyOf(seen);
    }

    /** The connections that served /ok, in order. */
    List<Integer> okConnections() {
        return List.copyOf(okConns);
    }

    /** Fault handlers entered (every request but /ok). */
    int handlersEntered() {
        return entered.get();
    }

    /** Handlers that saw the client go away while they waited. */
    int cancelsObserved() {
        return cancels.get();
    }

    /** Writes committed by {@link Write}. */
    int writes() {
        return writes.get();
    }

    /** The Idempotency-Keys received by {@link Write}, in order (empty when absent). */
    List<String> keys() {
        return List.copyOf(keys);
    }

    /** Who closed each connection that is closed: "client" or "server". */
    Map<Integer, String> closedBy() {
        return Map.copyOf(closedBy);
    }

    /** Requests that arrived on connections the server was closing, unread, by connection. */
    Map<Integer, Integer> unread() {
        return Map.copyOf(unread);
    }

    /** The bytes the client sent on connection {@code conn} after it went dark. */
    long darkBytes(int conn) {
        return darkBytes.getOrDefault(conn, 0L);
    }

    /** Whether the client closed its side of connection {@code conn} after the server's FIN. */
    boolean clientClosedAfterServer(int conn) {
        return clientClosedAfterServer.contains(conn);
    }

    /** Whether the server closed connection {@code conn} by its idle timeout. */
    boolean idleClosed(int conn) {
        return idleClosed.contains(conn);
    }

    /** Whether connection {@code conn} has ended, and who closed it then. */
    String closedBy(int conn) {
        return closedBy.get(conn);
    }

    /**
     * Waits until {@code condition} holds, woken by the server's events (a connection ended, an
     * idle close, the client's close after the server's FIN).
     *
     * @return false when the bound ran out first
     */
    boolean await(java.util.function.BooleanSupplier condition, Duration bound) throws InterruptedException {
        long end = System.nanoTime() + bound.toNanos();
        while (!condition.getAsBoolean()) {
            long left = end - System.nanoTime();
            if (left <= 0 || !events.tryAcquire(left, TimeUnit.NANOSECONDS)) {
                return condition.getAsBoolean();
            }
        }
        return true;
    }

    /**
     * Waits until every connection the server closed has ended: what the client still sent on it
     * has been read (and counted in {@link #unread()}) and the client's close seen, or the drain's
     * own 2 s bound passed. A client may get the server's FIN, fail its call and go on before the
     * server's thread has read the request that crossed the FIN: counts read before this may miss
     * it.
     *
     * @return false when the bound ran out first
     */
    boolean awaitServerClosesEnded(Duration bound) throws InterruptedException {
        return await(() -> closedBy.keySet().containsAll(closedByServer), bound);
    }

    /**
     * Waits until {@code n} fault handlers in all have been entered.
     *
     * @return false when the bound ran out first
     */
    boolean awaitEntered(int n, Duration bound) throws InterruptedException {
        return awaitCount(enteredSignal, entered, n, bound);
    }

    /** Waits until {@code n} handlers in all have seen the client go away. */
    boolean awaitCancels(int n, Duration bound) throws InterruptedException {
        return awaitCount(cancelSignal, cancels, n, bound);
    }

    /** Waits until the client has closed {@code n} connections in all. */
    boolean awaitClientCloses(int n, Duration bound) throws InterruptedException {
        long closedByClient;
        long end = System.nanoTime() + bound.toNanos();
        while (true) {
            closedByClient = closedBy.values().stream().filter("client"::equals).count();
            if (closedByClient >= n) {
                return true;
            }
            long left = end - System.nanoTime();
            if (left <= 0 || !clientCloseSignal.tryAcquire(left, TimeUnit.NANOSECONDS)) {
                return closedBy.values().stream().filter("client"::equals).count() >= n;
            }
        }
    }

    private static boolean awaitCount(Semaphore signal, AtomicInteger count, int n, Duration bound)
            throws InterruptedException {
        long end = System.nanoTime() + bound.toNanos();
        while (count.get() < n) {
            long left = end - System.nanoTime();
            if (left <= 0 || !signal.tryAcquire(left, TimeUnit.NANOSECONDS)) {
                return count.get() >= n;
            }
        }
        return true;
    }

    /**
     * Closes connection {@code conn} (from 1) as a server that drops a kept-alive one: with a
     * reset (RST: SO_LINGER 0) or an orderly close (FIN), whatever its handler is doing.
     *
     * @param conn the connection
     * @param reset RST rather than FIN
     * @throws IOException when closing fails
     */
    void closeConnection(int conn, boolean reset) throws IOException {
        Socket s = byId.get(conn);
        if (s == null) {
            throw new IllegalArgumentException("no connection " + conn);
        }
        closedByServer.add(conn);
        if (reset) {
            s.setSoLinger(true, 0);
        }
        s.close();
    }

    /** One line of the evidence, for failure messages. */
    String evidence() {
        return "connections=" + connections() + " requests=" + requests() + " entered=" + handlersEntered()
                + " cancels=" + cancelsObserved() + " writes=" + writes() + " keys=" + keys()
                + " closedBy=" + closedBy() + " unread=" + unread() + " dark=" + darkBytes
                + " clientClosedAfterServer=" + clientClosedAfterServer + " ok=" + okConnections()
                + " seen=" + seen.stream().map(s -> s.method() + " " + s.path() + "@" + s.conn() + "#" + s.onConn()).toList();
    }

    // --- serving ---------------------------------------------------------------------------

    private void acceptLoop() {
        while (!closing) {
            Socket s;
            try {
                s = listener.accept();
            } catch (IOException e) {
                return;
            }
            int id = accepted.incrementAndGet();
            sockets.add(s);
            byId.put(id, s);
            maxOpen.accumulateAndGet(open.incrementAndGet(), Math::max);
            Thread t = new Thread(() -> serve(s, id), "raw-server-conn-" + id);
            t.setDaemon(true);
            handlers.add(t);
            t.start();
        }
    }

    private void serve(Socket s, int conn) {
        String by = "server";
        try (s) {
            InputStream in = new BufferedInputStream(s.getInputStream());
            OutputStream out = s.getOutputStream();
            for (int onConn = 1; ; onConn++) {
                Before before = arm.before(conn, onConn - 1);
                if (before != null) {
                    String after = before(before, s, in, conn);
                    if (after != null) {
                        by = after;
                        return;
                    }
                }
                Parsed p = read(in);
                if (p == null) {
                    by = "client";
                    return;
                }
                if (p.path.equals("/ok")) {
                    okConns.add(conn);
                    respond(out, 200, "ok");
                    continue;
                }
                Seen r;
                synchronized (seen) {
                    r = new Seen(seen.size() + 1, conn, onConn, p.method, p.path, p.headers, p.body);
                    seen.add(r);
                }
                Action a = script.on(r);
                entered.incrementAndGet();
                enteredSignal.release();
                if (a instanceof Respond x) {
                    if (x.afterMillis() > 0) {
                        Thread.sleep(x.afterMillis());
                    }
                    respond(out, x.status(), x.body());
                } else if (a instanceof Write x) {
                    String key = r.headers().get("idempotency-key");
                    keys.add(key == null ? "" : key);
                    if (key == null || committedKeys.add(key)) {
                        writes.incrementAndGet();
                    }
                    respond(out, x.status(), "");
                } else if (a instanceof WriteThenCut x) {
                    String key = r.headers().get("idempotency-key");
                    keys.add(key == null ? "" : key);
                    if (key == null || committedKeys.add(key)) {
                        writes.incrementAndGet();
                    }
                    closedByServer.add(conn);
                    if (x.reset()) {
                        s.setSoLinger(true, 0);
                    }
                    return;
                } else if (a instanceof RespondThenClose x) {
                    respond(out, 200, "ok", x.announce() ? "Connection: close\r\n" : "");
                    closedByServer.add(conn);
                    finThenDrain(s, in, conn);
                    return;
                } else if (a instanceof Hang) {
                    if (waitForClient(in)) {
                        by = "client";
                    }
                    return;
                } else if (a instanceof CloseBeforeResponse) {
                    return;
                } else if (a instanceof ResetBeforeResponse) {
                    s.setSoLinger(true, 0);
                    return;
                } else if (a instanceof PartialBody x) {
                    out.write(("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + x.length()
                            + "\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1));
                    out.write(new byte[x.sent()]);
                    out.flush();
                    if (!x.thenClose() && waitForClient(in)) {
                        by = "client";
                    }
                    return;
                } else if (a instanceof Trickle x) {
                    out.write(("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + x.bytes()
                            + "\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1));
                    out.flush();
                    for (int i = 0; i < x.bytes(); i++) {
                        Thread.sleep(x.everyMillis());
                        out.write('x');
                        out.flush();
                    }
                }
            }
        } catch (IOException e) {
            // a write or read that failed: the client went away, unless the server closed it
            by = closing || closedByServer.contains(conn) ? "server" : "client";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            closedBy.put(conn, by);
            open.decrementAndGet();
            sockets.remove(s);
            if (by.equals("client")) {
                clientCloseSignal.release();
            }
            events.release();
        }
    }

    /**
     * Does what {@code b} says before the next request of connection {@code conn} is read.
     *
     * @return who closed the connection when it ended here, or null to read the request
     */
    private String before(Before b, Socket s, InputStream in, int conn) throws IOException {
        if (b instanceof CloseOnArrival x) {
            in.mark(1);
            if (in.read() < 0) {
                return "client";
            }
            in.reset();
            closedByServer.add(conn);
            if (x.reset()) {
                unread.merge(conn, 1, Integer::sum);
                s.setSoLinger(true, 0);
                s.close();
            } else {
                finThenDrain(s, in, conn);
            }
            return "server";
        }
        if (b instanceof GoDark) {
            byte[] buf = new byte[4096];
            try {
                for (int n; (n = in.read(buf)) >= 0; ) {
                    darkBytes.merge(conn, (long) n, Long::sum);
                }
            } catch (IOException e) {
                // reset by the client, or closed by the server's own close()
            }
            return closing ? "server" : "client";
        }
        IdleClose x = (IdleClose) b;
        s.setSoTimeout((int) x.idleMillis());
        try {
            in.mark(1);
            if (in.read() < 0) {
                return "client";
            }
            in.reset();
            s.setSoTimeout(0);
            return null;
        } catch (java.net.SocketTimeoutException e) {
            closedByServer.add(conn);
            idleClosed.add(conn);
            events.release();
            finThenDrain(s, in, conn);
            return "server";
        }
    }

    /**
     * Half-closes the connection (FIN), then reads and discards what the client still sends until
     * it closes its side or 2 s pass: bytes that come are a request sent on a connection the server
     * was closing, counted once in {@link #unread()}.
     */
    private void finThenDrain(Socket s, InputStream in, int conn) throws IOException {
        s.shutdownOutput();
        s.setSoTimeout(2000);
        byte[] buf = new byte[4096];
        boolean counted = false;
        try {
            for (int n; (n = in.read(buf)) >= 0; ) {
                if (n > 0 && !counted) {
                    counted = true;
                    unread.merge(conn, 1, Integer::sum);
                }
            }
            clientClosedAfterServer.add(conn);
        } catch (IOException e) {
            // 2 s without the client's close, or its reset
        }
        events.release();
    }

    /** Blocks until the client closes or resets the connection; true when it did. */
    private boolean waitForClient(InputStream in) {
        try {
            while (in.read() >= 0) {
                // a client may send more; a waiting handler ignores it
            }
        } catch (IOException e) {
            // reset by the client, or closed by the server's own close()
        }
        if (closing) {
            return false;
        }
        cancels.incrementAndGet();
        cancelSignal.release();
        return true;
    }

    private static void respond(OutputStream out, int status, String body) throws IOException {
        respond(out, status, body, "");
    }

    private static void respond(OutputStream out, int status, String body, String headers) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        out.write(("HTTP/1.1 " + status + " " + reason(status) + "\r\nContent-Type: text/plain\r\nContent-Length: "
                + b.length + "\r\n" + headers + "\r\n").getBytes(StandardCharsets.ISO_8859_1));
        out.write(b);
        out.flush();
    }

    private static String reason(int status) {
        return switch (status) {
            case 200 -> "OK";
            case 404 -> "Not Found";
            case 500 -> "Internal Server Error";
            case 503 -> "Service Unavailable";
            default -> "Status";
        };
    }

    private record Parsed(String method, String path, Map<String, String> headers, String body) {}

    /** Reads one request; null when the client closed the connection before one began. */
    private static Parsed read(InputStream in) throws IOException {
        String line = line(in);
        if (line == null) {
            return null;
        }
        String[] parts = line.split(" ");
        if (parts.length != 3) {
            throw new IOException("bad request line: " + line);
        }
        Map<String, String> headers = new LinkedHashMap<>();
        for (int i = 0; i < 100; i++) {
            String h = line(in);
            if (h == null) {
                throw new IOException("the client closed within the headers");
            }
            if (h.isEmpty()) {
                break;
            }
            int colon = h.indexOf(':');
            if (colon > 0) {
                headers.put(h.substring(0, colon).trim().toLowerCase(Locale.ROOT), h.substring(colon + 1).trim());
            }
        }
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        String length = headers.get("content-length");
        if (length != null) {
            body.write(in.readNBytes(Integer.parseInt(length)));
        } else if ("chunked".equalsIgnoreCase(headers.get("transfer-encoding"))) {
            for (int i = 0; i < 10_000; i++) {
                String size = line(in);
                int n = size == null ? 0 : Integer.parseInt(size.split(";")[0].trim(), 16);
                if (n == 0) {
                    line(in);
                    break;
                }
                body.write(in.readNBytes(n));
                line(in);
            }
        }
        return new Parsed(parts[0], parts[1], headers, body.toString(StandardCharsets.UTF_8));
    }

    /** A line without its CRLF; null at EOF before any byte. */
    private static String line(InputStream in) throws IOException {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < 16 << 10; i++) {
            int c = in.read();
            if (c < 0) {
                if (b.length() == 0) {
                    return null;
                }
                throw new IOException("EOF within a line");
            }
            if (c == '\n') {
                int end = b.length();
                if (end > 0 && b.charAt(end - 1) == '\r') {
                    b.setLength(end - 1);
                }
                return b.toString();
            }
            b.append((char) c);
        }
        throw new IOException("line too long");
    }

    @Override
    public void close() throws IOException {
        closing = true;
        listener.close();
        for (Socket s : new ArrayList<>(sockets)) {
            s.close();
        }
        try {
            acceptor.join(5000);
            for (Thread t : handlers) {
                t.join(5000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
