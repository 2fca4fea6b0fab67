package io.redissonsync.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashSet;
import java.util.List;
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
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RExpirable;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RObject;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;
import org.redisson.client.RedisTimeoutException;
import org.redisson.client.codec.StringCodec;

/**
 * Java (Redisson) conformance agent: JSON lines on stdin, one response per request on stdout.
 * The contract is CONFORMANCE_PROTOCOL.md. Each protocol owner N runs on its own dedicated
 * thread, so Redisson's thread id (the part after the client id in the lock hash field)
 * identifies the owner; requests without an owner run on a cached pool.
 *
 * <p>Supported: every op of the protocol's table. Lock ops (lock, try_lock, unlock,
 * force_unlock, is_locked, is_held, hold_count, remaining_ttl, stress, bench) for every lock kind
 * of the protocol: lock (RLock), fair (RFairLock), read and write (the halves of
 * RReadWriteLock), fenced (RFencedLock), spin (getSpinLock: an RLock whose waiters poll with
 * Redisson's default exponential back-off instead of listening on the channel), nonreentrant
 * (getNonReentrantLock) and nonreentrant_fair (getNonReentrantFairLock). The last two exist in
 * Redisson 4.4.0 and later only: they are looked up by reflection, so the agent compiles against
 * 3.x as well, and answer {@code unsupported} when the loaded Redisson lacks them. RSemaphore
 * (sem_try_set, sem_acquire, sem_release, sem_available), RCountDownLatch (latch_try_set,
 * latch_count_down, latch_await, latch_count) and RPermitExpirableSemaphore (psem_try_set,
 * psem_acquire, psem_release, psem_available, psem_update_lease, psem_try_release_many;
 * psem_acquire with {@code "renew": true}, the protocol's Rust-only extension, answers
 * {@code unsupported}). The object ops (obj_exists, obj_delete, obj_expire, obj_clear_expire,
 * obj_ttl) call RObject / RExpirable methods on the object of their okind, a lock kind or
 * semaphore, psem or latch; latch has exists and delete only (see objectOp). stress for the lock kinds plus
 * semaphore (RSemaphore) and psem (RPermitExpirableSemaphore), which acquire and release one
 * permit per iteration and leave the counter alone; bench for the lock kinds plus semaphore
 * (trySetPermits(1) on every key first, then acquire() + release() per pair). stress with
 * {@code "keep_going": true} (the fault suite) survives failures: a failed acquire, critical
 * section or release is counted in errors and error_samples, and every acquired iteration is
 * reported in records (requested, acquired, releasing and released instants, section and unlock
 * outcomes, fenced: the token); Redisson has no lost-lease signal, so a record never has lost_ns.
 *
 * <p>fenced: {@code lock} answers the fencing token: lockAndGetToken() without a lease; with one,
 * lockAndGetTokenAsync(lease, MILLISECONDS) joined, because Redisson's synchronous
 * lockAndGetToken(leaseTime, unit) drops its lease (it calls lockAndGetTokenAsync() without
 * arguments) and would hold the lock on the watchdog instead; the async form keeps the lease and
 * returns the token the acquire script drew, atomically. {@code try_lock} uses tryLockAndGetToken(wait, lease,
 * MILLISECONDS), which keeps its lease (-1: none, watchdog) and returns null when not acquired;
 * never the no-argument tryLockAndGetToken(), which passes waitTime -1 and so waits forever.
 * stress and bench acquire with lockAndGetToken(). Every other op is RLock's.
 *
 * <p>nonreentrant and nonreentrant_fair: a re-acquire by the owner that holds the lock makes
 * Redisson throw IllegalMonitorStateException (the hash is left as it was); it is answered
 * {@code not_held}, as every IllegalMonitorStateException is, with a message saying the lock is
 * not reentrant.
 */
public final class Agent {
    /** Ops that get start_ns/end_ns on every response. */
    private static final Set<String> TIMED_OPS = Set.of("lock", "try_lock", "unlock", "force_unlock",
            "is_locked", "is_held", "hold_count", "remaining_ttl", "stress",
            "sem_try_set", "sem_acquire", "sem_release", "sem_available",
            "latch_try_set", "latch_count_down", "latch_await", "latch_count",
            "psem_try_set", "psem_acquire", "psem_release", "psem_available", "psem_update_lease",
            "psem_try_release_many",
            "obj_exists", "obj_delete", "obj_expire", "obj_clear_expire", "obj_ttl");
    /** Ops that run on the queue of their owner. */
    private static final Set<String> OWNER_OPS = Set.of("lock", "try_lock", "unlock", "is_held",
            "hold_count", "stress", "sem_acquire", "latch_await", "psem_acquire");
    private static final Set<String> OWNERLESS_OPS = Set.of("force_unlock", "is_locked", "remaining_ttl",
            "bench", "sem_try_set", "sem_release", "sem_available", "latch_try_set", "latch_count_down",
            "latch_count", "psem_try_set", "psem_release", "psem_available", "psem_update_lease",
            "psem_try_release_many",
            "obj_exists", "obj_delete", "obj_expire", "obj_clear_expire", "obj_ttl");
    /** Object and expiry ops (RObject / RExpirable): they take an `okind` and a `name`. */
    private static final Set<String> OBJ_OPS = Set.of("obj_exists", "obj_delete", "obj_expire",
            "obj_clear_expire", "obj_ttl");
    /** The object ops that need an RExpirable (RCountDownLatch is an RObject only). */
    private static final Set<String> EXPIRY_OPS = Set.of("obj_expire", "obj_clear_expire", "obj_ttl");
    /** Ops that take a `kind`. */
    private static final Set<String> KIND_OPS = Set.of("lock", "try_lock", "unlock", "force_unlock",
            "is_locked", "is_held", "hold_count", "remaining_ttl", "stress", "bench");
    /** The kinds that exist only in Redisson 4.4.0+; the agent finds their factories by reflection. */
    private static final String NON_REENTRANT = "nonreentrant";
    private static final String NON_REENTRANT_FAIR = "nonreentrant_fair";
    /** RedissonClient.getNonReentrantLock(String), or null when the loaded Redisson has none. */
    private static final Method GET_NON_REENTRANT_LOCK = clientMethod("getNonReentrantLock");
    /** RedissonClient.getNonReentrantFairLock(String), or null when the loaded Redisson has none. */
    private static final Method GET_NON_REENTRANT_FAIR_LOCK = clientMethod("getNonReentrantFairLock");
    /**
     * Lock kinds this agent has with the loaded Redisson: RLock, RFairLock, the two halves of
     * RReadWriteLock, RFencedLock, the spin lock, and (Redisson 4.4.0+) the two non-reentrant locks.
     */
    private static final Set<String> KINDS = supportedKinds();
    /** Semaphore kinds: RSemaphore and RPermitExpirableSemaphore; for stress (both) and bench (semaphore). */
    private static final String SEMAPHORE = "semaphore";
    private static final String PSEM = "psem";
    /** The okind of RCountDownLatch (object ops only). */
    private static final String LATCH = "latch";
    /** A permit id of RPermitExpirableSemaphore: 16 bytes in hex. */
    private static final Pattern PERMIT_ID = Pattern.compile("[0-9a-fA-F]{32}");
    /** stress with keep_going: how many distinct error messages a response quotes. */
    private static final int ERROR_SAMPLES = 5;
    /** stress with keep_going: the pause after a failed acquire, so a dead server is not hammered. */
    private static final long ACQUIRE_BACKOFF_MS = 20;
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
            emit(error(id, "unsupported", "unknown op " + op));
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
        RLock lock = r.kind != null && KINDS.contains(r.kind)
                ? locks.computeIfAbsent(new LockKey(r.kind, r.name), this::cachedLock)
                : null;
        ObjectNode resp = ok(r.id);
        long start = System.nanoTime();
        try {
            switch (r.op) {
                case "lock":
                    if (lock instanceof RFencedLock) {
                        RFencedLock fenced = (RFencedLock) lock;
                        // lockAndGetToken(lease, unit) ignores its lease (class javadoc); its async
                        // form keeps it and takes the token from the acquire script itself, on this
                        // owner's thread (Redisson reads the thread id when the call is made).
                        if (r.leaseMs > 0) {
                            resp.put("token", fenced.lockAndGetTokenAsync(r.leaseMs, TimeUnit.MILLISECONDS)
                                    .toCompletableFuture().join());
                        } else {
                            resp.put("token", fenced.lockAndGetToken());
                        }
                    } else if (r.leaseMs > 0) {
                        lock.lock(r.leaseMs, TimeUnit.MILLISECONDS);
                    } else {
                        lock.lock();
                    }
                    break;
                case "try_lock":
                    if (lock instanceof RFencedLock) {
                        // Keeps its lease (-1: watchdog); null when not acquired. With wait 0 a
                        // single attempt. Not the no-argument form: it would wait forever.
                        Long token = ((RFencedLock) lock).tryLockAndGetToken(r.waitMs,
                                r.leaseMs > 0 ? r.leaseMs : -1, TimeUnit.MILLISECONDS);
                        resp.put("acquired", token != null);
                        if (token != null) {
                            resp.put("token", token);
                        }
                        break;
                    }
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
                    if (r.keepGoing) {
                        stressKeepGoing(r, lock, resp);
                    } else if (lock != null) {
                        stress(r, lock, resp);
                    } else {
                        stressSemaphore(r, resp);
                    }
                    break;
                case "sem_try_set":
                    resp.put("set", redisson.getSemaphore(r.name).trySetPermits(r.permits));
                    break;
                case "sem_acquire": {
                    RSemaphore sem = redisson.getSemaphore(r.name);
                    if (!r.hasWait) {
                        sem.acquire(r.permits);
                        resp.put("acquired", true);
                    } else if (r.waitMs == 0) {
                        resp.put("acquired", sem.tryAcquire(r.permits));
                    } else {
                        resp.put("acquired", sem.tryAcquire(r.permits, Duration.ofMillis(r.waitMs)));
                    }
                    break;
                }
                case "sem_release":
                    redisson.getSemaphore(r.name).release(r.permits);
                    break;
                case "sem_available":
                    resp.put("permits", redisson.getSemaphore(r.name).availablePermits());
                    break;
                case "latch_try_set":
                    resp.put("set", redisson.getCountDownLatch(r.name).trySetCount(r.count));
                    break;
                case "latch_count_down":
                    redisson.getCountDownLatch(r.name).countDown();
                    break;
                case "latch_await": {
                    RCountDownLatch latch = redisson.getCountDownLatch(r.name);
                    if (!r.hasWait) {
                        latch.await();
                        resp.put("opened", true);
                    } else {
                        resp.put("opened", latch.await(r.waitMs, TimeUnit.MILLISECONDS));
                    }
                    break;
                }
                case "latch_count":
                    resp.put("count", redisson.getCountDownLatch(r.name).getCount());
                    break;
                case "psem_try_set":
                    resp.put("set", redisson.getPermitExpirableSemaphore(r.name).trySetPermits(r.permits));
                    break;
                case "psem_acquire":
                    psemAcquire(r, resp);
                    break;
                case "psem_release": {
                    // tryRelease(List) (3.52 and 4.x alike) answers how many ids it released: all of
                    // them, or 0 without releasing any when one is unknown or expired.
                    int released = redisson.getPermitExpirableSemaphore(r.name).tryRelease(r.permitIds);
                    resp.put("released", released == r.permitIds.size());
                    break;
                }
                case "psem_available":
                    resp.put("permits", redisson.getPermitExpirableSemaphore(r.name).availablePermits());
                    break;
                case "psem_update_lease":
                    // Redisson's leaseTime -1 means "no expiry" (calcTimeout).
                    resp.put("updated", redisson.getPermitExpirableSemaphore(r.name)
                            .updateLeaseTime(r.permitId, r.leaseMs > 0 ? r.leaseMs : -1, TimeUnit.MILLISECONDS));
                    break;
                case "psem_try_release_many":
                    // All or nothing (its script checks every id first): how many ids it removed
                    // (a repeated id counts once), or 0 without releasing any when one of them is
                    // unknown, released or expired.
                    resp.put("released", redisson.getPermitExpirableSemaphore(r.name).tryRelease(r.permitIds));
                    break;
                case "obj_exists":
                case "obj_delete":
                case "obj_expire":
                case "obj_clear_expire":
                case "obj_ttl":
                    objectOp(r, resp);
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

    /**
     * The object ops: Redisson's own RObject / RExpirable methods on the object of okind, so the
     * keys each touches are the ones Redisson chose. What they do (Redisson's source, the same in
     * 3.52.0 and 4.7.0, and observed against a live server with both), worth knowing because it
     * is not always what the names suggest:
     * <ul>
     * <li>isExists() is EXISTS of the object's main key only, and remainTimeToLive() PTTL of it
     * only, for every okind: psem's {name}:timeout sorted set, fair's queue and timeout keys and
     * fenced's token counter are not looked at (psem with only {name}:timeout left: exists
     * false, ttl -2, yet expire answers true, having set that key's TTL).</li>
     * <li>delete() on a lock is not always a DEL. lock, spin, nonreentrant, read and write: it is
     * forceUnlock() (RedissonBaseLock.deleteAsync), which also cancels this client's watchdog
     * renewal of the name. lock and nonreentrant DEL the hash and publish an unlock message (a
     * waiter takes the lock at once); spin only DELs (its waiters poll). read and write DEL the
     * hash only when its mode is their own (read on a write-held rwlock answers false and
     * deletes nothing, and the other way round), publish, and leave the read holders'
     * {name}:UUID:thread:rwlock_timeout:N keys to their own TTL. fair and nonreentrant_fair: a
     * plain DEL of the hash, redisson_lock_queue:{name} and redisson_lock_timeout:{name}, with
     * no message and no watchdog cancel: a queued waiter is not woken and takes the lock only
     * when its own wait (the holder's remaining lease) runs out. fenced: a plain DEL of the hash
     * and of the token counter redisson_lock_token:{name}, no message, no watchdog cancel: a
     * waiter also waits out the old lease, and the next fencing token is 1 again. The renewal
     * of a deleted lock stops by itself (it finds the holder's field gone); nothing comes back.</li>
     * <li>expire() and clearExpire() act on the hash only for lock, spin, nonreentrant, read and
     * write (not on the rwlock_timeout keys); on the hash, queue and timeout keys for fair and
     * nonreentrant_fair; on the hash and the token counter for fenced; on name and
     * {name}:timeout for psem. Over several keys the answer is true when any one key's TTL was
     * set or removed. On a lock held under the watchdog both are undone on the hash by the next
     * renewal (within a third of the watchdog timeout), which PEXPIREs it to the watchdog
     * timeout again; the other keys keep what was set (a fenced lock's token counter then
     * expires and its tokens restart from 1 although the lock was held all along).</li>
     * <li>latch: RCountDownLatch is an RObject, not an RExpirable, so it has no expire,
     * clearExpire or remainTimeToLive: those answer unsupported. Its delete() DELs the key and
     * publishes a new-count message, which wakes nobody: an await with a timeout answers true
     * when it times out, one without waits on (until a later latch on the name opens).</li>
     * <li>semaphore: one plain key; every op acts on it alone.</li>
     * </ul>
     */
    private void objectOp(Request r, ObjectNode resp) throws OpError {
        RObject obj = object(r.okind, r.name);
        if (r.op.equals("obj_exists")) {
            resp.put("exists", obj.isExists());
            return;
        }
        if (r.op.equals("obj_delete")) {
            resp.put("deleted", obj.delete());
            return;
        }
        if (!(obj instanceof RExpirable)) {
            // Request.parse already refuses latch; this guards a Redisson that changes a class.
            throw new OpError("unsupported", "okind " + r.okind + " (" + obj.getClass().getSimpleName()
                    + ") is not an RExpirable in this Redisson: no " + r.op);
        }
        RExpirable expirable = (RExpirable) obj;
        switch (r.op) {
            case "obj_expire":
                resp.put("set", expirable.expire(Duration.ofMillis(r.ttlMs)));
                break;
            case "obj_clear_expire":
                resp.put("cleared", expirable.clearExpire());
                break;
            case "obj_ttl":
                resp.put("ttl_ms", expirable.remainTimeToLive());
                break;
            default:
                throw new OpError("unsupported", "unknown op " + r.op);
        }
    }

    /**
     * The Redisson object of an okind: for a lock kind the lock object the agent keeps (the one
     * lock ops use; read and write are the halves of the cached RReadWriteLock), else a fresh
     * RSemaphore, RPermitExpirableSemaphore or RCountDownLatch. RLock is not declared an RObject,
     * but every Redisson lock class is one (RedissonBaseLock extends RedissonExpirable).
     */
    private RObject object(String okind, String name) throws OpError {
        Object obj;
        switch (okind) {
            case SEMAPHORE:
                obj = redisson.getSemaphore(name);
                break;
            case PSEM:
                obj = redisson.getPermitExpirableSemaphore(name);
                break;
            case LATCH:
                obj = redisson.getCountDownLatch(name);
                break;
            default:
                obj = locks.computeIfAbsent(new LockKey(okind, name), this::cachedLock);
                break;
        }
        if (!(obj instanceof RObject)) {
            throw new OpError("unsupported", "okind " + okind + " (" + obj.getClass().getSimpleName()
                    + ") is not an RObject in this Redisson");
        }
        return (RObject) obj;
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
            case "fenced":
                return redisson.getFencedLock(name);
            case "spin":
                // Default back-off: LockOptions.defaults(), exponential.
                return redisson.getSpinLock(name);
            case NON_REENTRANT:
                return reflectLock(GET_NON_REENTRANT_LOCK, kind, name);
            case NON_REENTRANT_FAIR:
                return reflectLock(GET_NON_REENTRANT_FAIR_LOCK, kind, name);
            default:
                throw new IllegalArgumentException("kind " + kind);
        }
    }

    /**
     * Acquires lock for stress and bench: blocking, watchdog lease; a fenced lock with
     * lockAndGetToken(). Answers the fencing token, null for every other kind.
     */
    private static Long acquire(RLock lock) {
        if (lock instanceof RFencedLock) {
            return ((RFencedLock) lock).lockAndGetToken();
        }
        lock.lock();
        return null;
    }

    /** Calls a RedissonClient lock factory found by reflection (getNonReentrant[Fair]Lock). */
    private RLock reflectLock(Method factory, String kind, String name) {
        if (factory == null) {
            // Request.parse refuses the kind before we get here.
            throw new IllegalStateException("kind " + kind + " is not available with this Redisson");
        }
        try {
            return (RLock) factory.invoke(redisson, name);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RuntimeException) {
                throw (RuntimeException) cause;
            }
            throw new IllegalStateException(factory.getName() + " failed", cause);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(factory.getName() + " is not accessible", e);
        }
    }

    /** RedissonClient.name(String) returning an RLock, or null when the loaded Redisson has none. */
    private static Method clientMethod(String name) {
        try {
            Method m = RedissonClient.class.getMethod(name, String.class);
            return RLock.class.isAssignableFrom(m.getReturnType()) ? m : null;
        } catch (NoSuchMethodException | SecurityException e) {
            return null;
        }
    }

    private static Set<String> supportedKinds() {
        Set<String> kinds = new LinkedHashSet<>(List.of("lock", "fair", "read", "write", "fenced", "spin"));
        if (GET_NON_REENTRANT_LOCK != null) {
            kinds.add(NON_REENTRANT);
        }
        if (GET_NON_REENTRANT_FAIR_LOCK != null) {
            kinds.add(NON_REENTRANT_FAIR);
        }
        return Collections.unmodifiableSet(kinds);
    }

    /** The Redisson version on the class path, for messages. */
    private static String redissonVersion() {
        Package p = Redisson.class.getPackage();
        String v = p == null ? null : p.getImplementationVersion();
        return v == null || v.isEmpty() ? "an older Redisson" : "Redisson " + v;
    }

    /** Key of the lock cache. */
    private record LockKey(String kind, String name) {
    }

    /**
     * psem_acquire: the multi-permit API, present in 3.52 and 4.x alike. Redisson's leaseTime -1
     * means "no lease" (calcTimeout maps it to its non-expirable timeout); an empty list means not
     * acquired.
     */
    private void psemAcquire(Request r, ObjectNode resp) throws InterruptedException {
        RPermitExpirableSemaphore sem = redisson.getPermitExpirableSemaphore(r.name);
        List<String> ids;
        if (!r.hasWait) {
            ids = r.leaseMs > 0
                    ? sem.acquire(r.permits, r.leaseMs, TimeUnit.MILLISECONDS)
                    : sem.acquire(r.permits);
        } else {
            ids = sem.tryAcquire(r.permits, r.waitMs, r.leaseMs > 0 ? r.leaseMs : -1, TimeUnit.MILLISECONDS);
        }
        boolean acquired = ids != null && !ids.isEmpty();
        resp.put("acquired", acquired);
        if (acquired) {
            ArrayNode list = resp.putArray("ids");
            for (String id : ids) {
                list.add(id);
            }
        }
    }

    private void stress(Request r, RLock lock, ObjectNode resp) throws OpError {
        RBucket<String> counter = redisson.getBucket(r.counter, StringCodec.INSTANCE);
        ArrayNode intervals = r.record ? resp.arrayNode() : null;
        long done = 0;
        for (long i = 0; i < r.iterations; i++) {
            acquire(lock);
            long acquired = System.nanoTime();
            long releasing;
            try {
                counterSection(r, counter);
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

    /**
     * stress for kind semaphore (RSemaphore) or psem (RPermitExpirableSemaphore): one permit per
     * iteration, acquired blocking (psem: no lease), held hold_us, released. The counter is not
     * touched: with more than one permit several holders may be inside at once.
     */
    private void stressSemaphore(Request r, ObjectNode resp) throws InterruptedException {
        RSemaphore sem = r.kind.equals(SEMAPHORE) ? redisson.getSemaphore(r.name) : null;
        RPermitExpirableSemaphore psem = r.kind.equals(PSEM) ? redisson.getPermitExpirableSemaphore(r.name) : null;
        ArrayNode intervals = r.record ? resp.arrayNode() : null;
        long done = 0;
        for (long i = 0; i < r.iterations; i++) {
            String permitId = null;
            if (sem != null) {
                sem.acquire();
            } else {
                permitId = psem.acquire();
            }
            long acquired = System.nanoTime();
            if (r.holdUs > 0) {
                sleepMicros(r.holdUs);
            }
            long releasing = System.nanoTime();
            if (sem != null) {
                sem.release();
            } else {
                psem.release(permitId);
            }
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

    /**
     * The critical section of stress on a lock kind: GET the counter, hold hold_us, SET it one
     * higher. Readers (kind read) only look at the counter: several may hold the lock at once.
     */
    private static void counterSection(Request r, RBucket<String> counter) throws OpError {
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
        if (!r.kind.equals("read")) {
            counter.set(Long.toString(value + 1));
        }
    }

    /** The errors of one keep_going stress: how many, and the first few distinct messages. */
    private static final class StressErrors {
        int count;
        final Set<String> samples = new LinkedHashSet<>();

        void note(Throwable t) {
            count++;
            if (samples.size() < ERROR_SAMPLES) {
                samples.add(describe(t));
            }
        }
    }

    /**
     * stress with keep_going, for every kind stress has (lock null: semaphore or psem): an error
     * ends its iteration, not the op. A failed acquire is counted and followed by a short pause;
     * every acquired iteration adds one record. A counter that is not a decimal number still ends
     * the op (bad_request), as an InterruptedException does.
     */
    private void stressKeepGoing(Request r, RLock lock, ObjectNode resp) throws OpError, InterruptedException {
        RBucket<String> counter = lock != null ? redisson.getBucket(r.counter, StringCodec.INSTANCE) : null;
        RSemaphore sem = r.kind.equals(SEMAPHORE) ? redisson.getSemaphore(r.name) : null;
        RPermitExpirableSemaphore psem = r.kind.equals(PSEM) ? redisson.getPermitExpirableSemaphore(r.name) : null;
        StressErrors errors = new StressErrors();
        ArrayNode records = resp.arrayNode();
        for (long i = 0; i < r.iterations; i++) {
            ObjectNode record = lock != null
                    ? lockIteration(r, lock, counter, errors)
                    : semaphoreIteration(r, sem, psem, errors);
            if (record != null) {
                records.add(record);
            } else {
                Thread.sleep(ACQUIRE_BACKOFF_MS);
            }
        }
        resp.put("done", r.iterations);
        resp.put("acquired", records.size());
        resp.put("errors", errors.count);
        ArrayNode samples = resp.putArray("error_samples");
        errors.samples.forEach(samples::add);
        if (r.record) {
            ArrayNode intervals = resp.putArray("intervals");
            for (JsonNode record : records) {
                intervals.addArray().add(record.get("acquired_ns").asLong()).add(record.get("releasing_ns").asLong());
            }
        }
        resp.set("records", records);
    }

    /** One keep_going iteration on a lock kind: its record, or null when the acquire failed. */
    private static ObjectNode lockIteration(Request r, RLock lock, RBucket<String> counter, StressErrors errors)
            throws OpError {
        long requested = System.nanoTime();
        Long token;
        try {
            token = acquire(lock);
        } catch (RuntimeException e) {
            errors.note(e);
            return null;
        }
        long acquired = System.nanoTime();
        String section = "ok";
        try {
            counterSection(r, counter);
        } catch (RuntimeException e) {
            errors.note(e);
            section = "error";
        } catch (OpError e) {
            try {
                lock.unlock();
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
        long releasing = System.nanoTime();
        String unlock;
        try {
            lock.unlock();
            unlock = "ok";
        } catch (IllegalMonitorStateException e) {
            unlock = "not_held";
        } catch (RuntimeException e) {
            errors.note(e);
            unlock = "error";
        }
        long released = System.nanoTime();
        ObjectNode record = stressRecord(requested, acquired, releasing, released, section, unlock);
        if (token != null) {
            record.put("token", token);
        }
        return record;
    }

    /**
     * One keep_going iteration on semaphore (sem) or psem: its record, or null when the acquire
     * failed. psem releases with tryRelease(id), which answers false (not_held) for a permit that
     * expired or is unknown, where release(id) would throw.
     */
    private static ObjectNode semaphoreIteration(Request r, RSemaphore sem, RPermitExpirableSemaphore psem,
            StressErrors errors) throws InterruptedException {
        long requested = System.nanoTime();
        String permitId = null;
        try {
            if (sem != null) {
                sem.acquire();
            } else {
                permitId = psem.acquire();
            }
        } catch (RuntimeException e) {
            errors.note(e);
            return null;
        }
        long acquired = System.nanoTime();
        if (r.holdUs > 0) {
            sleepMicros(r.holdUs);
        }
        long releasing = System.nanoTime();
        String unlock;
        try {
            if (sem != null) {
                sem.release();
                unlock = "ok";
            } else {
                unlock = psem.tryRelease(permitId) ? "ok" : "not_held";
            }
        } catch (RuntimeException e) {
            errors.note(e);
            unlock = "error";
        }
        long released = System.nanoTime();
        return stressRecord(requested, acquired, releasing, released, "ok", unlock);
    }

    private static ObjectNode stressRecord(long requested, long acquired, long releasing, long released,
            String section, String unlock) {
        ObjectNode record = JSON.createObjectNode();
        record.put("requested_ns", requested);
        record.put("acquired_ns", acquired);
        record.put("releasing_ns", releasing);
        record.put("released_ns", released);
        record.put("section", section);
        record.put("unlock", unlock);
        return record;
    }

    /** One acquire+release pair of a bench task. */
    private interface Pair {
        void run() throws Exception;
    }

    private ObjectNode bench(Request r) {
        int tasks = (int) r.tasks;
        int iterations = (int) r.iterations;
        long[][] latencies = new long[tasks][iterations];
        int[] completed = new int[tasks];
        CountDownLatch ready = new CountDownLatch(tasks);
        CountDownLatch go = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Pair[] pairs = new Pair[tasks];
        if (r.kind.equals(SEMAPHORE)) {
            // One key per task loop (or the shared one), each with one permit, set before the loops.
            Set<String> keys = new LinkedHashSet<>();
            for (int t = 0; t < tasks; t++) {
                String key = r.sameKey ? r.name : r.name + ":" + t;
                keys.add(key);
                RSemaphore sem = redisson.getSemaphore(key);
                pairs[t] = () -> {
                    sem.acquire();
                    sem.release();
                };
            }
            try {
                for (String key : keys) {
                    redisson.getSemaphore(key).trySetPermits(1);
                }
            } catch (RuntimeException e) {
                return classify(r, e);
            }
        } else {
            for (int t = 0; t < tasks; t++) {
                RLock lock = newLock(r.kind, r.sameKey ? r.name : r.name + ":" + t);
                pairs[t] = () -> {
                    acquire(lock);
                    lock.unlock();
                };
            }
        }
        Thread[] threads = new Thread[tasks];
        for (int t = 0; t < tasks; t++) {
            final int task = t;
            Pair pair = pairs[t];
            // A fresh platform thread per task: each task is its own lock owner.
            threads[t] = new Thread(() -> {
                ready.countDown();
                try {
                    go.await();
                    for (int i = 0; i < iterations && failure.get() == null; i++) {
                        long s = System.nanoTime();
                        pair.run();
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
                boolean acquiring = r.op.equals("lock") || r.op.equals("try_lock") || r.op.equals("stress")
                        || r.op.equals("bench");
                if (acquiring && (NON_REENTRANT.equals(r.kind) || NON_REENTRANT_FAIR.equals(r.kind))) {
                    // The owner re-acquired a lock it holds; Redisson refuses and leaves it held once.
                    return error(r.id, "not_held", r.name + " is not reentrant and is already held by " + who
                            + "; the re-acquire was refused, the lock stays held once (Redisson: "
                            + c.getMessage() + ")");
                }
                return error(r.id, "not_held", r.name + " is not held by " + who + ": " + c.getMessage());
            }
            if (c instanceof IllegalArgumentException) {
                // Redisson's argument checks, e.g. "Permits amount can't be negative".
                return error(r.id, "bad_request", describe(c));
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
        /** stress: an error ends its iteration, not the op; every acquired iteration is recorded. */
        boolean keepGoing;
        boolean sameKey;
        /** wait_ms was given (sem_acquire, latch_await, psem_acquire: absent means wait forever). */
        boolean hasWait;
        int permits;
        long count;
        String permitId;
        List<String> permitIds;
        /** Object ops: a lock kind, semaphore, psem or latch. */
        String okind;
        /** obj_expire: the time to live to set, >= 1 ms. */
        long ttlMs;

        private Request(long id, String op) {
            this.id = id;
            this.op = op;
        }

        static Request parse(long id, String op, JsonNode req) throws OpError {
            Request r = new Request(id, op);
            if (KIND_OPS.contains(op)) {
                JsonNode kind = req.get("kind");
                if (kind == null || !kind.isTextual()) {
                    throw new OpError("bad_request", op + " needs a string \"kind\"");
                }
                String k = kind.asText();
                boolean semaphoreKind = (op.equals("stress") && (k.equals(SEMAPHORE) || k.equals(PSEM)))
                        || (op.equals("bench") && k.equals(SEMAPHORE));
                if (!KINDS.contains(k) && !semaphoreKind) {
                    if (k.equals(NON_REENTRANT) || k.equals(NON_REENTRANT_FAIR)) {
                        throw new OpError("unsupported", "kind " + k + " needs Redisson 4.4.0 or newer (RedissonClient."
                                + (k.equals(NON_REENTRANT) ? "getNonReentrantLock" : "getNonReentrantFairLock")
                                + "); this java agent runs " + redissonVersion());
                    }
                    throw new OpError("unsupported", "kind " + k + " is not supported by the java agent"
                            + (k.equals(SEMAPHORE) || k.equals(PSEM) ? " for op " + op : ""));
                }
                r.kind = k;
            }
            if (OBJ_OPS.contains(op)) {
                r.okind = okind(op, req);
            }
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
                    if (KINDS.contains(r.kind)) {
                        r.counter = string(req, "counter");
                    } else if (req.hasNonNull("counter")) {
                        // Accepted, not touched: several semaphore holders may be inside at once.
                        r.counter = string(req, "counter");
                    }
                    r.holdUs = Math.max(0, integer(req, "hold_us", 0L));
                    r.record = bool(req, "record", false);
                    r.keepGoing = bool(req, "keep_going", false);
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
                case "sem_try_set":
                case "psem_try_set":
                    r.permits = int32(req, "permits", null);
                    break;
                case "sem_acquire":
                    // A negative count is Redisson's to refuse (IllegalArgumentException: bad_request).
                    r.permits = int32(req, "permits", null);
                    r.waitMs = waitMs(r, req);
                    break;
                case "sem_release":
                    r.permits = int32(req, "permits", null);
                    break;
                case "latch_try_set":
                    r.count = integer(req, "count", null);
                    break;
                case "latch_await":
                    r.waitMs = waitMs(r, req);
                    break;
                case "psem_acquire":
                    r.permits = int32(req, "permits", 1L);
                    if (r.permits < 1) {
                        // Redisson refuses a negative count; 0 would make acquire() spin and an
                        // empty id list ambiguous.
                        throw new OpError("bad_request", "\"permits\" must be >= 1, got " + r.permits);
                    }
                    r.waitMs = waitMs(r, req);
                    r.leaseMs = integer(req, "lease_ms", 0L);
                    if (bool(req, "renew", false)) {
                        // The protocol's Rust-only extension: Redisson has no permit renewal.
                        throw new OpError("unsupported", "psem_acquire with \"renew\": true is a Rust-only"
                                + " extension; Redisson's RPermitExpirableSemaphore has no lease renewal");
                    }
                    break;
                case "psem_release":
                case "psem_try_release_many": {
                    JsonNode ids = req.get("ids");
                    if (ids == null || !ids.isArray() || ids.isEmpty()) {
                        // Redisson's tryRelease(List) refuses an empty list too.
                        throw new OpError("bad_request", "\"ids\" must be a non-empty list of permit ids");
                    }
                    r.permitIds = new ArrayList<>(ids.size());
                    for (JsonNode n : ids) {
                        r.permitIds.add(permitId(n, "ids"));
                    }
                    break;
                }
                case "obj_expire":
                    r.ttlMs = integer(req, "ttl_ms", null);
                    if (r.ttlMs < 1) {
                        // PEXPIRE with 0 or less would delete the keys: not an expiry.
                        throw new OpError("bad_request", "\"ttl_ms\" must be >= 1, got " + r.ttlMs);
                    }
                    break;
                case "psem_update_lease":
                    // The protocol's table calls this field `id`, which every request already uses
                    // for its integer request id; the permit id travels as `permit_id`.
                    r.permitId = permitId(req.get("permit_id"), "permit_id");
                    r.leaseMs = integer(req, "lease_ms", null);
                    break;
                default:
                    break;
            }
            return r;
        }

        /**
         * The okind of an object op: a lock kind of the loaded Redisson, semaphore, psem or
         * latch (exists and delete only: RCountDownLatch is no RExpirable). Missing or not a
         * string: bad_request; anything else unknown: unsupported.
         */
        private static String okind(String op, JsonNode req) throws OpError {
            JsonNode n = req.get("okind");
            if (n == null || !n.isTextual()) {
                throw new OpError("bad_request", op + " needs a string \"okind\"");
            }
            String k = n.asText();
            if (KINDS.contains(k) || k.equals(SEMAPHORE) || k.equals(PSEM)) {
                return k;
            }
            if (k.equals(LATCH)) {
                if (EXPIRY_OPS.contains(op)) {
                    throw new OpError("unsupported", "okind latch has no " + op + ": Redisson's RCountDownLatch"
                            + " is an RObject, not an RExpirable (no expire, clearExpire or remainTimeToLive)");
                }
                return k;
            }
            if (k.equals(NON_REENTRANT) || k.equals(NON_REENTRANT_FAIR)) {
                throw new OpError("unsupported", "okind " + k + " needs Redisson 4.4.0 or newer; this java agent runs "
                        + redissonVersion());
            }
            throw new OpError("unsupported", "okind " + k + " is not supported by the java agent");
        }

        /** Optional wait_ms: absent or null means wait forever (hasWait false); negative is 0. */
        private static long waitMs(Request r, JsonNode req) throws OpError {
            JsonNode n = req.get("wait_ms");
            r.hasWait = n != null && !n.isNull();
            return r.hasWait ? Math.max(0, integer(req, "wait_ms", null)) : 0;
        }

        /** A permit id of RPermitExpirableSemaphore: a string of 32 hex digits. */
        private static String permitId(JsonNode n, String field) throws OpError {
            if (n == null || !n.isTextual() || !PERMIT_ID.matcher(n.asText()).matches()) {
                throw new OpError("bad_request", "\"" + field + "\" must hold permit ids of 32 hex digits, got "
                        + (n == null ? "nothing" : n.toString()));
            }
            return n.asText();
        }

        /** An integer field that must fit a Java int (Redisson's permit counts). */
        private static int int32(JsonNode req, String field, Long dflt) throws OpError {
            long v = integer(req, field, dflt);
            if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
                throw new OpError("bad_request", "\"" + field + "\" is out of range: " + v);
            }
            return (int) v;
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
