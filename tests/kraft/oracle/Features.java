import java.util.Map;
import org.apache.kafka.server.common.Feature;
import org.apache.kafka.server.common.FeatureVersion;
import org.apache.kafka.server.common.MetadataVersion;

/** Prints the facts of kafka-server-common's MetadataVersion and Feature enums, one per line. */
public class Features {
    public static void main(String[] args) {
        System.out.println("latest " + MetadataVersion.LATEST_PRODUCTION.featureLevel());
        for (MetadataVersion mv : MetadataVersion.VERSIONS) {
            if (!mv.isProduction()) continue;
            System.out.println("mv " + mv.featureLevel() + " " + mv.version() + " " + mv.registerBrokerRecordVersion()
                + " " + mv.partitionRecordVersion() + " " + mv.partitionChangeRecordVersion()
                + " " + mv.isMetadataTransactionSupported() + " " + mv.isDirectoryAssignmentSupported()
                + " " + mv.isCordonedLogDirsSupported() + " " + mv.didMetadataChange());
            for (Feature f : Feature.PRODUCTION_FEATURES) {
                System.out.println("default " + f.featureName() + " " + mv.featureLevel() + " " + f.defaultLevel(mv));
            }
        }
        for (String name : args) {
            try {
                System.out.println("release " + name + " " + MetadataVersion.fromVersionString(name, false).featureLevel());
            } catch (IllegalArgumentException e) {
                System.out.println("release " + name + " none");
            }
        }
        for (Feature f : Feature.PRODUCTION_FEATURES) {
            System.out.println("range " + f.featureName() + " " + f.minimumProduction() + " " + f.latestProduction());
            for (FeatureVersion v : f.featureVersions()) {
                for (Map.Entry<String, Short> d : v.dependencies().entrySet()) {
                    System.out.println("dep " + f.featureName() + " " + v.featureLevel() + " " + d.getKey() + " " + d.getValue());
                }
            }
        }
    }
}
