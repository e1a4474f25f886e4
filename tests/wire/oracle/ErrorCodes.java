import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;

/** Prints every error of the kafka-clients jar on the classpath: code, name, retriable. */
public class ErrorCodes {
    public static void main(String[] args) {
        for (Errors e : Errors.values()) {
            System.out.println(e.code() + " " + e.name() + " " + (e.exception() instanceof RetriableException));
        }
    }
}
