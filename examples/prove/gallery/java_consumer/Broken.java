// BROKEN: a Java consumer (kafka-clients) with enable.auto.commit left at its default (true)
// copying orders to order-events with a plain producer. Offsets are committed every 5 s from
// inside poll(), whatever was sent since: a kill redoes everything sent after the last
// auto-commit (order-events: duplicated).
//
//   onceflow prove command --input orders --output topic:order-events --quick \
//       -- java -cp "$KAFKA_LIBS/*" Broken.java
//
// ($KAFKA_LIBS: a directory of Apache Kafka's jars, e.g. ~/.cache/onceflow/kafka-4.4.0/libs
// after `onceflow kafka-cluster --fetch`; or compile once with javac and run the class.)

import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class Broken {
    public static void main(String[] args) {
        String bootstrap = System.getenv("ONCEFLOW_BOOTSTRAP");

        Properties consumerConfig = new Properties();
        consumerConfig.put("bootstrap.servers", bootstrap);
        consumerConfig.put("group.id", "order-events");
        consumerConfig.put("auto.offset.reset", "earliest");
        consumerConfig.put("key.deserializer", StringDeserializer.class.getName());
        consumerConfig.put("value.deserializer", StringDeserializer.class.getName());

        Properties producerConfig = new Properties();
        producerConfig.put("bootstrap.servers", bootstrap);
        producerConfig.put("key.serializer", StringSerializer.class.getName());
        producerConfig.put("value.serializer", StringSerializer.class.getName());

        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfig);
                KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig)) {
            consumer.subscribe(List.of(System.getenv("ONCEFLOW_INPUT_TOPIC")));
            while (true) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    producer.send(new ProducerRecord<>("order-events", record.key(), record.value()));
                }
            }
        }
    }
}
