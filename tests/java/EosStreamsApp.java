import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams loop of "How Kafka achieves exactly-once semantics" with
 * processing.guarantee=exactly_once_v2: read the input, update a state store (a count per
 * key, backed by a changelog topic), write "value;n" where n is the key's running count,
 * then commit the input offsets, the changelog and the output in one transaction.
 * After a crash the count restarts from the changelog, so n is the record's 1-based
 * position among its key's records exactly when nothing was processed twice.
 *
 * Prints a JSON line per state change and per 50 records processed (not yet committed).
 * The instance is a static group member (group.instance.id), so a restarted instance takes
 * its place at once instead of waiting for the killed one's session to expire.
 *
 * Usage: EosStreamsApp BOOTSTRAP APPLICATION_ID STATE_DIR INPUT OUTPUT
 */
public final class EosStreamsApp {
    static final String STORE = "counts";

    public static void main(String[] args) throws InterruptedException {
        Properties config = new Properties();
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        config.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        config.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        config.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 10000);
        config.put(StreamsConfig.consumerPrefix("group.instance.id"), args[1] + "-instance");
        config.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        config.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.Long()));
        builder.stream(args[3], Consumed.with(Serdes.String(), Serdes.String()))
                .process(CountingProcessor::new, STORE)
                .to(args[4], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("{\"state\":\"" + now + "\"}");
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
        stopped.await();
    }

    static final class CountingProcessor implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> context;
        private KeyValueStore<String, Long> counts;
        private long processed;

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.context = context;
            this.counts = context.getStateStore(STORE);
        }

        @Override
        public void process(Record<String, String> record) {
            Long before = counts.get(record.key());
            long count = before == null ? 1 : before + 1;
            counts.put(record.key(), count);
            context.forward(record.withValue(record.value() + ";" + count));
            if (++processed % 50 == 0) {
                System.out.println("{\"processed\":" + processed + "}");
            }
        }
    }
}
