package io.redissonsync.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;
import org.redisson.client.RedisTimeoutException;
import org.redisson.client.codec.StringCodec;

/**
 * Java (Redisson) conformance agent: JSON lines on stdin, one response per request on stdout.
 * The contract is CONFORMANCE_PROTOCOL.md. Each protocol owner N runs on its own dedicated
 * thread, so Redisson's thread id (the part after the client id in the lock hash field)
 * identifies the owner; requests without an owner run on a cached pool. Kinds: lock (RLock),
 * fair (RFairLock), read and write (the halves of RReadWriteLock); the others are unsupported.
 */
public final class Agent {
    /** Ops that get start_ns/end_ns on every response. */
    private static final Set<String> TIMED_OPS = Set.of("lock", "try_lock", "unlock", "force_unlock",
            "is_locked", "is_held", "hold_count", "remaining_ttl", "stress");
    /** Ops that run on the queue of their owner. */
    private static final Set<String> OWNER_OPS = Set.of("lock", "try_lock", "unlock", "is_held",
            "hold_count", "stress");
    private static final Set<String> OWNERLESS_OPS = Set.of("force_unlock", "is_locked", "remaining_ttl",
            "bench");
    /** Lock kinds this agent has: RLock, RFairLock and the two halves of RReadWriteLock. */
    private static final Set<String> KINDS = Set.of("lock", "fair", "read", "write");
    private static final Pattern ID_IN_GARBAGE = Pattern.compile("\"id\"\\s*:\\s*(-?\\d{1,18})(?![\\d.eE])");

    /** How long, after end of input, requests still running may take before the client is shut. */
    private static final long EOF_GRACE_MS = 1000;
    /** Hard stop after end of input, whatever is still running. */
    private static final long EOF_HALT_MS = 1800;

    private static final ObjectMapper JSON = new ObjectMapper()
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(DeserializationFeature.USE_LONG_FOR_INTS);

    private final RedissonClient redisson;
    private final PrintStream out;
    private final ConcurrentHashMap<Long, ExecutorService> owners = new ConcurrentHashMap<>();
    /**
     * One lock object per (kind, name), shared by every owner, as a service keeps one per
     * resource. It matters: a partial unlock re-applies the object's internalLockLeaseTime, which
     * is the last explicit lease this object acquired with (the watchdog timeout on a fresh
     * object).
     */
    private final ConcurrentHashMap<LockKey, RLock> locks = new ConcurrentHashMap<>();
    /** The RReadWriteLock per name whose halves are the cached `read` and `write` locks. */
    private final ConcurrentHashMap<String, RReadWriteLock> readWriteLocks = new ConcurrentHashMap<>();
    private final ExecutorService ownerless = Executors.newCachedThreadPool(daemonThreads("agent-worker"));
    private final AtomicInteger inflight = new AtomicInteger();

    private Agent(RedissonClient redisson, PrintStream out) {
        this.redisson = redisson;
        this.out = out;
    }

    public static void main(String[] args) {
        // Our responses are the only thing allowed on stdout: keep the real stdout to ourselves
        // and send anything else that prints to System.out to stderr.
        PrintStream stdout = new PrintStream(new FileOutputStream(FileDescriptor.out), false,
                StandardCharsets.UTF_8);
        System.setOut(System.err);

        Options options;
        try {
            options = Options.parse(args);
        } catch (Options.UsageException e) {
            System.err.println("java agent: " + e.getMessage());
            System.err.println(Options.USAGE);
            System.exit(2);
            return;
        }

        RedissonClient redisson;
        String clientId;
        try {
            redisson = Redisson.create(RedissonSetup.config(options));
            clientId = RedissonSetup.clientId(redisson);
        } catch (RuntimeException e) {
            System.err.println("java agent: cannot connect to " + options.redis + " (" + options.mode + "): " + e);
            System.exit(1);
            return;
        }

        Agent agent = new Agent(redisson, stdout);
        ObjectNode ready = JSON.createObjectNode();
        ready.put("event", "ready");
        ready.put("impl", "java");
        ready.put("version", RedissonSetup.loadedVersion(options));
        ready.put("client_id", clientId);
        agent.emit(ready);

        try {
            agent.readLoop();
        } catch (IOException e) {
            System.err.println("java agent: reading stdin failed: " + e);
        }
        agent.shutdownAndExit();
    }

    // ---------------------------------------------------------------- input

    private void readLoop() throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            try {
                dispatch(line);
            } catch (RuntimeException e) {
                // Never let one request take the agent down.
                emit(error(null, "bad_request", "internal error handling request: " + e));
            }
        }
    }

    private void dispatch(String line) {
        JsonNode req;
        try {
            req = JSON.readTree(line);
        } catch (IOException e) {
            Matcher m = ID_IN_GARBAGE.matcher(line);
            Long id = m.find() ? Long.valueOf(m.group(1)) : null;
            emit(error(id, "bad_request", "not a JSON object: " + firstLine(e.getMessage())));
            return;
        }
        if (req == null || !req.isObject()) {
            emit(error(null, "bad_request", "request must be a JSON object"));
            return;
        }
        JsonNode idNode = req.get("id");
        if (idNode == null || !idNode.isIntegralNumber() || !idNode.canConvertToLong()) {
            emit(error(null, "bad_request", "request needs an integer \"id\""));
            return;
        }
        long id = idNode.asLong();
        JsonNode opNode = req.get("op");
        if (opNode == null || !opNode.isTextual()) {
            emit(error(id, "bad_request", "request needs a string \"op\""));
            return;
        }
        String op = opNode.asText();

        if (op.equals("ping")) {
            emit(ok(id));
            return;
        }
        if (!TIMED_OPS.contains(op) && !op.equals("bench")) {
            String what = op.startsWith("sem_") || op.startsWith("latch_")
                    ? "op " + op + " is not supported by the java agent yet"
                    : "unknown op " + op;
            emit(error(id, "unsupported", what));
            return;
        }

        Request r;
        long validatedAt = System.nanoTime();
        try {
            r = Request.parse(id, op, req);
        } catch (OpError e) {
            ObjectNode resp = error(id, e.code, e.getMessage());
            if (TIMED_OPS.contains(op)) {
                resp.put("start_ns", validatedAt);
                resp.put("end_ns", System.nanoTime());
            }
            emit(resp);
            return;
        }

        if (OWNER_OPS.contains(op)) {
            submit(owners.computeIfAbsent(r.owner,
                    o -> Executors.newSingleThreadExecutor(daemonThreads("owner-" + o))), r);
        } else if (OWNERLESS_OPS.contains(op)) {
            submit(ownerless, r);
        } else {
            throw new IllegalStateException("no route for op " + op);
        }
    }

    private void submit(ExecutorService executor, Request r) {
        inflight.incrementAndGet();
        try {
            executor.execute(() -> {
                try {
                    emit(execute(r));
                } catch (Throwable t) {
                    emit(error(r.id, "redis", "internal error: " + t));
                } finally {
                    inflight.decrementAndGet();
                }
            });
        } catch (RuntimeException e) {
            inflight.decrementAndGet();
            emit(error(r.id, "redis", "cannot schedule request: " + e));
        }
    }

    // ---------------------------------------------------------------- operations

    /** Runs one validated request on the calling (owner or pool) thread. */
    private ObjectNode execute(Request r) {
        if (r.op.equals("bench")) {
            return bench(r);
        }
        RLock lock = locks.computeIfAbsent(new LockKey(r.kind, r.name), this::cachedLock);
        ObjectNode resp = ok(r.id);
        long start = System.nanoTime();
        try {
            switch (r.op) {
                case "lock":
                    if (r.leaseMs > 0) {
                        lock.lock(r.leaseMs, TimeUnit.MILLISECONDS);
                    } else {
                        lock.lock();
                    }
                    break;
                case "try_lock":
                    // No wait and no lease: the single-attempt tryLock(). For RFairLock it is the
                    // only form that never joins the queue; tryLock(0, ...) enqueues, then leaves
                    // the queue again (acquireFailed).
                    if (r.waitMs == 0 && r.leaseMs <= 0) {
                        resp.put("acquired", lock.tryLock());
                    } else {
                        resp.put("acquired", lock.tryLock(r.waitMs, r.leaseMs > 0 ? r.leaseMs : -1,
                                TimeUnit.MILLISECONDS));
                    }
                    break;
                case "unlock":
                    lock.unlock();
                    break;
                case "force_unlock":
                    resp.put("released", lock.forceUnlock());
                    break;
                case "is_locked":
                    resp.put("locked", lock.isLocked());
                    break;
                case "is_held":
                    resp.put("held", lock.isHeldByCurrentThread());
                    break;
                case "hold_count":
                    resp.put("count", lock.getHoldCount());
                    break;
                case "remaining_ttl":
                    resp.put("ttl_ms", lock.remainTimeToLive());
                    break;
                case "stress":
                    stress(r, lock, resp);
                    break;
                default:
                    throw new OpError("unsupported", "unknown op " + r.op);
            }
        } catch (Throwable t) {
            long end = System.nanoTime();
            ObjectNode err = classify(r, t);
            err.put("start_ns", start);
            err.put("end_ns", end);
            return err;
        }
        long end = System.nanoTime();
        resp.put("start_ns", start);
        resp.put("end_ns", end);
        return resp;
    }

    /** The lock object of (kind, name) the agent keeps; read and write share one RReadWriteLock. */
    private RLock cachedLock(LockKey key) {
        switch (key.kind) {
            case "read":
                return readWriteLocks.computeIfAbsent(key.name, redisson::getReadWriteLock).readLock();
            case "write":
                return readWriteLocks.computeIfAbsent(key.name, redisson::getReadWriteLock).writeLock();
            default:
                return newLock(key.kind, key.name);
        }
    }

    /** A new lock object of the given kind (one of KINDS) on name. */
    private RLock newLock(String kind, String name) {
        switch (kind) {
            case "lock":
                return redisson.getLock(name);
            case "fair":
                return redisson.getFairLock(name);
            case "read":
                return redisson.getReadWriteLock(name).readLock();
            case "write":
                return redisson.getReadWriteLock(name).writeLock();
            default:
                throw new IllegalArgumentException("kind " + kind);
        }
    }

    /** Key of the lock cache. */
    private record LockKey(String kind, String name) {
    }

    private void stress(Request r, RLock lock, ObjectNode resp) throws OpError {
        RBucket<String> counter = redisson.getBucket(r.counter, StringCodec.INSTANCE);
        // Readers only look at the counter: several may hold the lock at once.
        boolean writes = !r.kind.equals("read");
        ArrayNode intervals = r.record ? resp.arrayNode() : null;
        long done = 0;
        for (long i = 0; i < r.iterations; i++) {
            lock.lock();
            long acquired = System.nanoTime();
            long releasing;
            try {
                String raw = counter.get();
                long value;
                try {
                    value = raw == null ? 0 : Long.parseLong(raw.trim());
                } catch (NumberFormatException e) {
                    throw new OpError("bad_request", "counter " + r.counter + " holds a non-decimal value: " + raw);
                }
                if (r.holdUs > 0) {
                    sleepMicros(r.holdUs);
                }
                if (writes) {
                    counter.set(Long.toString(value + 1));
                }
                releasing = System.nanoTime();
            } catch (RuntimeException | OpError e) {
                try {
                    lock.unlock();
                } catch (RuntimeException suppressed) {
                    e.addSuppressed(suppressed);
                }
                throw e;
            }
            lock.unlock();
            done++;
            if (intervals != null) {
                intervals.addArray().add(acquired).add(releasing);
            }
        }
        resp.put("done", done);
        if (intervals != null) {
            resp.set("intervals", intervals);
        }
    }

    private ObjectNode bench(Request r) {
        int tasks = (int) r.tasks;
        int iterations = (int) r.iterations;
        long[][] latencies = new long[tasks][iterations];
        int[] completed = new int[tasks];
        CountDownLatch ready = new CountDownLatch(tasks);
        CountDownLatch go = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread[] threads = new Thread[tasks];
        for (int t = 0; t < tasks; t++) {
            final int task = t;
            RLock lock = newLock(r.kind, r.sameKey ? r.name : r.name + ":" + t);
            // A fresh platform thread per task: each task is its own lock owner.
            threads[t] = new Thread(() -> {
                ready.countDown();
                try {
                    go.await();
                    for (int i = 0; i < iterations && failure.get() == null; i++) {
                        long s = System.nanoTime();
                        lock.lock();
                        lock.unlock();
                        latencies[task][i] = System.nanoTime() - s;
                        completed[task] = i + 1;
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "bench-" + r.id + "-" + t);
            threads[t].setDaemon(true);
        }
        long elapsed;
        try {
            for (Thread th : threads) {
                th.start();
            }
            ready.await();
            long t0 = System.nanoTime();
            go.countDown();
            for (Thread th : threads) {
                th.join();
            }
            elapsed = System.nanoTime() - t0;
        } catch (InterruptedException e) {
            failure.compareAndSet(null, e);
            elapsed = 0;
        }
        if (failure.get() != null) {
            return classify(r, failure.get());
        }
        int ops = 0;
        for (int c : completed) {
            ops += c;
        }
        long[] all = new long[ops];
        int k = 0;
        for (int t = 0; t < tasks; t++) {
            System.arraycopy(latencies[t], 0, all, k, completed[t]);
            k += completed[t];
        }
        Arrays.sort(all);
        ObjectNode resp = ok(r.id);
        resp.put("ops", ops);
        resp.put("elapsed_ns", elapsed);
        resp.put("p50_us", percentileUs(all, 0.50));
        resp.put("p99_us", percentileUs(all, 0.99));
        resp.put("max_us", all.length == 0 ? 0.0 : all[all.length - 1] / 1000.0);
        return resp;
    }

    /** Nearest-rank percentile of sorted nanosecond samples, in microseconds. */
    private static double percentileUs(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0.0;
        }
        int rank = (int) Math.ceil(q * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length, rank) - 1)] / 1000.0;
    }

    private static void sleepMicros(long micros) {
        long deadline = System.nanoTime() + micros * 1000;
        long left;
        while ((left = deadline - System.nanoTime()) > 0) {
            LockSupport.parkNanos(left);
        }
    }

    // ---------------------------------------------------------------- errors

    /** Error codes of the protocol; thrown for invalid requests and agent-side failures. */
    static final class OpError extends Exception {
        final String code;

        OpError(String code, String message) {
            super(message, null, false, false);
            this.code = code;
        }
    }

    /** Maps a failure to the protocol's error codes by walking the cause chain. */
    private ObjectNode classify(Request r, Throwable t) {
        Set<Throwable> chain = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Throwable c = t; c != null && chain.add(c); c = c.getCause()) {
            if (c instanceof OpError) {
                return error(r.id, ((OpError) c).code, c.getMessage());
            }
            if (c instanceof IllegalMonitorStateException) {
                String who = r.owner > 0 ? "owner " + r.owner : "this agent";
                return error(r.id, "not_held", r.name + " is not held by " + who + ": " + c.getMessage());
            }
        }
        for (Throwable c : chain) {
            if (c instanceof RedisTimeoutException) {
                return error(r.id, "timeout", describe(c));
            }
        }
        for (Throwable c : chain) {
            if (c instanceof RedisException) {
                return error(r.id, "redis", describe(c));
            }
        }
        return error(r.id, "redis", describe(t));
    }

    private static String describe(Throwable t) {
        String m = t.getMessage();
        return t.getClass().getSimpleName() + (m == null ? "" : ": " + firstLine(m));
    }

    private static String firstLine(String s) {
        if (s == null) {
            return "";
        }
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }

    // ---------------------------------------------------------------- output

    private static ObjectNode ok(Long id) {
        ObjectNode n = JSON.createObjectNode();
        if (id == null) {
            n.putNull("id");
        } else {
            n.put("id", id);
        }
        n.put("ok", true);
        return n;
    }

    private static ObjectNode error(Long id, String code, String message) {
        ObjectNode n = ok(id);
        n.put("ok", false);
        n.put("error", code);
        n.put("message", message);
        return n;
    }

    /** Writes one line and flushes; lines of different threads never interleave. */
    private void emit(ObjectNode n) {
        String line;
        try {
            line = JSON.writeValueAsString(n);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        synchronized (out) {
            out.print(line);
            out.print('\n');
            out.flush();
        }
    }

    // ---------------------------------------------------------------- shutdown

    /**
     * End of input: give running requests a short grace, shut the client down (locks still held
     * stay in Redis until their lease ends, as with any Redisson shutdown) and exit 0, within
     * about two seconds even when an owner is blocked in lock().
     */
    private void shutdownAndExit() {
        long eof = System.nanoTime();
        Thread halt = new Thread(() -> {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(EOF_HALT_MS));
            synchronized (out) {
                out.flush();
            }
            Runtime.getRuntime().halt(0);
        }, "agent-halt");
        halt.setDaemon(true);
        halt.start();

        long graceEnd = eof + TimeUnit.MILLISECONDS.toNanos(EOF_GRACE_MS);
        while (inflight.get() > 0 && System.nanoTime() - graceEnd < 0) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(2));
        }
        try {
            redisson.shutdown(0, 500, TimeUnit.MILLISECONDS);
        } catch (RuntimeException e) {
            System.err.println("java agent: shutdown: " + e);
        }
        synchronized (out) {
            out.flush();
        }
        System.exit(0);
    }

    private static ThreadFactory daemonThreads(String prefix) {
        AtomicInteger n = new AtomicInteger();
        return runnable -> {
            Thread t = new Thread(runnable, prefix.startsWith("owner-") ? prefix : prefix + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    // ---------------------------------------------------------------- requests

    /** A validated request. */
    static final class Request {
        final long id;
        final String op;
        String kind;
        String name;
        long owner;
        long leaseMs;
        long waitMs;
        long iterations;
        long tasks;
        String counter;
        long holdUs;
        boolean record;
        boolean sameKey;

        private Request(long id, String op) {
            this.id = id;
            this.op = op;
        }

        static Request parse(long id, String op, JsonNode req) throws OpError {
            Request r = new Request(id, op);
            JsonNode kind = req.get("kind");
            if (kind == null || !kind.isTextual()) {
                throw new OpError("bad_request", op + " needs a string \"kind\"");
            }
            if (!KINDS.contains(kind.asText())) {
                throw new OpError("unsupported", "kind " + kind.asText() + " is not supported by the java agent");
            }
            r.kind = kind.asText();
            r.name = string(req, "name");
            if (OWNER_OPS.contains(op)) {
                r.owner = integer(req, "owner", null);
                if (r.owner < 1) {
                    throw new OpError("bad_request", "\"owner\" must be >= 1, got " + r.owner);
                }
            }
            switch (op) {
                case "lock":
                    r.leaseMs = integer(req, "lease_ms", 0L);
                    break;
                case "try_lock":
                    r.leaseMs = integer(req, "lease_ms", 0L);
                    r.waitMs = Math.max(0, integer(req, "wait_ms", 0L));
                    break;
                case "stress":
                    r.iterations = integer(req, "iterations", null);
                    if (r.iterations < 0) {
                        throw new OpError("bad_request", "\"iterations\" must be >= 0, got " + r.iterations);
                    }
                    r.counter = string(req, "counter");
                    r.holdUs = Math.max(0, integer(req, "hold_us", 0L));
                    r.record = bool(req, "record", false);
                    break;
                case "bench":
                    r.tasks = integer(req, "tasks", null);
                    if (r.tasks < 1) {
                        throw new OpError("bad_request", "\"tasks\" must be >= 1, got " + r.tasks);
                    }
                    r.iterations = integer(req, "iterations", null);
                    if (r.iterations < 0) {
                        throw new OpError("bad_request", "\"iterations\" must be >= 0, got " + r.iterations);
                    }
                    if (r.tasks > 100_000 || r.iterations > Integer.MAX_VALUE
                            || r.tasks * r.iterations > 10_000_000L) {
                        throw new OpError("bad_request", "bench too large: tasks " + r.tasks
                                + " x iterations " + r.iterations);
                    }
                    r.sameKey = bool(req, "same_key", false);
                    break;
                default:
                    break;
            }
            return r;
        }

        private static String string(JsonNode req, String field) throws OpError {
            JsonNode n = req.get(field);
            if (n == null || !n.isTextual() || n.asText().isEmpty()) {
                throw new OpError("bad_request", "\"" + field + "\" must be a non-empty string");
            }
            return n.asText();
        }

        /** An integer field; absent or null gives dflt, or a bad_request when dflt is null. */
        private static long integer(JsonNode req, String field, Long dflt) throws OpError {
            JsonNode n = req.get(field);
            if (n == null || n.isNull()) {
                if (dflt == null) {
                    throw new OpError("bad_request", "missing integer \"" + field + "\"");
                }
                return dflt;
            }
            if (!n.isIntegralNumber() || !n.canConvertToLong()) {
                throw new OpError("bad_request", "\"" + field + "\" must be an integer");
            }
            return n.asLong();
        }

        private static boolean bool(JsonNode req, String field, boolean dflt) throws OpError {
            JsonNode n = req.get(field);
            if (n == null || n.isNull()) {
                return dflt;
            }
            if (!n.isBoolean()) {
                throw new OpError("bad_request", "\"" + field + "\" must be a boolean");
            }
            return n.asBoolean();
        }
    }
}
