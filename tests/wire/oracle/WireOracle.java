// Test oracle for Odradek's wire codecs: Kafka's own generated message classes decode each
// input and encode it again. Input lines: "<class> <version> <hex>"; output lines:
// "OK <bytes left unread> <hex of re-encoding>" or "ERR <exception>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.Readable;

public class WireOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"), 1 << 20);
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", -1);
            try {
                Class<?> cls = Class.forName(parts[0]);
                short version = Short.parseShort(parts[1]);
                ByteBufferAccessor reader = new ByteBufferAccessor(ByteBuffer.wrap(unhex(parts[2])));
                Message msg = (Message) cls.getConstructor(Readable.class, short.class).newInstance(reader, version);
                ObjectSerializationCache cache = new ObjectSerializationCache();
                ByteBuffer buf = ByteBuffer.allocate(msg.size(cache, version));
                msg.write(new ByteBufferAccessor(buf), cache, version);
                out.println("OK " + reader.remaining() + " " + hex(buf.array()));
            } catch (Throwable t) {
                Throwable cause = t.getCause() != null ? t.getCause() : t;
                out.println("ERR " + cause.toString().replace('\n', ' '));
            }
        }
        out.flush();
    }

    private static byte[] unhex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }

    private static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(Character.forDigit((x >> 4) & 15, 16)).append(Character.forDigit(x & 15, 16));
        }
        return sb.toString();
    }
}
