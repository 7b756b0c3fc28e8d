import java.lang.reflect.Field;

import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

/**
 * DynamoDB Local (AWS's own emulator) listening on one address only.
 *
 * DynamoDBLocal.jar's ServerRunner binds every interface and has no option to choose one; this launcher builds
 * the same server from the same command-line arguments, binds its connector to -Ddormant.host (default
 * 127.0.0.1) and starts it. Telemetry is never configured, so nothing leaves the machine whatever the arguments.
 * Compiled on first use by dormant.dev.dynamodb_local (javac), which runs it for tests/servers.py and `dormant dev`.
 */
public final class LoopbackDynamoDBLocal {
    private LoopbackDynamoDBLocal() {
    }

    public static void main(String[] args) throws Exception {
        String host = System.getProperty("dormant.host", "127.0.0.1");
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        for (Connector connector : server.getConnectors()) {
            ((ServerConnector) connector).setHost(host);
        }
        proxy.start();
        System.out.println("DynamoDB Local listening on " + host);
    }
}
