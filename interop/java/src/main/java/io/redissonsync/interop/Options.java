package io.redissonsync.interop;

/** Command-line options of the agent (CONFORMANCE_PROTOCOL.md, "Options"). */
final class Options {
    String redis = "redis://127.0.0.1:6379";
    String mode = "single";
    String master = "mymaster";
    long watchdogMs = 30000;
    long fairWaitMs = 300000;
    String pubsub = "auto";
    String redisson = "4.7.0";
    String user = null;
    String password = null;
    String namePrefix = "";
    String tlsCa = null;

    /** Thrown for an unknown option or a bad value; main() reports it and exits 2. */
    static final class UsageException extends Exception {
        UsageException(String message) {
            super(message);
        }
    }

    static final String USAGE = "usage: Agent [--redis URL] [--mode single|cluster|sentinel] [--master NAME]"
            + " [--watchdog-ms N] [--fair-wait-ms N] [--pubsub auto|classic|sharded] [--redisson VERSION]"
            + " [--user NAME] [--password PASSWORD] [--name-prefix PREFIX] [--tls-ca PEM]";

    static Options parse(String[] args) throws UsageException {
        Options o = new Options();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            String key = arg;
            String value = null;
            int eq = arg.indexOf('=');
            if (arg.startsWith("--") && eq > 0) {
                key = arg.substring(0, eq);
                value = arg.substring(eq + 1);
            }
            switch (key) {
                case "--redis":
                case "--mode":
                case "--master":
                case "--watchdog-ms":
                case "--fair-wait-ms":
                case "--pubsub":
                case "--redisson":
                case "--user":
                case "--password":
                case "--name-prefix":
                case "--tls-ca":
                    break;
                default:
                    throw new UsageException("unknown option: " + arg);
            }
            if (value == null) {
                if (i + 1 >= args.length) {
                    throw new UsageException("option " + key + " needs a value");
                }
                value = args[++i];
            }
            switch (key) {
                case "--redis":
                    if (!value.startsWith("redis://") && !value.startsWith("rediss://")) {
                        throw new UsageException("--redis must be a redis://host:port URL, got: " + value);
                    }
                    o.redis = value;
                    break;
                case "--mode":
                    if (!value.equals("single") && !value.equals("cluster") && !value.equals("sentinel")) {
                        throw new UsageException("--mode must be single, cluster or sentinel, got: " + value);
                    }
                    o.mode = value;
                    break;
                case "--master":
                    if (value.isEmpty()) {
                        throw new UsageException("--master must not be empty");
                    }
                    o.master = value;
                    break;
                case "--watchdog-ms":
                    o.watchdogMs = positive(key, value);
                    break;
                case "--fair-wait-ms":
                    o.fairWaitMs = positive(key, value);
                    break;
                case "--pubsub":
                    if (!value.equals("auto") && !value.equals("classic") && !value.equals("sharded")) {
                        throw new UsageException("--pubsub must be auto, classic or sharded, got: " + value);
                    }
                    o.pubsub = value;
                    break;
                case "--redisson":
                    if (value.isEmpty()) {
                        throw new UsageException("--redisson must not be empty");
                    }
                    o.redisson = value;
                    break;
                case "--user":
                    if (value.isEmpty()) {
                        throw new UsageException("--user must not be empty");
                    }
                    o.user = value;
                    break;
                case "--password":
                    o.password = value;
                    break;
                case "--name-prefix":
                    o.namePrefix = value;
                    break;
                case "--tls-ca":
                    o.tlsCa = value;
                    break;
                default:
                    throw new AssertionError(key);
            }
        }
        return o;
    }

    private static long positive(String key, String value) throws UsageException {
        long n;
        try {
            n = Long.parseLong(value);
        } catch (NumberFormatException e) {
            throw new UsageException(key + " must be a positive integer, got: " + value);
        }
        if (n <= 0) {
            throw new UsageException(key + " must be a positive integer, got: " + value);
        }
        return n;
    }
}
