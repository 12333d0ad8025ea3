import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's exactly-once consume-transform-produce loop with the Java clients: a
 * read_committed consumer in a group, a transactional producer, each poll's output and
 * consumed offsets committed in one transaction (sendOffsetsToTransaction with the
 * group's metadata). Runs until killed; prints one JSON line per committed transaction.
 *
 * initTransactions runs first, so a restarted loop fences its killed predecessor and
 * aborts its open transaction before reading any offset.
 *
 * Usage: EosCopyLoop BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID
 */
public final class EosCopyLoop {
    public static void main(String[] args) {
        String bootstrap = args[0], input = args[1], output = args[2], group = args[3];
        Properties consumerConfig = new Properties();
        consumerConfig.put("bootstrap.servers", bootstrap);
        consumerConfig.put("group.id", group);
        consumerConfig.put("isolation.level", "read_committed");
        consumerConfig.put("enable.auto.commit", "false");
        consumerConfig.put("auto.offset.reset", "earliest");
        consumerConfig.put("max.poll.records", "50");
        // A static member: a restarted loop takes the killed one's place at once.
        consumerConfig.put("group.instance.id", args[4]);
        consumerConfig.put("session.timeout.ms", "6000");
        consumerConfig.put("heartbeat.interval.ms", "1000");
        Properties producerConfig = new Properties();
        producerConfig.put("bootstrap.servers", bootstrap);
        producerConfig.put("transactional.id", args[4]);
        producerConfig.put("transaction.timeout.ms", "10000");
        try (KafkaConsumer<String, String> consumer =
                        new KafkaConsumer<>(consumerConfig, new StringDeserializer(), new StringDeserializer());
                KafkaProducer<String, String> producer =
                        new KafkaProducer<>(producerConfig, new StringSerializer(), new StringSerializer())) {
            producer.initTransactions();
            consumer.subscribe(List.of(input));
            long committed = 0;
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<String, String> record : records) {
                    String transformed = record.value() + ";copied";
                    producer.send(new ProducerRecord<>(output, record.key(), transformed));
                    next.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                producer.commitTransaction();
                committed += records.count();
                System.out.println("{\"committed\":" + committed + "}");
            }
        }
    }
}
