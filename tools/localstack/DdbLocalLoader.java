import java.lang.instrument.Instrumentation;

/**
 * A Java agent that changes nothing, in place of LocalStack's ddb-local-loader-0.1.jar.
 *
 * LocalStack always starts DynamoDB Local with -javaagent:ddb-local-loader-0.1.jar, which it normally downloads
 * from GitHub (no network here); its one job is to lift DynamoDB Local's limit of 20 global secondary indexes per
 * table. Dormant's table has far fewer, so an agent that does nothing serves (tests/localstack.py builds it).
 */
public final class DdbLocalLoader {
    private DdbLocalLoader() {
    }

    public static void premain(String arguments, Instrumentation instrumentation) {
    }
}
