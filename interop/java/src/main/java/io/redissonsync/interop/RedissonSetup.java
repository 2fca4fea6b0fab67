package io.redissonsync.interop;

import java.lang.reflect.Method;
import java.lang.reflect.Proxy;

import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;
import org.redisson.config.SentinelServersConfig;
import org.redisson.config.SingleServerConfig;

/**
 * Builds the Redisson client from the options and reads what the ready line needs. Everything
 * whose API is not the same in every Redisson version we may be built against goes through
 * reflection here, so the agent compiles against 3.x and 4.x alike.
 */
final class RedissonSetup {
    /** Sized for `bench` with a few hundred concurrent tasks. */
    static final int POOL_SIZE = 64;
    static final int MIN_IDLE = 8;
    static final int SUBSCRIPTION_POOL_SIZE = 64;

    private RedissonSetup() {
    }

    static Config config(Options o) {
        Config config = new Config();
        config.setLockWatchdogTimeout(o.watchdogMs);
        if (!invoke(config, "setFairLockWaitTimeout", long.class, o.fairWaitMs)
                && o.fairWaitMs != 300000) {
            warn("this Redisson version has no Config.setFairLockWaitTimeout; --fair-wait-ms ignored");
        }
        Object server;
        switch (o.mode) {
            case "single": {
                SingleServerConfig s = config.useSingleServer();
                server = s;
                s.setAddress(o.redis);
                s.setConnectionPoolSize(POOL_SIZE);
                s.setConnectionMinimumIdleSize(MIN_IDLE);
                s.setSubscriptionConnectionPoolSize(SUBSCRIPTION_POOL_SIZE);
                break;
            }
            case "cluster": {
                ClusterServersConfig c = config.useClusterServers();
                server = c;
                c.addNodeAddress(o.redis);
                c.setMasterConnectionPoolSize(POOL_SIZE);
                c.setMasterConnectionMinimumIdleSize(MIN_IDLE);
                c.setSlaveConnectionPoolSize(POOL_SIZE);
                c.setSlaveConnectionMinimumIdleSize(MIN_IDLE);
                c.setSubscriptionConnectionPoolSize(SUBSCRIPTION_POOL_SIZE);
                // Reads (isLocked, remainTimeToLive, GET counter) from the master, so what a
                // scenario observes is never a replica's stale copy.
                c.setReadMode(ReadMode.MASTER);
                setShardedSubscriptionMode(c, o.pubsub);
                break;
            }
            case "sentinel": {
                SentinelServersConfig s = config.useSentinelServers();
                server = s;
                s.setMasterName(o.master);
                s.addSentinelAddress(o.redis);
                // A test setup often runs a single sentinel; Redisson's startup check wants >= 2.
                s.setCheckSentinelsList(false);
                s.setMasterConnectionPoolSize(POOL_SIZE);
                s.setMasterConnectionMinimumIdleSize(MIN_IDLE);
                s.setSlaveConnectionPoolSize(POOL_SIZE);
                s.setSlaveConnectionMinimumIdleSize(MIN_IDLE);
                s.setSubscriptionConnectionPoolSize(SUBSCRIPTION_POOL_SIZE);
                s.setReadMode(ReadMode.MASTER);
                break;
            }
            default:
                throw new IllegalArgumentException("mode " + o.mode);
        }
        // Redisson 4 has these on Config (the server config's are deprecated); 3.x on the
        // server config only.
        if (o.user != null) {
            setOnConfigOrServer(config, server, "setUsername", String.class, o.user);
        }
        if (o.password != null) {
            setOnConfigOrServer(config, server, "setPassword", String.class, o.password);
        }
        if (o.tlsCa != null) {
            setOnConfigOrServer(config, server, "setSslTruststore", java.net.URL.class, truststore(o.tlsCa));
            setOnConfigOrServer(config, server, "setSslTruststorePassword", String.class, TRUSTSTORE_PASSWORD);
        }
        if (!o.namePrefix.isEmpty()) {
            Class<?> type = nameMapperType();
            setOnConfigOrServer(config, server, "setNameMapper", type, prefixMapper(type, o.namePrefix));
        }
        return config;
    }

    private static final String TRUSTSTORE_PASSWORD = "redisson-sync";

    /**
     * --tls-ca: the PEM CA certificates as a PKCS12 truststore in a temporary file (Redisson
     * takes a truststore URL), deleted when the JVM exits.
     */
    private static java.net.URL truststore(String pemPath) {
        try (java.io.InputStream in = new java.io.FileInputStream(pemPath)) {
            java.security.KeyStore store = java.security.KeyStore.getInstance("PKCS12");
            store.load(null, null);
            int i = 0;
            for (java.security.cert.Certificate cert :
                    java.security.cert.CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                store.setCertificateEntry("ca" + i++, cert);
            }
            java.io.File file = java.io.File.createTempFile("redisson-sync-truststore", ".p12");
            file.deleteOnExit();
            try (java.io.OutputStream out = new java.io.FileOutputStream(file)) {
                store.store(out, TRUSTSTORE_PASSWORD.toCharArray());
            }
            return file.toURI().toURL();
        } catch (Exception e) {
            throw new IllegalStateException("--tls-ca " + pemPath + ": " + e, e);
        }
    }

    private static void setOnConfigOrServer(Config config, Object server, String name, Class<?> type, Object arg) {
        if (!invoke(config, name, type, arg) && !invoke(server, name, type, arg)) {
            throw new IllegalStateException("this Redisson version has no " + name + "(" + type.getSimpleName() + ")");
        }
    }

    /** Redisson's NameMapper interface: org.redisson.config in 4.x, org.redisson.api in 3.x. */
    private static Class<?> nameMapperType() {
        for (String name : new String[] {"org.redisson.config.NameMapper", "org.redisson.api.NameMapper"}) {
            try {
                return Class.forName(name);
            } catch (ClassNotFoundException e) {
                // try the next
            }
        }
        throw new IllegalStateException("this Redisson version has no NameMapper");
    }

    /** --name-prefix: a NameMapper that puts the prefix before every name (and takes it off). */
    private static Object prefixMapper(Class<?> type, String prefix) {
        return Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (proxy, method, args) -> {
            switch (method.getName()) {
                case "map":
                    return prefix + args[0];
                case "unmap": {
                    String name = (String) args[0];
                    return name.startsWith(prefix) ? name.substring(prefix.length()) : name;
                }
                case "hashCode":
                    return System.identityHashCode(proxy);
                case "equals":
                    return proxy == args[0];
                case "toString":
                    return "NameMapper(prefix " + prefix + ")";
                default:
                    throw new UnsupportedOperationException(method.getName());
            }
        });
    }

    /** --pubsub auto|classic|sharded -> ShardedSubscriptionMode AUTO|OFF|ON, where it exists. */
    private static void setShardedSubscriptionMode(ClusterServersConfig c, String pubsub) {
        String constant = pubsub.equals("classic") ? "OFF" : pubsub.equals("sharded") ? "ON" : "AUTO";
        try {
            Class<?> modeClass = Class.forName("org.redisson.config.ShardedSubscriptionMode");
            Object value = null;
            for (Object e : modeClass.getEnumConstants()) {
                if (((Enum<?>) e).name().equals(constant)) {
                    value = e;
                }
            }
            if (value == null) {
                throw new NoSuchFieldException(constant);
            }
            Method m = ClusterServersConfig.class.getMethod("setShardedSubscriptionMode", modeClass);
            m.invoke(c, value);
        } catch (ReflectiveOperationException | RuntimeException e) {
            if (!pubsub.equals("auto")) {
                warn("this Redisson version has no shardedSubscriptionMode " + constant + "; --pubsub "
                        + pubsub + " ignored (" + e + ")");
            }
        }
    }

    /**
     * The UUID Redisson writes before ":threadId" in lock hash fields: ServiceManager.getId() (3.x
     * since the ServiceManager split, and 4.x), or ConnectionManager.getId() in older releases.
     */
    static String clientId(RedissonClient client) {
        String[][] paths = {
            {"getServiceManager", "getId"},
            {"getConnectionManager", "getServiceManager", "getId"},
            {"getConnectionManager", "getId"},
        };
        StringBuilder failures = new StringBuilder();
        for (String[] path : paths) {
            try {
                Object o = client;
                for (String name : path) {
                    o = call(o, name);
                }
                if (o != null) {
                    return o.toString();
                }
            } catch (ReflectiveOperationException | RuntimeException e) {
                failures.append(' ').append(String.join(".", path)).append(": ").append(e);
            }
        }
        throw new IllegalStateException("cannot find Redisson's client id:" + failures);
    }

    /** The Redisson version on the class path (jar manifest), else the --redisson option. */
    static String loadedVersion(Options o) {
        Package p = Redisson.class.getPackage();
        String v = p == null ? null : p.getImplementationVersion();
        return v != null && !v.isEmpty() ? v : o.redisson;
    }

    private static Object call(Object target, String name) throws ReflectiveOperationException {
        Method m = findMethod(target.getClass(), name);
        if (m == null) {
            throw new NoSuchMethodException(target.getClass().getName() + "." + name + "()");
        }
        try {
            return m.invoke(target);
        } catch (IllegalAccessException e) {
            m.setAccessible(true);
            return m.invoke(target);
        }
    }

    private static Method findMethod(Class<?> cls, String name) {
        for (Class<?> c = cls; c != null; c = c.getSuperclass()) {
            for (Method m : c.getDeclaredMethods()) {
                if (m.getName().equals(name) && m.getParameterCount() == 0) {
                    return m;
                }
            }
        }
        try {
            return cls.getMethod(name);
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    /** Calls target.name(arg) if such a method exists; false when it does not. */
    private static boolean invoke(Object target, String name, Class<?> type, Object arg) {
        Method m;
        try {
            m = target.getClass().getMethod(name, type);
        } catch (NoSuchMethodException e) {
            return false;
        }
        try {
            m.invoke(target, arg);
            return true;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(name + " failed", e);
        }
    }

    static void warn(String message) {
        System.err.println("java agent: warning: " + message);
    }
}
