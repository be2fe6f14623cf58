package com.github.connaudit.kit;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.IntSupplier;

/** A call whose outcome completes a future; cancelling runs the client's own way of cancelling. */
final class FutureCall implements AuditedClient.Call {

    private final CompletableFuture<Outcome> outcome;
    private final Runnable canceller;
    private final long started;
    private final IntSupplier attempts;

    FutureCall(CompletableFuture<Outcome> outcome, Runnable canceller, long started) {
        this(outcome, canceller, started, () -> 0);
    }

    /**
     * A call whose client counts its attempts: a call cut at the guard reports the attempts
     * made by then, whether or not the client's own outcome would come first once cancelled.
     */
    FutureCall(CompletableFuture<Outcome> outcome, Runnable canceller, long started, IntSupplier attempts) {
        this.outcome = outcome;
        this.canceller = canceller;
        this.started = started;
        this.attempts = attempts;
    }

    @Override
    public Outcome await(Duration guard) {
        try {
            return outcome.get(guard.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            // The guard's outcome first, then the cancel: the outcome the cancel makes the
            // client give must not race it.
            outcome.complete(Outcome.error(Outcome.Kind.OTHER,
                    "unbounded: the call had not ended within the guard of " + guard.toMillis() + " ms")
                    .timed(millisSince(started), attempts.getAsInt()));
            canceller.run();
            return outcome.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            canceller.run();
            return Outcome.error(Outcome.Kind.OTHER, "interrupted while waiting for the call");
        } catch (ExecutionException e) {
            return Outcome.error(Outcome.Kind.OTHER, e.getCause());
        }
    }

    @Override
    public void cancel() {
        canceller.run();
    }

    static double millisSince(long nanos) {
        return (System.nanoTime() - nanos) / 1e6;
    }
}
