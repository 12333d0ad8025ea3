// FIXED: a Java consume-transform-produce with Kafka transactions. Auto-commit is off; each
// poll's records are sent to order-events and the consumer's next offsets are sent to the
// same transaction (sendOffsetsToTransaction), which commits them together: a kill aborts
// both and the batch is read again; the restarted producer's initTransactions() fences the
// dead one. The consumer reads read_committed (the Java client's default is
// read_uncommitted).
//
//   onceflow prove command --input orders --output topic:order-events --quick \
//       -- java -cp "$KAFKA_LIBS/*" Fixed.java
//
// ($KAFKA_LIBS: a directory of Apache Kafka's jars, e.g. ~/.cache/onceflow/kafka-4.4.0/libs
// after `onceflow kafka-cluster --fetch`; or compile once with javac and run the class.)

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

public class Fixed {
    public static void main(String[] args) {
        String bootstrap = System.getenv("ONCEFLOW_BOOTSTRAP");

        Properties consumerConfig = new Properties();
        consumerConfig.put("bootstrap.servers", bootstrap);
        consumerConfig.put("group.id", "order-events");
        consumerConfig.put("auto.offset.reset", "earliest");
        consumerConfig.put("enable.auto.commit", "false");
        consumerConfig.put("isolation.level", "read_committed");
        consumerConfig.put("key.deserializer", StringDeserializer.class.getName());
        consumerConfig.put("value.deserializer", StringDeserializer.class.getName());

        Properties producerConfig = new Properties();
        producerConfig.put("bootstrap.servers", bootstrap);
        producerConfig.put("transactional.id", "order-events");
        producerConfig.put("key.serializer", StringSerializer.class.getName());
        producerConfig.put("value.serializer", StringSerializer.class.getName());

        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfig);
                KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig)) {
            producer.initTransactions();
            consumer.subscribe(List.of(System.getenv("ONCEFLOW_INPUT_TOPIC")));
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<String, String> record : records) {
                    producer.send(new ProducerRecord<>("order-events", record.key(), record.value()));
                    next.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                producer.commitTransaction();
            }
        }
    }
}
